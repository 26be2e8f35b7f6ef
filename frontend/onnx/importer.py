"""Reading an ONNX model into a fragflow graph.

The walk: placeholders for the graph inputs, each node in the model's (topological) order
through its rule in op_table.RULES, then the outputs. What makes it more than a lookup:

- Values known at import time stay numpy arrays ("static"): Constant nodes, integer
  initializers and everything computed only from them (Shape of a known shape, Gather,
  Concat, Unsqueeze, Slice...). A node whose inputs are all static is evaluated at
  import with onnx's reference evaluator, so shape arithmetic never reaches the GPU and
  rules may demand static inputs (Reshape's shape, Slice's starts).
- Float initializers become ff.Variables (trainable=True, the default): ff.gradients, the
  optimizers and sess.save work on the imported model. A rule may ask for a variable in
  another layout (a conv weight as HWIO), made once at import: free when the model runs.
- int64 becomes int32 where every value fits, else OnnxImportError naming the node.
- ONNX is NCHW and fragflow's convolutions NHWC: rules keep ONNX's semantics exactly by
  transposing around each convolution; passes/layout_transposes.py removes the pairs.
- A model is untrusted input: checks.py reads it within max_bytes and checks its structure,
  tensors and nodes first; each node's output sizes (ONNX's shape inference) and each tensor
  its rule adds are held to max_elements before they are made (docs/ONNX.md, "Limits"); any
  other error of a rule becomes an OnnxImportError naming the node.
"""
from __future__ import annotations

import contextlib
import math
import re

import numpy as np

from ...ir.errors import FragflowError
from ...ir.graph import Graph
from ..ops import constant, name_scope, placeholder
from ..session import Session
from ..tensor import Tensor, Variable
from . import checks
from .checks import MAX_BYTES, MAX_ELEMENTS
from .errors import OnnxImportError, UnsupportedOnnxOpError, require_onnx

INT32_MIN, INT32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max
STATIC_FOLD_LIMIT = 1 << 20      # elements: bigger static results are not folded
# onnx's reference evaluates these in Python loops or through im2col (a 256x256 Conv of
# constants asks for 32 GiB): folded only when outputs x largest input is below this
FOLD_WORK_LIMIT = 10 ** 7
HEAVY_FOLDS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "MaxPool", "AveragePool",
               "LpPool", "Attention", "RNN", "GRU", "LSTM", "DFT", "STFT", "Col2Im",
               "GridSample", "Resize", "Upsample", "RoiAlign", "DeformConv", "TopK"}
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")


def clean_name(raw: str, fallback: str) -> str:
    """An ONNX name as a valid fragflow name ('/conv1/Conv' -> 'conv1/Conv',
    'input:0' -> 'input_0'); fallback when nothing is left."""
    segments = [s for s in _BAD_NAME_CHARS.sub("_", raw or "").split("/") if s]
    return "/".join(segments)[:200] or fallback


class Init:
    """A float initializer not yet in the graph: a Variable when a rule first reads it
    (in the layout that rule asks for), its array when a rule needs it static."""
    __slots__ = ("name", "array")

    def __init__(self, name, array):
        self.name, self.array = name, array


class ImportedModel:
    """An ONNX model as a fragflow graph.

    graph: the ff.Graph. inputs / outputs: placeholders and result tensors, in the
    model's order. inputs_by_onnx_name / outputs_by_onnx_name: the same by ONNX name
    (placeholders are named after the ONNX inputs where the name is a valid fragflow
    name, so sess.run(model.outputs, {"input": x}) works; else see these maps).
    variables: ONNX initializer name -> ff.Variable (the trainable weights; a weight
    the import stores in fragflow's layout is under 'name:hwio', 'name:hwcm', ...).
    opset: the model's default-domain opset.
    """

    def __init__(self, graph, inputs, outputs, variables, opset, onnx_model):
        self.graph = graph
        self.inputs_by_onnx_name = dict(inputs)
        self.outputs_by_onnx_name = dict(outputs)
        self.inputs = list(self.inputs_by_onnx_name.values())
        self.outputs = list(self.outputs_by_onnx_name.values())
        self.variables = variables
        self.opset = opset
        self.onnx_model = onnx_model

    def feed_dict(self, feeds: dict) -> dict:
        """{ONNX input name or placeholder: array} -> {placeholder: array}."""
        return {self.inputs_by_onnx_name.get(k, k) if isinstance(k, str) else k: v
                for k, v in feeds.items()}

    def session(self, **kwargs):
        """An ff.Session of the model's graph (kwargs as ff.Session's)."""
        return Session(self.graph, **kwargs)

    def __repr__(self):
        return (f"ImportedModel(graph={self.graph.name!r}, "
                f"inputs={list(self.inputs_by_onnx_name)}, "
                f"outputs={list(self.outputs_by_onnx_name)}, variables={len(self.variables)}, "
                f"opset={self.opset})")


