"""The containers a Keras model comes in, read as untrusted input: a .keras zip and HDF5
(the .keras file's model.weights.h5 and legacy .h5 files). A TF.js layers model's
weight shards are read by the import core's TF.js weight reader
(interop/tfjs_weights.py), the one ff.tfjs.load uses.

Every read is bounded: the file (read_bounded) and each zip member within max_bytes
before it is inflated (a member that inflates past its declared size, or by more than
MAX_RATIO, is refused: zip bombs); zip member names are plain names (no folders out, no
absolute paths); HDF5 objects are reached through hard links only (no external or soft
links, no external or virtual datasets), and a dataset's shape and dtype are checked
against max_elements and the bytes left before it is read. JSON that does not parse
is a KerasImportError, never a raw exception.
"""
from __future__ import annotations

import io
import json
import math
import re
import zipfile

import numpy as np

from ..interop.errors import short
from ..interop.limits import MAX_RANK
from .errors import KerasImportError

MAX_RATIO = 1000            # a zip member may inflate to at most this many times its size
MAX_MEMBERS = 10_000
KERAS_MEMBERS = ("config.json", "metadata.json", "model.weights.h5", "model.weights.npz")


def parse_json(data, what):
    """JSON text (bytes or str) as Python values, or a KerasImportError saying why not."""
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as err:
        raise KerasImportError(f"{what} is not valid JSON: {short(err, 200)}") from None
    except RecursionError:
        raise KerasImportError(f"{what}: its JSON nests too deep") from None


# -- .keras: a zip -------------------------------------------------------------------
def read_keras_zip(data: bytes, max_bytes: int, path="model") -> dict:
    """{member name: bytes} of the members a .keras file holds (config.json,
    metadata.json, model.weights.h5); others (assets/) are not read."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise KerasImportError(f"{short(path)!r} is not a .keras file (not a zip: "
                               f"{short(err, 100)})") from None
    if len(infos) > MAX_MEMBERS:
        raise KerasImportError(f"{short(path)!r}: the zip holds more than {MAX_MEMBERS} "
                               f"members")
    out, total = {}, 0
    for info in infos:
        name = info.filename
        if "\0" in name or name.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", name) \
                or re.match(r"^[A-Za-z]:", name):
            raise KerasImportError(f"{short(path)!r}: zip member {short(name)!r} is not a "
                                   f"plain name inside the archive")
        if name not in KERAS_MEMBERS:
            continue
        if info.file_size > max_bytes - total or \
                info.file_size > MAX_RATIO * max(info.compress_size, 1) + 4096:
            raise KerasImportError(f"{short(path)!r}: zip member {name!r} declares "
                                   f"{info.file_size} bytes (from {info.compress_size}), "
                                   f"over max_bytes={max_bytes} or a {MAX_RATIO}:1 ratio")
        try:
            with archive.open(info) as f:
                body = f.read(info.file_size + 1)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError,
                NotImplementedError) as err:
            raise KerasImportError(f"{short(path)!r}: cannot read zip member {name!r}: "
                                   f"{short(err, 100)}") from None
        if len(body) > info.file_size:
            raise KerasImportError(f"{short(path)!r}: zip member {name!r} inflates past "
                                   f"its declared size")
        total += len(body)
        out[name] = body
    if "config.json" not in out:
        raise KerasImportError(f"{short(path)!r}: the .keras file has no config.json")
    return out


# -- HDF5 ------------------------------------------------------------------------------
def h5py_module():
    try:
        import h5py  # optional (the keras extra): said when missing
    except ImportError:
        raise KerasImportError("reading or writing Keras .h5 and .keras files needs h5py: "
                               "pip install 'fragflow[keras]' (or pip install h5py)") from None
    return h5py


class H5Reader:
    """An HDF5 file in memory, read within limits: children through hard links only,
    datasets checked before they are read."""

    def __init__(self, data: bytes, what: str, max_elements: int, max_bytes: int):
        h5py = h5py_module()
        self.h5py, self.what = h5py, what
        self.max_elements, self.budget = max_elements, max_bytes
        try:
            self.file = h5py.File(io.BytesIO(data), "r")
        except (OSError, ValueError) as err:
            raise KerasImportError(f"{what} is not an HDF5 file: {short(err, 100)}") from None

    def close(self):
        self.file.close()

    def child(self, group, path: str, where: str):
        """The object at path (names separated by '/') below group, or None if absent;
        soft and external links, '.' and '..' are refused."""
        node = group
        for part in [p for p in str(path).split("/") if p]:
            if part in (".", ".."):
                raise KerasImportError(f"{where}: HDF5 path {short(path)!r} is not plain")
            if not isinstance(node, self.h5py.Group):
                return None
            try:
                link = node.get(part, getlink=True)
            except (KeyError, ValueError, OSError):
                return None
            if link is None:
                return None
            if not isinstance(link, self.h5py.HardLink):
                raise KerasImportError(f"{where}: HDF5 object {short(path)!r} is a "
                                       f"{type(link).__name__}; only plain objects are read")
            try:
                node = node[part]
            except (KeyError, ValueError, OSError) as err:
                raise KerasImportError(f"{where}: cannot open HDF5 object "
                                       f"{short(path)!r}: {short(err, 100)}") from None
        return node

    def names(self, group) -> list:
        try:
            return sorted(group.keys()) if isinstance(group, self.h5py.Group) else []
        except (ValueError, OSError):
            return []

    def attr(self, obj, name, default=None):
        try:
            if name not in obj.attrs:
                return default
            value = obj.attrs[name]
        except (OSError, ValueError, TypeError) as err:
            raise KerasImportError(f"{self.what}: cannot read attribute {name!r}: "
                                   f"{short(err, 100)}") from None
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, np.ndarray):
            return [v.decode("utf-8", "replace") if isinstance(v, bytes) else
                    v.item() if isinstance(v, np.generic) else v for v in value.tolist()]
        return value

    def array(self, ds, where: str) -> np.ndarray:
        """A dataset's value, checked: a plain numeric dataset within the limits."""
        if not isinstance(ds, self.h5py.Dataset):
            raise KerasImportError(f"{where}: not an HDF5 dataset")
        if ds.is_virtual or ds.external:
            raise KerasImportError(f"{where}: a virtual or external HDF5 dataset (data "
                                   f"outside the file) is refused")
        shape, dtype = tuple(ds.shape or ()), ds.dtype
        if dtype.kind not in "fiub" or dtype.itemsize > 8:
            raise KerasImportError(f"{where}: dtype {dtype} is not a number type")
        if len(shape) > MAX_RANK:
            raise KerasImportError(f"{where}: rank {len(shape)} is over {MAX_RANK}")
        count = math.prod(shape)
        if count > self.max_elements:
            raise KerasImportError(f"{where}: shape {list(shape)} = {count} elements, more "
                                   f"than max_elements={self.max_elements}")
        self.budget -= count * dtype.itemsize
        if self.budget < 0:
            raise KerasImportError(f"{where}: the weights hold more than max_bytes together")
        try:
            return np.asarray(ds[()])
        except (OSError, ValueError, TypeError) as err:
            raise KerasImportError(f"{where}: cannot read the dataset: "
                                   f"{short(err, 100)}") from None
