"""Reading a TF.js graph model into a fragflow graph (on the import core, interop/).

The walk: the model.json and its weights read and checked (reader.py); the model's
inputs and outputs found as TF.js's GraphModel finds them (its signature, from the
top level or userDefinedMetadata; else the Placeholder nodes and the nodes nothing
reads); the nodes the outputs need, sorted topologically (a cycle, a dangling input or
a duplicate name is an error naming the node); then each node through its rule in
op_table.RULES. Const nodes take their weight from the manifest (a float one is a
Variable when trainable=True, else a constant); a node whose inputs are all known at
import is evaluated there (interop/static.py), so shape arithmetic never reaches the GPU.
"""
from __future__ import annotations

import base64
import os

import numpy as np

from ...ir.graph import Graph
from ..interop import static
from ..interop.errors import short
from ..interop.importer import ImporterBase, Init, ReadAttrs, clean_name, source_location
from ..interop.limits import MAX_BYTES, MAX_ELEMENTS, MAX_NODES, MAX_RANK, too_large
from ..interop.record import ImportedModel
from ..ops import name_scope, placeholder
from . import reader
from .errors import TfjsImportError, UnsupportedTfjsOpError

# TF dtypes as fragflow's: the floats are float32, the integers int32 (values checked to
# fit where they are known), bool.
TF_DTYPES = {"DT_FLOAT": "float32", "DT_HALF": "float32", "DT_DOUBLE": "float32",
             "DT_BFLOAT16": "float32", "DT_INT32": "int32", "DT_INT64": "int32",
             "DT_INT16": "int32", "DT_INT8": "int32", "DT_UINT8": "int32",
             "DT_UINT16": "int32", "DT_BOOL": "bool"}
# attributes that change nothing fragflow computes: type annotations, the converter's
# bookkeeping, cuDNN's switch
HARMLESS = {"_cloned", "_output_shapes", "use_cudnn_on_gpu", "_class", "_noinline",
            "_grappler_ArithmeticOptimizer_AddOpsRewriteStage", "_user_specified_name",
            "_has_manual_control_dependencies", "_XlaCompile", "_XlaScope",
            "_XlaSeparateCompiledGradients", "_read_only_resource_inputs", "device",
            "validate_indices", "Truncate", "half_pixel_centers_TFJS"}
NEVER_FOLD = {"RandomUniform", "RandomStandardNormal", "Multinomial"}


class TfjsModel(ImportedModel):
    """A TF.js graph model as a fragflow graph (interop.record.ImportedModel).

    inputs / outputs in the order TF.js's GraphModel lists them; inputs_by_name and
    outputs_by_name keyed by the names TF.js reports (model.inputs[i].name,
    model.outputs[i].name: the nodes' names); feed_dict also takes the signature keys
    (model.inputNodes). variables: weight name -> ff.Variable (trainable=True).
    signature_keys: TF.js name -> signature key, where the model has a signature."""

    format = "tfjs"

    def __init__(self, graph, inputs, outputs, variables, aliases, signature_keys,
                 metadata):
        super().__init__(graph, inputs, outputs, variables, aliases)
        self.signature_keys = signature_keys
        self.metadata = metadata


class TfjsNode:
    """One node of model.json: name, op, data inputs [(node name, output index)],
    control inputs (ignored: the graph's data flow orders it), decoded attrs."""
    __slots__ = ("name", "op", "inputs", "attrs", "index")

    def __init__(self, name, op, inputs, attrs, index):
        self.name, self.op, self.inputs, self.attrs, self.index = name, op, inputs, attrs, index


def parse_ref(ref: str):
    """'node' -> ('node', 0); 'node:2' -> ('node', 2); '^node' -> None (control)."""
    if ref.startswith("^"):
        return None
    parts = ref.split(":")
    if len(parts) == 1:
        return ref, 0
    try:
        index = int(parts[-1])
    except ValueError:
        return None if len(parts) != 2 else (ref, 0)
    if index < 0:
        raise TfjsImportError(f"input '{short(ref)}' has a negative output index")
    return parts[0], index


