"""One import's state and the helpers every format's rules call.

A value in the table is one of three things:
- a numpy array: known at import time ("static": constants, integer weights, and all
  that is computed only from them and from known shapes); rules may demand one
  (a reshape's shape, a slice's begin) and shape arithmetic never reaches the GPU;
- an Init: a float weight not yet in the graph; a Variable (trainable=True) when a rule
  first reads it, in the layout the rule asks for (weight());
- an ff Tensor: computed by the graph.
A format's importer subclasses ImporterBase: it names its error class, says where in
the model it is (where()), and walks its graph calling guard() around each node.
"""
from __future__ import annotations

import contextlib
import re

import numpy as np

from ...ir.errors import FragflowError
from ..ops import constant, name_scope
from ..tensor import Tensor, Variable
from .dtypes import int32_problem, supported_problem, to_supported_array
from .errors import ModelImportError
from .limits import MAX_BYTES, MAX_ELEMENTS, too_large

_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")

# Attributes a rule may leave unread: they change nothing fragflow computes (the old
# opsets' bookkeeping, a storage order of indices it does not return, the momentum of
# a statistics update it does not do).
HARMLESS_ATTRS = {"consumed_inputs", "is_test", "momentum", "storage_order"}


def clean_name(raw: str, fallback: str) -> str:
    """A foreign name as a valid fragflow name ('/conv1/Conv' -> 'conv1/Conv',
    'input:0' -> 'input_0'); fallback when nothing is left."""
    segments = [s for s in _BAD_NAME_CHARS.sub("_", raw or "").split("/") if s]
    return "/".join(segments)[:200] or fallback


class Init:
    """A float weight not yet in the graph: a Variable when a rule first reads it
    (in the layout that rule asks for), its array when a rule needs it static."""
    __slots__ = ("name", "array")

    def __init__(self, name, array):
        self.name, self.array = name, array


class Partial:
    """An int32 scalar or vector the graph computes but whose entries are partly known at
    import: a shape with a free dim (Shape of a [None, 16, 4] tensor is [?, 16, 4]) and
    what shape arithmetic makes of it. known: an object array (None: not known); make():
    the graph tensor, built when a rule first needs it. A reshape to [?, -1, 12] knows
    all it needs (one free entry is a -1), so such a model imports with its dim free.
    sources: per entry, (tensor, axis) where the entry is that tensor's dim at run time
    (what Shape read), else None."""
    __slots__ = ("known", "sources", "_make", "_tensor")

    def __init__(self, known, make, sources=None):
        self.known = np.asarray(known, dtype=object)
        self.sources = np.empty(self.known.shape, dtype=object) if sources is None \
            else _object_array(sources, self.known.shape)
        self._make, self._tensor = make, None

    @property
    def tensor(self):
        if self._tensor is None:
            self._tensor = self._make()
        return self._tensor

    @property
    def shape(self) -> tuple:
        return self.known.shape

    @staticmethod
    def of(known, make, sources=None):
        """A Partial, or the int32 array itself when every entry is known."""
        known = np.asarray(known, dtype=object)
        if all(v is not None for v in known.reshape(-1)):
            return np.asarray(known.tolist(), np.int32).reshape(known.shape)
        return Partial(known, make, sources)


def _object_array(items, shape):
    out = np.empty(len(items) if isinstance(items, list) else (), dtype=object)
    if isinstance(items, list):
        for k, item in enumerate(items):
            out[k] = item
    else:
        out[()] = items
    return out.reshape(shape)


def shape_of(x) -> tuple:
    """The shape of a table value (array, Init, Partial or Tensor)."""
    if isinstance(x, (Init, Partial)):
        return tuple(x.array.shape) if isinstance(x, Init) else x.shape
    return tuple(np.shape(x)) if isinstance(x, np.ndarray) else tuple(x.shape)


def dtype_of(x) -> str:
    """fragflow's dtype name of a table value."""
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, Partial):
        return "int32"
    array = x.array if isinstance(x, Init) else np.asarray(x)
    if array.dtype == np.bool_:
        return "bool"
    return "float32" if np.issubdtype(array.dtype, np.floating) else "int32"


