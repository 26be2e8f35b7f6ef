"""An ONNX file is untrusted input: the checks made before the importer builds anything.

- read_model: the model's bytes are bounded (max_bytes, the file and its external data
  together) before protobuf parses them; a decode error is an OnnxImportError; external
  data is read only from regular files inside the model's folder, within bounds, and a
  model given as bytes or a ModelProto (no folder) with external data is refused.
- check_model: an ir_version, a graph with outputs, a default-domain opset; every name
  defined once (inputs, initializers, node outputs), every node input defined by an
  earlier node (a cycle or a misordered node says so), no sparse initializers.
- check_tensor: a TensorProto's dtype is one fragflow reads, its dims are non-negative,
  its size is within max_elements, and its data holds exactly as many values as its
  dims say, checked before numpy_helper allocates anything.
- check_node: the node's attributes have the types ONNX's schema declares, required ones
  are present, and its inputs are as many as the schema allows.
- predicted_outputs: the shapes ONNX's shape inference gives the node's outputs (static
  inputs' values included), so that a node whose output is too large is refused before
  static evaluation or a rule allocates it.
"""
from __future__ import annotations

import math
import os

import numpy as np

# the limits every importer shares (interop/limits.py): MAX_BYTES (protobuf's own limit
# on one file; external data included), MAX_ELEMENTS, MAX_RANK, MAX_UNROLL
from ..interop.limits import (  # noqa: F401 (read from here by the ONNX modules)
    MAX_BYTES,
    MAX_ELEMENTS,
    MAX_RANK,
    MAX_UNROLL,
    read_bounded,
    too_large,
    weight_path,
)
from ..tensor import Tensor
from .errors import OnnxImportError, where

# bytes per element of the dtypes whose values numpy_helper can read into fragflow's
# (float32, int32, bool), and the TensorProto field holding them when not raw_data
_ITEM = {"FLOAT": (4, "float_data"), "DOUBLE": (8, "double_data"),
         "FLOAT16": (2, "int32_data"), "BFLOAT16": (2, "int32_data"),
         "INT8": (1, "int32_data"), "UINT8": (1, "int32_data"),
         "INT16": (2, "int32_data"), "UINT16": (2, "int32_data"),
         "INT32": (4, "int32_data"), "INT64": (8, "int64_data"),
         "UINT32": (4, "uint64_data"), "UINT64": (8, "uint64_data"),
         "BOOL": (1, "int32_data")}


def at(node, index: int) -> str:
    """"Conv node 'conv1'", or "Conv node '(unnamed)' #3" for a node without a name."""
    return where(node) + ("" if node.name else f" #{index}")


def _short(text, n=120) -> str:
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."