def decode_attr(name: str, value):
    """A model.json attr value ({"i": "3"}, {"list": {"i": [...]}}, {"s": base64}, ...) as
    Python: int, float, bool, str, dtype name, shape tuple or list."""
    if not isinstance(value, dict):
        raise TfjsImportError(f"attribute '{short(name)}' is not an object")
    if "list" in value:
        items = value["list"]
        if not isinstance(items, dict):
            raise TfjsImportError(f"attribute '{short(name)}': list is not an object")
        for key in ("i", "f", "s", "b", "type", "shape"):
            if key in items:
                if not isinstance(items[key], list):
                    raise TfjsImportError(f"attribute '{short(name)}': list.{key} is not a "
                                          f"list")
                return [decode_attr(name, {key: v}) for v in items[key]]
        return []
    if "i" in value:
        return int(value["i"])
    if "f" in value:
        return float(value["f"])
    if "b" in value:
        return bool(value["b"])
    if "s" in value:
        try:
            return base64.b64decode(value["s"], validate=True).decode("utf-8")
        except (ValueError, TypeError):
            raise TfjsImportError(f"attribute '{short(name)}': not base64 text") from None
    if "type" in value:
        return ("dtype", value["type"])
    if "shape" in value:
        return ("shape", shape_of_proto(value["shape"]))
    if "tensor" in value or "func" in value:
        return ("other", value)
    return None


def shape_of_proto(proto):
    """A TensorShapeProto ({"dim": [{"size": "-1"}, ...]}) as a tuple (None: unknown dim),
    or None for an unknown rank."""
    if not isinstance(proto, dict) or proto.get("unknownRank"):
        return None
    dims = proto.get("dim", [])
    if not isinstance(dims, list) or len(dims) > MAX_RANK:
        raise TfjsImportError(f"a shape has {short(dims)} dims (at most {MAX_RANK})")
    out = []
    for d in dims:
        size = int(d.get("size", -1)) if isinstance(d, dict) else -1
        out.append(None if size < 0 else size)
    return tuple(out)