def onnx_dtype_name(elem_type: int) -> str:
    """'FLOAT' for 1; '#99' for a number ONNX gives no dtype."""
    names = require_onnx().TensorProto.DataType
    return names.Name(elem_type) if elem_type in names.values() else f"#{elem_type}"


class Importer:
    """One import: the value table (ONNX name -> ndarray | Init | Tensor) and the
    helpers rules use (tensor, static, weight, attrs)."""

    def __init__(self, model, trainable: bool, input_shapes: dict | None,
                 label: str = "onnx", max_elements: int = MAX_ELEMENTS,
                 max_bytes: int = MAX_BYTES):
        self.onnx = require_onnx()
        from onnx import numpy_helper  # optional: onnx (require_onnx above)
        self.numpy_helper = numpy_helper
        self.model = model
        self.trainable = trainable
        self.input_shapes = dict(input_shapes or {})
        self.opset = checks.default_opset(model)
        self.max_elements = max_elements
        self.static_budget = max_bytes    # left for the values computed at import
        self.index = None                # the node's index in the model
        self.values: dict = {}
        self.graph_inputs: dict = {}     # ONNX input name -> placeholder
        self.origins: dict = {}          # id(tensor) -> graph input names it depends on
        self.variables: dict = {}        # initializer name -> Variable (ONNX layout)
        self._weights: dict = {}         # (initializer name, layout key) -> Variable
        self.node = None                 # the node being imported (for errors)
        self.label = label               # the model's file name, for source locations

    # -- errors ---------------------------------------------------------------------------
    def error(self, what: str, cls=OnnxImportError):
        here = checks.at(self.node, self.index) if self.node is not None else "model"
        return cls(f"{here} (opset {self.opset}): {what}")

    def check_elements(self, shape, what: str):
        """OnnxImportError when a tensor of `shape` (None: a free dim) would have more
        than max_elements elements; called before numpy or a graph op makes it."""
        count = checks.too_large(shape, self.max_elements)
        if count is not None:
            raise self.error(f"{what} would have shape {list(shape)} = {count} elements, "
                             f"more than max_elements={self.max_elements} (pass a larger "
                             f"max_elements to ff.onnx.load if you trust the model)")

    # -- values ---------------------------------------------------------------------------
    def is_static(self, x) -> bool:
        return isinstance(x, np.ndarray)

    def static(self, x, what: str) -> np.ndarray:
        """x's value at import time, or an error saying that input `what` must be known."""
        if isinstance(x, np.ndarray):
            return x
        if isinstance(x, Init):
            return x.array
        err = self.error(f"{what} must be known at import time (a constant, an initializer "
                         f"or computed from them and from static shapes); it is computed "
                         f"by the graph")
        # the graph input it is, or an integer one it is computed from: a caller may
        # bind it (the ONNX backend binds inputs named so, and imports again). Float
        # inputs are data, never bound.
        err.graph_input = next((name for name, v in self.graph_inputs.items() if v is x),
                               None)
        if err.graph_input is None:
            err.graph_input = next((name for name in sorted(self.origins.get(id(x), ()))
                                    if self.graph_inputs[name].dtype != "float32"), None)
        raise err

    def ints(self, x, what: str) -> list:
        return [int(v) for v in np.asarray(self.static(x, what)).reshape(-1)]

    def as_int32(self, array: np.ndarray) -> np.ndarray:
        if array.size and (array.min() < INT32_MIN or array.max() > INT32_MAX):
            bad = array[(array < INT32_MIN) | (array > INT32_MAX)].reshape(-1)[0]
            raise self.error(f"an int64 tensor holds {int(bad)}, which does not fit in "
                             f"int32 (fragflow's integer type)")
        return array.astype(np.int32)

    def to_supported(self, array: np.ndarray) -> np.ndarray:
        """An array in a dtype fragflow has: float32, int32 or bool."""
        array = np.asarray(array)
        if array.dtype == np.bool_:
            return array
        if np.issubdtype(array.dtype, np.floating):
            return array.astype(np.float32)
        if np.issubdtype(array.dtype, np.integer):
            return self.as_int32(array) if array.dtype != np.int32 else array
        raise self.error(f"dtype {array.dtype} is not supported (fragflow has float32, "
                         f"int32 and bool)")

    def tensor(self, x) -> Tensor:
        """x as a graph tensor: static arrays become constants, initializers Variables."""
        if isinstance(x, Tensor):
            return x
        if isinstance(x, Init):
            if x.name not in self.variables:
                self.variables[x.name] = self._variable(x.name, x.array, "")
            return self.variables[x.name]
        if x is None:
            raise self.error("a required input is missing")
        return constant(self.to_supported(x))

    def weight(self, x, key: str, transform):
        """x transformed by the numpy function transform, made at import time: a
        Variable for an initializer (once per layout key), a constant for a static
        array; None when x is computed by the graph (the rule then transforms it with
        graph ops)."""
        if isinstance(x, Init):
            if (x.name, key) not in self._weights:
                self._weights[(x.name, key)] = self._variable(
                    x.name, transform(x.array), key)
                self.variables.setdefault(f"{x.name}:{key}" if key else x.name,
                                          self._weights[(x.name, key)])
            return self._weights[(x.name, key)]
        if isinstance(x, np.ndarray):
            return constant(self.to_supported(transform(x)))
        return None

    def _variable(self, name, array, key):
        base = clean_name(name, "weight") + (f"_{key}" if key else "")
        with self.root.as_default(), name_scope("/"):   # never inside a loop's body
            return Variable(self.to_supported(np.ascontiguousarray(array)), name=base)

    # -- attributes -----------------------------------------------------------------------
    def attrs(self, node) -> dict:
        from onnx import helper  # optional: onnx
        out = {}
        for a in node.attribute:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif a.type == self.onnx.AttributeProto.TENSOR:
                checks.check_tensor(self.onnx, value, f"attribute '{a.name}'",
                                    self.max_elements)
                value = self.numpy_helper.to_array(value)
            elif a.type == self.onnx.AttributeProto.GRAPHS:
                raise self.error(f"attribute '{a.name}' holds a list of subgraphs, which "
                                 f"fragflow does not import")
            # a GRAPH (Loop's body, If's branches, Scan's body) stays a GraphProto: its
            # rule imports it inside the control-flow op (control_flow.py)
            out[a.name] = value
        return out

    # -- the walk -------------------------------------------------------------------------
    def run(self) -> ImportedModel:
        from .op_table import RULES  # cycle: op_table imports this module's Init at its top
        g = self.model.graph
        graph = self.graph = self.root = Graph(clean_name(g.name, "onnx_model"))
        initializer_names = {t.name for t in g.initializer}
        inputs, outputs = {}, {}
        with graph.as_default(), _source(graph, f"{self.label}: graph input"):
            for vi in g.input:
                if vi.name in initializer_names:
                    continue        # an initializer listed as an input (IR < 4): a weight
                inputs[vi.name] = self._placeholder(vi)
                self.values[vi.name] = self.graph_inputs[vi.name] = inputs[vi.name]
                self.origins[id(inputs[vi.name])] = frozenset([vi.name])
            for t in g.initializer:
                self.values[t.name] = self._initializer(t)
            for index, node in enumerate(g.node):
                self.node, self.index = node, index
                with _source(graph, f"{self.label}:{index} {node.op_type}"):
                    self._import_node_guarded(node, RULES)
            self.node = None
            for vi in g.output:
                if vi.name not in self.values:
                    raise OnnxImportError(f"model output '{vi.name}' is not computed by "
                                          f"any node")
                outputs[vi.name] = self.tensor(self.values[vi.name])
        return ImportedModel(graph, inputs, outputs, dict(self.variables), self.opset,
                             self.model)

    def _placeholder(self, vi):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise OnnxImportError(f"graph input '{vi.name}' is not a tensor (sequences and "
                                  f"maps are not supported)")
        dtype = _DTYPES.get(tt.elem_type)
        if dtype is None:
            raise OnnxImportError(f"graph input '{vi.name}' has dtype "
                                  f"{onnx_dtype_name(tt.elem_type)}; fragflow has float32, "
                                  f"int32 (int64 inputs are fed as int32) and bool")
        shape = tuple(d.dim_value if d.HasField("dim_value") else None
                      for d in tt.shape.dim) if tt.HasField("shape") else None
        if vi.name in self.input_shapes:
            shape = tuple(self.input_shapes[vi.name])
        if shape is None:
            raise OnnxImportError(f"graph input '{vi.name}' has no shape; give one with "
                                  f"input_shapes={{'{vi.name}': (...)}}")
        if len(shape) > checks.MAX_RANK or any(d is not None and d < 0 for d in shape):
            raise OnnxImportError(f"graph input '{vi.name}' has shape {list(shape)[:40]} (at "
                                  f"most {checks.MAX_RANK} dims, none negative)")
        count = checks.too_large(shape, self.max_elements)
        if count is not None:
            raise OnnxImportError(f"graph input '{vi.name}' has shape {list(shape)} = "
                                  f"{count} elements, more than max_elements="
                                  f"{self.max_elements} (pass a larger max_elements if you "
                                  f"trust the model)")
        name = clean_name(vi.name, "input")
        with name_scope("/"):
            return placeholder(shape, dtype, name=name)

    def _initializer(self, t):
        checks.check_tensor(self.onnx, t, f"initializer '{t.name}'", self.max_elements)
        try:
            array = self.numpy_helper.to_array(t)
        except Exception as err:     # noqa: BLE001 -- data numpy_helper cannot read
            raise OnnxImportError(f"initializer '{t.name}' cannot be read: "
                                  f"{type(err).__name__}: {err}") from err
        if self.trainable and np.issubdtype(array.dtype, np.floating):
            return Init(t.name, array)
        return array

    def _import_node_guarded(self, node, rules):
        """_import_node, with any other error (a graph op's ShapeError, a rule or onnx's
        reference tripping over a malformed node) as an OnnxImportError naming the node:
        a hostile file ends in a clear error, never in a raw traceback."""
        try:
            self._import_node(node, rules)
        except OnnxImportError:
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

    def _import_node(self, node, rules):
        if node.domain not in ("", "ai.onnx"):
            raise self.error(f"op domain '{node.domain}' is not supported (only the default "
                             f"ONNX domain)", UnsupportedOnnxOpError)
        for n in node.input:
            if n and n not in self.values:
                raise self.error(f"input '{n}' is not produced by any earlier node")
        inputs = [self.values[n] if n else None for n in node.input]
        rule = rules.get(node.op_type)
        if rule is None:
            raise self.error(f"op type {node.op_type} is not supported by fragflow's ONNX "
                             f"importer (see docs/ONNX.md for the supported ops)",
                             UnsupportedOnnxOpError)
        schema = checks.schema_of(self.onnx, node, self.opset)
        problem = checks.node_problem(self.onnx, node, schema)
        if problem:
            raise self.error(problem)
        # the sizes of the outputs, from ONNX's shape inference, before anything is made
        predicted = checks.predicted_outputs(self.onnx, node, schema, inputs, self.opset)
        for k, shape in enumerate(predicted or ()):
            if shape is not None:
                self.check_elements(shape, f"output {k} ('{node.output[k]}')")
        outputs = None
        first_new = len(self.graph.nodes)
        if inputs and all(x is None or isinstance(x, np.ndarray) for x in inputs) \
                and node.op_type not in NEVER_FOLD and _cheap_fold(node, inputs, predicted):
            outputs = self._fold(node, inputs)
        if outputs is None:
            scope = clean_name(node.name, node.op_type)
            with name_scope(scope):
                attrs = _ReadAttrs(self.attrs(node))
                outputs = rule(self, node, inputs, attrs)
            attrs.check_all_read(self)
        outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        self._check_made(outputs, first_new)
        for k, name in enumerate(node.output):
            if name and k >= len(outputs):
                raise self.error(f"output {k} ('{name}') is not supported")
        origins = frozenset().union(*(self.origins.get(id(x), ()) for x in inputs
                                      if x is not None and not self.is_static(x)))
        for name, value in zip(node.output, outputs):
            if name:
                self.values[name] = value
                if origins and not self.is_static(value):
                    self.origins[id(value)] = origins

    def _check_made(self, outputs, first_new):
        """What the node made is within the limits: each static result and each tensor
        of the graph ops its rule added (known dims), and all static results together
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

    def _fold(self, node, inputs):
        """node evaluated at import by onnx's reference evaluator (its inputs are all
        static); None when that fails or the result is large (then the rule runs and
        fold_constants may still fold it)."""
        from onnx import helper  # optional: onnx
        from onnx.reference import ReferenceEvaluator  # optional: onnx
        if sum(x.size for x in inputs if x is not None) > STATIC_FOLD_LIMIT:
            return None
        names = [f"i{k}" for k in range(len(inputs))]
        feeds = {n: x for n, x in zip(names, inputs) if x is not None}
        copy = helper.make_node(node.op_type, [n if x is not None else ""
                                               for n, x in zip(names, inputs)],
                                [f"o{k}" for k in range(len(node.output))])
        copy.attribute.extend(node.attribute)
        try:
            evaluator = ReferenceEvaluator(copy, opsets={"": self.opset})
            results = evaluator.run(None, feeds)
        except MemoryError:
            raise
        except Exception:            # noqa: BLE001 -- the rule then builds graph ops
            return None
        results = [np.asarray(r) for r in results]
        if any(r.dtype == object or r.size > self.max_elements for r in results):
            return None              # sequences, strings, or a size inference missed
        return results


def _cheap_fold(node, inputs, predicted) -> bool:
    """Whether onnx's reference may evaluate node at import without a time or memory
    bomb: any op but HEAVY_FOLDS, and those when their outputs (known) times their
    largest input stay under FOLD_WORK_LIMIT."""
    if node.op_type not in HEAVY_FOLDS:
        return True
    if not predicted or any(s is None or None in s for s in predicted):
        return False
    largest = max(x.size for x in inputs if x is not None)
    return sum(math.prod(s) for s in predicted) * max(largest, 1) <= FOLD_WORK_LIMIT


# Attributes a rule may leave unread: they change nothing fragflow computes (the old
# opsets' bookkeeping, a storage order of indices it does not return, the momentum of
# a statistics update it does not do).
HARMLESS_ATTRS = {"consumed_inputs", "is_test", "momentum", "storage_order"}


class _ReadAttrs(dict):
    """A node's attributes that remember which ones the rule read: one it ignored is
    an attribute fragflow does not support, and the import says so."""

    def __init__(self, values):
        super().__init__(values)
        self.read: set = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def check_all_read(self, ctx):
        unread = sorted(set(self) - self.read - HARMLESS_ATTRS)
        if unread:
            raise ctx.error(f"attribute(s) {', '.join(unread)} not supported by fragflow's "
                            f"import of {ctx.node.op_type}")


@contextlib.contextmanager
def _source(graph, text):
    """Nodes made inside carry `text` (the ONNX file and node) as their source location,
    in dumps and errors, instead of the line of the ff.onnx.load call."""
    saved = getattr(graph, "_source_override", None)
    graph._source_override = text
    try:
        yield
    finally:
        graph._source_override = saved


NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Dropout"}


def _dtype_table():
    onnx = require_onnx()
    T = onnx.TensorProto
    return {T.FLOAT: "float32", T.DOUBLE: "float32", T.FLOAT16: "float32",
            T.INT32: "int32", T.INT64: "int32", T.INT16: "int32", T.INT8: "int32",
            T.UINT8: "int32", T.UINT16: "int32", T.BOOL: "bool"}


class _LazyDTypes(dict):
    def get(self, key, default=None):
        if not len(self):
            self.update(_dtype_table())
        return super().get(key, default)


_DTYPES = _LazyDTypes()


def load(model, *, trainable: bool = True, input_shapes: dict | None = None,
         max_elements: int = MAX_ELEMENTS, max_bytes: int = MAX_BYTES) -> ImportedModel:
    """Import an ONNX model (a path, bytes or an onnx.ModelProto) as a fragflow graph.

    trainable: float initializers become ff.Variables (fine-tuning, sess.save); False
    makes them constants (inference: fold_constants and fold_batch_norm then see them).
    input_shapes: {ONNX input name: shape} overriding the model's (None for a free dim).
    max_elements: the most elements one tensor may have (an initializer, a value
    computed at import, a tensor of the graph), checked before it is made (2**28).
    max_bytes: the most bytes the model (its file and external data) and the values
    computed at import may hold (2**31). A model is untrusted input: whatever is wrong
    with it is an OnnxImportError naming the node.

    >>> import fragflow as ff
    >>> m = ff.onnx.load("model.onnx")                          # doctest: +SKIP
    >>> ff.Session(m.graph).run(m.outputs, {"input": x})        # doctest: +SKIP
    """
    onnx = require_onnx()
    model, label = checks.read_model(onnx, model, max_bytes)
    checks.check_model(onnx, model)
    newest = onnx.defs.onnx_opset_version()
    importer = Importer(model, trainable, input_shapes, label, max_elements, max_bytes)
    if importer.opset > newest:
        raise OnnxImportError(f"the model uses opset {importer.opset}; the installed onnx "
                              f"knows opsets up to {newest} (upgrade onnx)")
    try:
        return importer.run()
    except FragflowError:
        raise
    except Exception as err:         # noqa: BLE001 -- a malformed model, never a traceback
        raise OnnxImportError(f"cannot import the model: {type(err).__name__}: "
                              f"{str(err)[:300]}") from err
