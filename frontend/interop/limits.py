"""A model file is untrusted input: the limits every importer holds it to, checked
before anything is allocated, and the one way a reader opens a file a model names."""
from __future__ import annotations

import math
import os

from .errors import ModelImportError, short

MAX_BYTES = 2 ** 31             # a model's files together (protobuf's own limit on one)
MAX_ELEMENTS = 2 ** 28          # one tensor: 1 GiB of float32, a 16384x16384 texture
MAX_RANK = 32
MAX_UNROLL = 100_000            # recurrent steps unrolled into the graph
MAX_NODES = 1_000_000           # nodes of one graph file


def too_large(shape, max_elements: int) -> int | None:
    """The number of elements of shape's known dims when more than max_elements."""
    count = math.prod(max(int(d), 0) for d in shape if d is not None)
    return count if count > max_elements else None


def read_bounded(path: str, max_bytes: int, what: str, error=ModelImportError) -> bytes:
    """The bytes of the regular file at path, refused (error) when missing, not a
    regular file or larger than max_bytes; never more than max_bytes + 1 read."""
    if not os.path.exists(path):
        raise error(f"cannot read {what} {short(path)!r}: no such file")
    if not os.path.isfile(path):
        raise error(f"cannot read {what} {short(path)!r}: not a regular file")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as err:
        raise error(f"cannot read {what} {short(path)!r}: {err}") from None
    if len(data) > max_bytes:
        raise error(f"{what} {short(path)!r} is larger than max_bytes={max_bytes} (pass a "
                    f"larger max_bytes if you trust it)")
    return data


def weight_path(base: str, location, what: str, error=ModelImportError) -> str:
    """The path of a file a model names (ONNX external data, a TF.js weight shard): a
    relative path to a regular file inside base's tree. Absolute paths, drive letters,
    URLs, NUL bytes and anything that resolves outside (.., symbolic links) are refused."""
    if not isinstance(location, str) or not location or "\0" in location \
            or os.path.isabs(location) or os.path.splitdrive(location)[0] \
            or "://" in location or location.startswith(("\\", "/")):
        raise error(f"{what}: path {short(location)!r} must be a relative path inside the "
                    f"model's folder")
    root = os.path.realpath(base)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise error(f"{what}: path {short(location)!r} lies outside the model's folder")
    if not os.path.isfile(path):
        raise error(f"{what}: file {short(location)!r} does not exist (or is not a regular "
                    f"file)")
    return path