class Importer(ImporterBase):
    error_class = TfjsImportError

    def __init__(self, model, weights, trainable, input_shapes, label,
                 max_elements=MAX_ELEMENTS, max_bytes=MAX_BYTES):
        super().__init__(trainable, max_elements, max_bytes)
        self.model = model
        self.weights = weights
        self.input_shapes = dict(input_shapes or {})
        self.label = label

    def where(self) -> str:
        if self.node is None:
            return "model"
        return f"{short(self.node.op, 60)} node '{short(self.node.name)}'"

    def node_type(self) -> str:
        return self.node.op

    def static_error(self, x, what: str):
        free = {name: p.shape for name, p in self.graph_inputs.items() if None in p.shape}
        hint = ""
        if free:
            example = ", ".join(f"'{n}': {tuple(1 if d is None else d for d in s)}"
                                for n, s in list(free.items())[:3])
            hint = (f"; the model's inputs have unknown dims ({', '.join(free)}): give "
                    f"their shapes, e.g. input_shapes={{{example}}}")
        return self.error(f"{what} must be known at import time (a constant, a weight or "
                          f"computed from them and from static shapes); it is computed by "
                          f"the graph{hint}")

    # -- the structure ----------------------------------------------------------------
    def parse_nodes(self) -> dict:
        topology = self.model.get("modelTopology")
        if not isinstance(topology, dict):
            raise TfjsImportError("model.json has no modelTopology object")
        nodes = topology.get("node", [])
        if not isinstance(nodes, list):
            raise TfjsImportError("modelTopology.node is not a list")
        if len(nodes) > MAX_NODES:
            raise TfjsImportError(f"the graph has {len(nodes)} nodes, more than {MAX_NODES}")
        out = {}
        for index, n in enumerate(nodes):
            if not isinstance(n, dict) or not isinstance(n.get("name"), str) \
                    or not n["name"] or not isinstance(n.get("op"), str):
                raise TfjsImportError(f"node #{index} has no name or op")
            name = n["name"]
            if name in out:
                raise TfjsImportError(f"node name '{short(name)}' is used twice (nodes "
                                      f"#{out[name].index} and #{index})")
            refs = n.get("input", [])
            attrs = n.get("attr", {})
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs) \
                    or not isinstance(attrs, dict):
                raise TfjsImportError(f"{n['op']} node '{short(name)}': 'input' must be a "
                                      f"list of names and 'attr' an object")
            inputs = []
            for r in refs:
                parsed = parse_ref(r)
                if parsed is not None:
                    inputs.append(parsed)
            try:
                decoded = {k: decode_attr(k, v) for k, v in attrs.items()}
            except TfjsImportError as err:
                raise TfjsImportError(f"{n['op']} node '{short(name)}': {err}") from None
            except (ValueError, TypeError, OverflowError) as err:
                raise TfjsImportError(f"{n['op']} node '{short(name)}': an attribute is "
                                      f"malformed ({short(err)})") from None
            out[name] = TfjsNode(name, n["op"], inputs, decoded, index)
        for node in out.values():
            for src, _ in node.inputs:
                if src not in out:
                    raise TfjsImportError(f"{node.op} node '{short(node.name)}': input "
                                          f"'{short(src)}' names no node")
        return out

    def signature(self) -> dict:
        sig = self.model.get("signature")
        meta = self.model.get("userDefinedMetadata")
        if isinstance(meta, dict) and meta.get("signature") is not None:
            sig = meta["signature"]
        return sig if isinstance(sig, dict) else {}

    def endpoints(self, nodes):
        """TF.js's inputs and outputs: [(name, node, output index, signature key)]."""
        sig = self.signature()

        def entries(part):
            table = sig.get(part)
            if not isinstance(table, dict):
                return []
            out = []
            for key, entry in table.items():
                tensor = entry.get("name") if isinstance(entry, dict) else None
                if not isinstance(tensor, str):
                    raise TfjsImportError(f"signature {part} '{short(key)}' has no name")
                ref = parse_ref(tensor)
                if ref is not None and ref[0] in nodes:
                    out.append((ref[0], ref[1], key))
            return out

        sig_inputs, sig_outputs = entries("inputs"), entries("outputs")
        if sig_inputs:
            inputs = sig_inputs
        else:
            inputs = [(n.name, 0, None) for n in nodes.values()
                      if n.op.startswith("Placeholder")]
        if sig_outputs:
            outputs = sig_outputs
        else:
            read = {src for n in nodes.values() for src, _ in n.inputs}
            outputs = [(n.name, 0, None) for n in nodes.values() if n.name not in read]
        if not outputs:
            raise TfjsImportError("the model has no outputs")
        return inputs, outputs

    def needed(self, nodes, outputs) -> list:
        """The nodes the outputs depend on, in topological order (Kahn's, no recursion)."""
        seen, stack = set(), [name for name, _, _ in outputs]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack.extend(src for src, _ in nodes[name].inputs if src not in seen)
        from .op_table import RULES, refusal  # cycle: op_table imports this module
        for node in sorted((nodes[n] for n in seen), key=lambda n: n.index):
            if node.op not in RULES and node.op not in ("Const", "Placeholder"):
                self.node = node
                raise self.error(refusal(node.op), UnsupportedTfjsOpError)
        waiting = {n: len(nodes[n].inputs) for n in seen}
        readers: dict = {}
        for n in seen:
            for src, _ in nodes[n].inputs:
                readers.setdefault(src, []).append(n)
        ready = sorted((n for n, c in waiting.items() if c == 0),
                       key=lambda n: nodes[n].index, reverse=True)
        order = []
        while ready:
            n = ready.pop()
            order.append(nodes[n])
            for r in readers.get(n, ()):
                waiting[r] -= 1
                if waiting[r] == 0:
                    ready.append(r)
        if len(order) != len(seen):
            stuck = min((nodes[n] for n, c in waiting.items() if c > 0), key=lambda n: n.index)
            raise TfjsImportError(f"{stuck.op} node '{short(stuck.name)}' is part of a cycle "
                                  f"(its inputs depend on its output): TF1 control flow, which "
                                  f"fragflow's TF.js import does not support yet, or a "
                                  f"malformed model")
        return order

    # -- the walk ---------------------------------------------------------------------
    def run(self) -> TfjsModel:
        from .op_table import RULES  # cycle: op_table imports this module
        nodes = self.parse_nodes()
        inputs, outputs = self.endpoints(nodes)
        order = self.needed(nodes, outputs)
        graph = self.graph = self.root = Graph(clean_name(
            os.path.splitext(self.label)[0], "tfjs_model"))
        input_names = {name for name, _, _ in inputs}
        placeholders, aliases = {}, {}
        with graph.as_default():
            for node in order:
                self.node = node
                with self.guard(), source_location(graph, f"{self.label}: {node.name}"):
                    if node.op == "Const":
                        self.values[node.name] = [self.const(node)]
                    elif node.op == "Placeholder" or (node.op.startswith("Placeholder")
                                                      and node.name in input_names):
                        keys = [k for n, _, k in inputs if n == node.name and k]
                        self.values[node.name] = [self.placeholder(node, keys)]
                        placeholders[node.name] = self.values[node.name][0]
                        self.graph_inputs[node.name] = placeholders[node.name]
                        for k in keys:
                            aliases[k] = placeholders[node.name]
                    else:
                        self.values[node.name] = self.import_node(node, RULES)
            self.node = None
            ins = {name: placeholders[name] for name, _, _ in inputs if name in placeholders}
            ins.update((n, p) for n, p in placeholders.items() if n not in ins)
            outs, keys = {}, {}
            for name, index, key in outputs:
                values = self.values[name]
                if index >= len(values):
                    raise TfjsImportError(f"output '{short(name)}:{index}': the node has "
                                          f"{len(values)} outputs")
                shown = name if index == 0 else f"{name}:{index}"
                outs[shown] = self.tensor(values[index])
                if key:
                    keys[shown] = key
        meta = {k: self.model.get(k) for k in ("format", "generatedBy", "convertedBy")}
        return TfjsModel(graph, ins, outs, dict(self.variables), aliases, keys, meta)

    def const(self, node):
        if node.name not in self.weights:
            raise self.error("the Const node has no weight of its name in the "
                             "weightsManifest")
        array = self.weights[node.name]
        if self.trainable and array.dtype == np.float32:
            return Init(node.name, array)
        return array

    def placeholder(self, node, keys):
        dtype_attr = node.attrs.get("dtype")
        tf_dtype = dtype_attr[1] if isinstance(dtype_attr, tuple) else "DT_FLOAT"
        dtype = TF_DTYPES.get(tf_dtype)
        if dtype is None:
            raise self.error(f"input dtype {short(tf_dtype)} is not supported (fragflow has "
                             f"float32, int32 and bool)")
        shape_attr = node.attrs.get("shape")
        shape = shape_attr[1] if isinstance(shape_attr, tuple) else None
        given = next((self.input_shapes[k] for k in [node.name, *keys]
                      if k in self.input_shapes), None)
        if given is not None:
            try:
                given = tuple(None if d is None or int(d) < 0 else int(d) for d in given)
            except (TypeError, ValueError):
                raise self.error(f"input_shapes gives {short(given)} (a tuple of ints or "
                                 f"None)") from None
            if shape is not None and len(shape) != len(given):
                raise self.error(f"input_shapes gives rank {len(given)}; the model's input "
                                 f"has shape {list(shape)}")
            shape = given
        if shape is None:
            raise self.error(f"the input has no known rank: give its shape with "
                             f"input_shapes={{'{node.name}': (...)}}")
        count = too_large(shape, self.max_elements)
        if count is not None:
            raise self.error(f"input shape {list(shape)} = {count} elements, more than "
                             f"max_elements={self.max_elements}")
        with name_scope("/"):
            return placeholder(shape, dtype, name=clean_name(node.name, "input"))

    def import_node(self, node, rules) -> list:
        values = []
        for src, k in node.inputs:
            produced = self.values[src]
            if k >= len(produced):
                raise self.error(f"input '{short(src)}:{k}': that node has "
                                 f"{len(produced)} outputs")
            values.append(produced[k])
        rule = rules[node.op]
        # TF's own annotations (a leading underscore: grappler's, XLA's) and the type
        # parameters (T, Tidx, ...) change nothing; the dtypes a rule acts on it reads
        attrs = ReadAttrs(node.attrs, harmless=HARMLESS | {
            k for k, v in node.attrs.items() if k.startswith("_") or (
                isinstance(v, tuple) and v[0] == "dtype"
                and k not in ("dtype", "out_type", "DstT", "output_type"))})
        first_new = len(self.graph.nodes)
        outputs = None
        if static.foldable(values) and node.op not in NEVER_FOLD:
            outputs = static.evaluate(lambda: rule(self, node, values, attrs))
        if outputs is None:
            with name_scope(clean_name(node.name, node.op)):
                outputs = rule(self, node, values, attrs)
        attrs.check_all_read(self)
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        self.check_made(outputs, first_new)
        return outputs


