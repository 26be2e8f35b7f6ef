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

import math

import numpy as np

from ...ir.errors import FragflowError
from ...ir.graph import Graph
from ..interop.importer import (
    ImporterBase,
    Init,
    ReadAttrs as _ReadAttrs,
    clean_name,
    source_location as _source,
)
from ..interop.record import ImportedModel as _ImportedModelBase
from ..ops import name_scope, placeholder
from . import checks, functions
from .checks import MAX_BYTES, MAX_ELEMENTS
from .errors import OnnxImportError, UnsupportedOnnxOpError, require_onnx

STATIC_FOLD_LIMIT = 1 << 20      # elements: bigger static results are not folded
# onnx's reference evaluates these in Python loops or through im2col (a 256x256 Conv of
# constants asks for 32 GiB): folded only when outputs x largest input is below this
FOLD_WORK_LIMIT = 10 ** 7
HEAVY_FOLDS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "MaxPool", "AveragePool",
               "LpPool", "Attention", "RNN", "GRU", "LSTM", "DFT", "STFT", "Col2Im",
               "GridSample", "Resize", "Upsample", "RoiAlign", "DeformConv", "TopK"}


class Deferred:
    """A value the table holds that is not a tensor (masked.py: one of a size the data
    decides; sequences.py: a sequence of tensors), kept out of the graph for the rules
    that read it; `refusal` is the error any other reader gets (Importer.tensor)."""

    def __init__(self, refusal):
        self.refusal = refusal


class ImportedModel(_ImportedModelBase):
    """An ONNX model as a fragflow graph (interop.record.ImportedModel).

    graph: the ff.Graph. inputs / outputs: placeholders and result tensors, in the
    model's order. inputs_by_onnx_name / outputs_by_onnx_name (= inputs_by_name /
    outputs_by_name): the same by ONNX name (placeholders are named after the ONNX
    inputs where the name is a valid fragflow name, so sess.run(model.outputs,
    {"input": x}) works; else see these maps). variables: ONNX initializer name ->
    ff.Variable (the trainable weights; a weight the import stores in fragflow's layout
    is under 'name:hwio', 'name:hwcm', ...). opset: the model's default-domain opset.
    """

    format = "onnx"

    def __init__(self, graph, inputs, outputs, variables, opset, onnx_model):
        super().__init__(graph, inputs, outputs, variables)
        self.inputs_by_onnx_name = self.inputs_by_name
        self.outputs_by_onnx_name = self.outputs_by_name
        self.opset = opset
        self.onnx_model = onnx_model

    def __repr__(self):
        return super().__repr__()[:-1] + f", opset={self.opset})"


def onnx_dtype_name(elem_type: int) -> str:
    """'FLOAT' for 1; '#99' for a number ONNX gives no dtype."""
    names = require_onnx().TensorProto.DataType
    return names.Name(elem_type) if elem_type in names.values() else f"#{elem_type}"


class Importer(ImporterBase):
    """One import: the value table (ONNX name -> ndarray | Init | Tensor) and the
    helpers rules use (tensor, static, weight, attrs: interop.importer.ImporterBase)."""

    error_class = OnnxImportError

    def __init__(self, model, trainable: bool, input_shapes: dict | None,
                 label: str = "onnx", max_elements: int = MAX_ELEMENTS,
                 max_bytes: int = MAX_BYTES):
        super().__init__(trainable, max_elements, max_bytes)
        self.onnx = require_onnx()
        from onnx import numpy_helper  # optional: onnx (require_onnx above)
        self.numpy_helper = numpy_helper
        self.model = model
        self.input_shapes = dict(input_shapes or {})
        self.opset = checks.default_opset(model)
        self.index = None                # the node's index in the model
        self.origins: dict = {}          # id(tensor) -> graph input names it depends on
        self.label = label               # the model's file name, for source locations
        self.half_weights = False        # a float16 initializer was read

    # -- errors ---------------------------------------------------------------------------
    def where(self) -> str:
        here = checks.at(self.node, self.index) if self.node is not None else "model"
        return f"{here} (opset {self.opset})"

    def node_type(self) -> str:
        return self.node.op_type

    def static_error(self, x, what: str):
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
        return err

    def tensor(self, x):
        """ImporterBase.tensor; a Deferred value (masked.py: NonZero's indices of a
        computed mask, one value expanded to a computed shape; sequences.py: a sequence)
        is refused, naming the node that made it and why."""
        if isinstance(x, Deferred):
            err = self.error(f"reads the result of {x.refusal}")
            err.graph_input = getattr(x.refusal, "graph_input", None)   # for a rebinding
            raise err
        return super().tensor(x)

    def _variable(self, name, array, key):
        return self.make_variable(name, array, key)

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
            if self.half_weights:
                graph.weight_encodings.append({"dtype": "float16"})
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
        if array.dtype == np.float16:
            # kept half until a rule reads it; the graph records the form so that
            # exporters store such weights as float16 again (Graph.weight_encodings)
            self.half_weights = True
        if self.trainable and np.issubdtype(array.dtype, np.floating):
            return Init(t.name, array)
        return array

    def _import_node_guarded(self, node, rules):
        """_import_node, with any other error as an OnnxImportError naming the node
        (ImporterBase.guard)."""
        with self.guard():
            self._import_node(node, rules)

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
        self.check_made(outputs, first_new)

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


NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Dropout",
              # a sequence is a Python tuple of values (sequences.py), never one array
              "SplitToSequence", "SequenceConstruct", "SequenceEmpty", "SequenceInsert",
              "SequenceErase", "SequenceAt", "SequenceLength", "ConcatFromSequence"}


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
    if model.functions:              # local functions: their bodies replace the calls
        model = functions.inline_functions(onnx, model)
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