# -- reading --------------------------------------------------------------------------------
def read_model(onnx, model, max_bytes: int):
    """(ModelProto, label for source locations) from a path, bytes or a ModelProto."""
    if isinstance(model, onnx.ModelProto):
        if model.ByteSize() > max_bytes:
            raise OnnxImportError(f"the model is {model.ByteSize()} bytes, more than "
                                  f"max_bytes={max_bytes} (pass a larger max_bytes if you "
                                  f"trust it)")
        _load_external_data(onnx, model, None, max_bytes)
        return model, "onnx"
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, base, label = bytes(model), None, "onnx"
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        label = os.path.basename(path) or "onnx"
        data, base = _read_file(path, max_bytes), os.path.dirname(os.path.abspath(path))
    else:
        raise OnnxImportError(f"ff.onnx.load takes a path, bytes or an onnx.ModelProto, "
                              f"not {type(model).__name__}")
    if len(data) > max_bytes:
        raise OnnxImportError(f"the model is {len(data)} bytes, more than max_bytes="
                              f"{max_bytes} (pass a larger max_bytes if you trust it)")
    if not data:
        raise OnnxImportError("the model is empty (0 bytes): not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as err:     # noqa: BLE001 -- protobuf's DecodeError and its kin
        given = f"{_short(label)!r}" if base is not None else "the bytes given"
        raise OnnxImportError(f"{given} is not an ONNX model: protobuf cannot "
                              f"decode it ({type(err).__name__}: {_short(err)})") from None
    _load_external_data(onnx, proto, base, max_bytes - len(data))
    return proto, label


def _read_file(path: str, max_bytes: int) -> bytes:
    return read_bounded(path, max_bytes, "ONNX model", OnnxImportError)


def _all_tensors(onnx, graph):
    """(what, TensorProto) for the initializers and the tensor attributes of the nodes
    (subgraphs included: they are refused later, but their data must not be read)."""
    A = onnx.AttributeProto
    for t in graph.initializer:
        yield f"initializer '{_short(t.name)}'", t
    for node in graph.node:
        for a in node.attribute:
            here = f"attribute '{_short(a.name)}' of {where(node)}"
            if a.type == A.TENSOR or a.HasField("t"):
                yield here, a.t
            for t in a.tensors:
                yield here, t
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_tensors(onnx, g)


def _load_external_data(onnx, model, base, budget: int):
    """Each tensor stored outside the model: its bytes read into raw_data from a regular
    file inside base (the model's folder), within the file and within budget bytes."""
    EXTERNAL = onnx.TensorProto.EXTERNAL
    for what, t in _all_tensors(onnx, model.graph):
        if t.data_location != EXTERNAL:
            continue
        entries = {e.key: e.value for e in t.external_data}
        location = entries.get("location", "")
        if base is None:
            raise OnnxImportError(f"{what} stores its data in an external file "
                                  f"({_short(location)!r}); a model given as bytes or a "
                                  f"ModelProto has no folder to read it from: give the "
                                  f"model's path")
        try:
            offset = int(entries.get("offset", 0) or 0)
            length = None if entries.get("length") in (None, "") else int(entries["length"])
        except ValueError:
            raise OnnxImportError(f"{what}: external data offset/length are not "
                                  f"integers") from None
        path = _inside(base, location, what)
        size = os.path.getsize(path)
        length = size - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > size:
            raise OnnxImportError(f"{what}: external data [{offset}, {offset + length}) lies "
                                  f"outside {_short(location)!r} ({size} bytes)")
        if length > budget:
            raise OnnxImportError(f"{what}: the model and its external data are more than "
                                  f"max_bytes (pass a larger max_bytes if you trust it)")
        budget -= length
        with open(path, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _inside(base: str, location: str, what: str) -> str:
    """The path of an external data file, which must be a regular file in base's tree."""
    return weight_path(base, location, f"{what}: external data", OnnxImportError)


# -- the model's structure ---------------------------------------------------------------------
def default_opset(model) -> int:
    """The model's default-domain opset; OnnxImportError when it declares none (IR 3
    and later must; before IR 3 every model is opset 1; a model of other domains' ops
    only gets 1, and its first node's error names the domain)."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        if model.ir_version < 3:
            return 1
        if model.opset_import and all(n.domain not in ("", "ai.onnx")
                                      for n in model.graph.node):
            return 1                 # only other domains' ops: each node says it
        raise OnnxImportError("the model declares no opset for the default ONNX domain "
                              "(opset_import has no entry with domain '')")
    if len(versions) > 1 or versions[0] < 1:
        raise OnnxImportError(f"the model's default-domain opset {versions} is not one "
                              f"version of 1 or more")
    return versions[0]


def check_model(onnx, model):
    """The model as a whole, before any node is imported (see the module's docstring)."""
    if model.ir_version < 1 or not model.HasField("graph"):
        raise OnnxImportError("the model has no ir_version or no graph: empty, or not an "
                              "ONNX model")
    g = model.graph
    _check_text(model)
    if not g.output:
        raise OnnxImportError("the model's graph has no outputs: nothing to compute")
    if g.sparse_initializer:
        name = _short(g.sparse_initializer[0].values.name)
        raise OnnxImportError(f"sparse initializers ('{name}') are not supported")
    defined: dict = {}
    for vi in g.input:
        if vi.name in defined:
            raise OnnxImportError(f"graph input '{_short(vi.name)}' is listed twice")
        if not vi.name:
            raise OnnxImportError("a graph input has an empty name")
        defined[vi.name] = "a graph input"
    inputs = set(defined)
    seen_init = set()
    for t in g.initializer:
        if not t.name or t.name in seen_init:
            raise OnnxImportError(f"initializer '{_short(t.name)}' is "
                                  f"{'unnamed' if not t.name else 'defined twice'}")
        seen_init.add(t.name)
        defined[t.name] = "an initializer"      # may also be listed as an input (IR < 4)
    producer = {}
    for index, node in enumerate(g.node):
        for name in node.output:
            if name and name in producer:
                raise OnnxImportError(f"{at(node, index)}: output '{_short(name)}' is "
                                      f"already the output of node #{producer[name]}")
            if name and name in defined:
                raise OnnxImportError(f"{at(node, index)}: output '{_short(name)}' is "
                                      f"already {defined[name]}")
            if name:
                producer[name] = index
    ready = set(defined) | inputs
    for index, node in enumerate(g.node):
        for name in node.input:
            if not name or name in ready:
                continue
            if name in producer:
                raise OnnxImportError(
                    f"{at(node, index)}: input '{_short(name)}' is computed by a "
                    f"later node (#{producer[name]}): the nodes are not in topological order "
                    f"or form a cycle")
            raise OnnxImportError(f"{at(node, index)}: input '{_short(name)}' names no "
                                  f"graph input, initializer or node output")
        ready.update(n for n in node.output if n)
    outputs = set()
    for vi in g.output:
        if vi.name in outputs:
            raise OnnxImportError(f"model output '{_short(vi.name)}' is listed twice")
        outputs.add(vi.name)
        if vi.name not in ready:
            raise OnnxImportError(f"model output '{_short(vi.name)}' is not computed by any "
                                  f"node")


def _check_text(model):
    """Every name is text: protobuf hands a string that is not valid UTF-8 over as
    bytes, which no later step expects."""
    g = model.graph
    named = [("graph input", vi.name) for vi in g.input] + \
        [("graph output", vi.name) for vi in g.output] + \
        [("initializer", t.name) for t in g.initializer] + [("graph", g.name)]
    for index, node in enumerate(g.node):
        texts = [node.name, node.op_type, node.domain, *node.input, *node.output,
                 *(a.name for a in node.attribute)]
        if not all(isinstance(t, str) for t in texts):
            raise OnnxImportError(f"node #{index}: a name, op type or attribute name is not "
                                  f"valid UTF-8 text")
    for what, name in named:
        if not isinstance(name, str):
            raise OnnxImportError(f"a {what}'s name {_short(name)} is not valid UTF-8 text")


# -- tensors --------------------------------------------------------------------------------
def tensor_problem(onnx, t, max_elements: int) -> str | None:
    """What is wrong with TensorProto t (None when numpy_helper may read it)."""
    names = onnx.TensorProto.DataType
    kind = names.Name(t.data_type) if t.data_type in names.values() else None
    if kind not in _ITEM:
        shown = kind or f"#{t.data_type}"
        return (f"has dtype {shown}, which fragflow does not read (float32, float16, "
                f"float64, the integers and bool)")
    if len(t.dims) > MAX_RANK or any(d < 0 for d in t.dims):
        return f"has dims {_short(list(t.dims))} (at most {MAX_RANK}, none negative)"
    count = math.prod(t.dims)
    if count > max_elements:
        return (f"has dims {list(t.dims)} = {count} elements, more than max_elements="
                f"{max_elements} (pass a larger max_elements if you trust the model)")
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return "stores its data in an external file that was not read"
    if t.HasField("segment"):
        return "is segmented, which fragflow does not read"
    size, field = _ITEM[kind]
    if t.raw_data:
        have, want = len(t.raw_data), count * size
        unit = "bytes"
    else:
        have, want, unit = len(getattr(t, field)), count, f"values in {field}"
    if have != want:
        return (f"has dims {list(t.dims)} ({count} elements, {want} {unit}) but its data "
                f"holds {have} {unit}")
    return None


def check_tensor(onnx, t, what: str, max_elements: int):
    problem = tensor_problem(onnx, t, max_elements)
    if problem:
        raise OnnxImportError(f"{what} {problem}")


# -- nodes --------------------------------------------------------------------------------
def schema_of(onnx, node, opset: int):
    try:
        return onnx.defs.get_schema(node.op_type, opset, node.domain or "")
    except Exception:            # noqa: BLE001 -- no schema: the rule's own checks apply
        return None


def node_problem(onnx, node, schema) -> str | None:
    """What is wrong with node against ONNX's schema (None when nothing is)."""
    A = onnx.AttributeProto
    names = [a.name for a in node.attribute]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        return f"attribute(s) {', '.join(map(_short, twice))} given twice"
    if schema is None:
        return None
    declared = schema.attributes
    for a in node.attribute:
        if a.ref_attr_name:
            return f"attribute '{_short(a.name)}' refers to a function's attribute"
        spec = declared.get(a.name)
        if spec is None:
            continue                 # the rule names attributes it does not read
        want = int(spec.type)
        if a.type != want:
            have = A.AttributeType.Name(a.type) if a.type in A.AttributeType.values() \
                else f"#{a.type}"
            return (f"attribute '{_short(a.name)}' is {have}; ONNX's {node.op_type}-"
                    f"{schema.since_version} declares it {A.AttributeType.Name(want)}")
    for name, spec in declared.items():
        if spec.required and name not in names:
            return f"required attribute '{name}' is missing"
    count = len(node.input)
    while count and not node.input[count - 1]:
        count -= 1
    if count < schema.min_input or count > schema.max_input:
        takes = schema.min_input if schema.min_input == schema.max_input else \
            f"{schema.min_input} to {schema.max_input}"
        return (f"has {count} inputs; ONNX's {node.op_type}-{schema.since_version} takes "
                f"{takes}")
    Single = onnx.defs.OpSchema.FormalParameterOption.Single
    for k, formal in enumerate(schema.inputs):
        if formal.option == Single and (k >= len(node.input) or not node.input[k]):
            return f"required input {k} ('{formal.name}') is missing"
    if len(node.output) > schema.max_output:
        return (f"has {len(node.output)} outputs; ONNX's {node.op_type}-"
                f"{schema.since_version} has at most {schema.max_output}")
    return None


_FF_TO_ONNX = {"float32": 1, "int32": 7, "bool": 9}   # int32 tensors were int64 in ONNX


def predicted_outputs(onnx, node, schema, inputs, opset: int) -> list | None:
    """The output shapes ONNX's shape inference gives node (a dim None where it cannot
    say), fed the static inputs' values; None when inference says nothing."""
    if schema is None:
        return None
    from onnx import helper, numpy_helper, shape_inference  # optional: onnx (the caller has it)

    from .importer import Init  # cycle: importer imports this module at its top
    types, data = {}, {}
    names = []
    for k, x in enumerate(inputs):
        if x is None:
            names.append("")
            continue
        name = f"i{k}"
        names.append(name)
        array = x.array if isinstance(x, Init) else x
        if isinstance(array, np.ndarray):
            try:
                elem = helper.np_dtype_to_tensor_dtype(array.dtype)
            except Exception:    # noqa: BLE001 -- a dtype ONNX has no name for
                return None
            types[name] = helper.make_tensor_type_proto(elem, array.shape)
            if array.size <= 4096:
                data[name] = numpy_helper.from_array(array, name)
        elif isinstance(x, Tensor):
            types[name] = helper.make_tensor_type_proto(_FF_TO_ONNX.get(x.dtype, 1),
                                                        list(x.shape))
        else:
            return None
    copy = helper.make_node(node.op_type, names, [f"o{k}" for k in range(len(node.output))],
                            domain=node.domain)
    copy.attribute.extend(node.attribute)
    try:
        out = shape_inference.infer_node_outputs(
            schema, copy, types, data, opset_imports=[helper.make_opsetid("", opset)])
    except Exception:            # noqa: BLE001 -- inference disagrees: the rule decides
        return None
    shapes = []
    for k in range(len(node.output)):
        t = out.get(f"o{k}")
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            shapes.append(None)
            continue
        shapes.append([d.dim_value if d.HasField("dim_value") else None
                       for d in t.tensor_type.shape.dim])
    return shapes