def load(path, *, input_shapes: dict | None = None, trainable: bool = False,
         max_elements: int = MAX_ELEMENTS, max_bytes: int = MAX_BYTES) -> TfjsModel:
    """Import a TF.js graph model (a model.json, or a folder holding one, with its weight
    shards beside it) as a fragflow graph. See docs/TFJS.md.

    input_shapes: {input name: shape} fixing the model's unknown dims (None: free).
    trainable: float weights become ff.Variables (fine-tuning, sess.save); False (the
    default) makes them constants, which the passes fold (batch norm into convolution
    weights). max_elements / max_bytes: the limits a model is held to (the largest tensor;
    model.json and shards together), checked before anything is allocated. Whatever is
    wrong with the files is a TfjsImportError naming the node or weight.

    >>> import fragflow as ff
    >>> m = ff.tfjs.load("model.json", input_shapes={"input": (1, 256, 256, 3)})  # doctest: +SKIP
    >>> ff.Session(m.graph).run(m.outputs, m.feed_dict({"input": x}))             # doctest: +SKIP
    """
    file = reader.model_json_path(path)
    model = reader.read_model_json(file, max_bytes)
    fmt = model.get("format")
    topology = model.get("modelTopology")
    if fmt == "layers-model" or (isinstance(topology, dict) and "model_config" in topology) \
            or (isinstance(topology, dict) and "class_name" in topology):
        raise TfjsImportError(f"{short(file)!r} is a TF.js layers model (a Keras topology): "
                              f"read it with ff.keras.models.load_model; ff.tfjs.load reads "
                              f"graph models")
    weights = reader.read_weights(model, os.path.dirname(os.path.abspath(file)), max_bytes,
                                  max_elements)
    importer = Importer(model, weights, trainable, input_shapes,
                        os.path.basename(os.path.dirname(os.path.abspath(file))) + "/"
                        + os.path.basename(file), max_elements, max_bytes)
    try:
        imported = importer.run()
        imported.graph.weight_encodings.extend(reader.weight_encodings(model))
        return imported
    except TfjsImportError:
        raise
    except RecursionError:
        raise TfjsImportError("the model nests too deep to import") from None
    except Exception as err:     # noqa: BLE001 -- a malformed model, never a traceback
        raise TfjsImportError(f"cannot import the model: {type(err).__name__}: "
                              f"{short(err, 300)}") from err