class ImporterBase:
    """The value table and the helpers rules use. Subclasses set error_class and
    override where()."""

    error_class = ModelImportError

    def __init__(self, trainable: bool, max_elements: int = MAX_ELEMENTS,
                 max_bytes: int = MAX_BYTES):
        self.trainable = trainable
        self.max_elements = max_elements
        self.static_budget = max_bytes   # left for the values computed at import
        self.values: dict = {}
        self.graph_inputs: dict = {}     # input name -> placeholder
        self.variables: dict = {}        # weight name -> Variable (the format's layout)
        self._weights: dict = {}         # (weight name, layout key) -> Variable
        self.node = None                 # the node being imported (for errors)
        self.graph = self.root = None

    # -- errors ---------------------------------------------------------------------------
    def where(self) -> str:
        """Where the import is, for errors ("Conv node 'conv1'"); "model" between nodes."""
        return "model"

    def error(self, what: str, cls=None):
        return (cls or self.error_class)(f"{self.where()}: {what}")

    def check_elements(self, shape, what: str):
        """An error when a tensor of `shape` (None: a free dim) would have more than
        max_elements elements; called before numpy or a graph op makes it."""
        count = too_large(shape, self.max_elements)
        if count is not None:
            raise self.error(f"{what} would have shape {list(shape)} = {count} elements, "
                             f"more than max_elements={self.max_elements} (pass a larger "
                             f"max_elements to the load if you trust the model)")

    def check_made(self, outputs, first_new: int):
        """What a node made is within the limits: each static result and each tensor of
        the graph ops its rule added (known dims), and all static results together
        within max_bytes."""
        for k, value in enumerate(outputs):
            if isinstance(value, np.ndarray):
                self.check_elements(value.shape, f"output {k}")
                self.static_budget -= value.nbytes
                if self.static_budget < 0:
                    raise self.error("the values computed at import time hold more than "
                                     "max_bytes together (pass a larger max_bytes if you "
                                     "trust the model)")
        for made in self.graph.nodes[first_new:]:
            for v in made.outputs:
                self.check_elements(v.shape, f"{made.op} '{made.name}'")

    @contextlib.contextmanager
    def guard(self):
        """Any failure inside (a graph op's ShapeError, a rule tripping over a malformed
        node, numpy running out of memory) as this format's error naming the node: a
        hostile file ends in a clear error, never in a raw traceback."""
        try:
            yield
        except self.error_class:
            raise
        except FragflowError as err:     # a graph op's own check (a ShapeError ...)
            raise self.error(str(err)) from err
        except MemoryError:
            raise self.error("the import ran out of memory (a tensor larger than the "
                             "machine holds; lower max_elements)") from None
        except RecursionError:
            raise self.error("the import recursed too deep") from None
        except Exception as err:     # noqa: BLE001 -- see the docstring
            hint = {IndexError: " (an axis or operand out of range?)",
                    KeyError: " (a required attribute or operand missing?)"}.get(
                        type(err), "")
            raise self.error(f"cannot import the node{hint}: {type(err).__name__}: "
                             f"{str(err)[:300]}") from err

    # -- values ---------------------------------------------------------------------------
    def is_static(self, x) -> bool:
        return isinstance(x, np.ndarray)

    def static(self, x, what: str) -> np.ndarray:
        """x's value at import time, or an error saying that input `what` must be known."""
        if isinstance(x, np.ndarray):
            return x
        if isinstance(x, Init):
            return x.array
        raise self.static_error(x, what)

    def static_error(self, x, what: str):
        return self.error(f"{what} must be known at import time (a constant, a weight or "
                          f"computed from them and from static shapes); it is computed by "
                          f"the graph")

    def ints(self, x, what: str) -> list:
        return [int(v) for v in np.asarray(self.static(x, what)).reshape(-1)]

    def as_int32(self, array: np.ndarray) -> np.ndarray:
        problem = int32_problem(array)
        if problem:
            raise self.error(problem)
        return array.astype(np.int32)

    def to_supported(self, array) -> np.ndarray:
        """An array in a dtype fragflow has: float32, int32 or bool."""
        array = np.asarray(array)
        problem = supported_problem(array)
        if problem:
            raise self.error(problem)
        return to_supported_array(array)

    def tensor(self, x) -> Tensor:
        """x as a graph tensor: static arrays become constants, weights Variables."""
        if isinstance(x, Tensor):
            return x
        if isinstance(x, Partial):
            return x.tensor
        if isinstance(x, Init):
            if x.name not in self.variables:
                self.variables[x.name] = self.make_variable(x.name, x.array, "")
            return self.variables[x.name]
        if x is None:
            raise self.error("a required input is missing")
        return constant(self.to_supported(x))

    def weight(self, x, key: str, transform):
        """x transformed by the numpy function transform, made at import time: a
        Variable for a weight (once per layout key), a constant for a static array;
        None when x is computed by the graph (the rule then transforms it with graph
        ops). A float16 weight is transformed in float32 and stays float16 where the
        result is exactly halves (a transpose, a reshape)."""
        if isinstance(x, Init):
            if (x.name, key) not in self._weights:
                array = x.array
                if array.dtype == np.float16:
                    done = np.asarray(transform(array.astype(np.float32)))
                    array = done.astype(np.float16) if _exactly_half(done) else done
                else:
                    array = transform(array)
                self._weights[(x.name, key)] = self.make_variable(x.name, array, key)
                self.variables.setdefault(f"{x.name}:{key}" if key else x.name,
                                          self._weights[(x.name, key)])
            return self._weights[(x.name, key)]
        if isinstance(x, np.ndarray):
            return constant(self.to_supported(transform(x)))
        return None

    def make_variable(self, name, array, key):
        """A Variable of the weight; a float16 one stays float16 until it is used
        (ir/ops/state.py variable: its type is float32)."""
        base = clean_name(name, "weight") + (f"_{key}" if key else "")
        array = np.ascontiguousarray(array)
        with self.root.as_default(), name_scope("/"):   # never inside a loop's body
            return Variable(array if array.dtype == np.float16 else
                            self.to_supported(array), name=base)


def _exactly_half(array: np.ndarray) -> bool:
    """Whether float16 holds every value of a float32 array (NaN as NaN)."""
    if array.dtype != np.float32:
        return False
    with np.errstate(over="ignore"):
        back = array.astype(np.float16).astype(np.float32)
    return bool(np.array_equal(back, array, equal_nan=True))


class ReadAttrs(dict):
    """A node's attributes that remember which ones the rule read: one it ignored is
    an attribute fragflow does not support, and the import says so."""

    def __init__(self, values, harmless=HARMLESS_ATTRS):
        super().__init__(values)
        self.read: set = set()
        self.harmless = harmless

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def unread(self) -> list:
        return sorted(set(self) - self.read - set(self.harmless))

    def check_all_read(self, ctx):
        unread = self.unread()
        if unread:
            raise ctx.error(f"attribute(s) {', '.join(unread)} not supported by fragflow's "
                            f"import of {ctx.node_type()}")


@contextlib.contextmanager
def source_location(graph, text):
    """Nodes made inside carry `text` (the model file and node) as their source location,
    in dumps and errors, instead of the line of the load call."""
    saved = getattr(graph, "_source_override", None)
    graph._source_override = text
    try:
        yield
    finally:
        graph._source_override = saved
