"""Reading a TF.js graph model into a fragflow graph (on the import core, interop/).

The walk: the model.json and its weights read and checked (reader.py); the model's
inputs and outputs found as TF.js's GraphModel finds them (its signature, from the
top level or userDefinedMetadata; else the Placeholder nodes and the nodes nothing
reads); the nodes the outputs need, sorted topologically (a cycle, a dangling input or
a duplicate name is an error naming the node); then each node through its rule in
op_table.RULES. Const nodes take their weight from the manifest (a float one is a
Variable when trainable=True, else a constant); a node whose inputs are all known at
import is evaluated there (interop/static.py), so shape arithmetic never reaches the GPU.

A model with TF1 control flow, TensorArrays/TensorLists or an op whose output shape
depends on the data is staged (staged.py): load returns a StagedTfjsModel whose plans
are this walk run with the feeds at hand (Importer(runtime=...)). A TF1 loop's frame is
one unit of the walk (run_loop): one while_loop where its condition is computed and its
body is pure tensors, else unrolled; control_ops.py holds those ops' rules.
"""
from __future__ import annotations

import base64
import os

import numpy as np

from ...ir.graph import Graph
from ..control_flow import ControlFlowError, while_loop
from ..interop import static
from ..interop.errors import short
from ..interop.importer import ImporterBase, Init, ReadAttrs, clean_name, source_location
from ..interop.limits import MAX_BYTES, MAX_ELEMENTS, MAX_NODES, MAX_RANK, too_large
from ..interop.record import ImportedModel
from ..ops import name_scope, placeholder
from . import layers_model, reader
from .errors import TfjsImportError, UnsupportedTfjsOpError
from .staged import (
    DEAD,
    DeadOutputs,
    Guard,
    HostOp,
    InputSpec,
    NeedsStaging,
    StagedTfjsModel,
    TensorSeq,
)

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


MAX_LOOP_ITERATIONS = 10000
# ops that make a model staged (staged.py): TF1 control flow, TensorArrays and
# TensorLists, and the ops whose output shape depends on the data
STAGED_OPS = {"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond",
              "NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
              "NonMaxSuppressionV5", "Where"}


class _NotTraceable(TfjsImportError):
    """A loop's body needs a guard or a host op: it is unrolled instead."""


class Loop:
    """A TF1 loop in the walk: its frame's nodes in the order one iteration computes
    them."""
    __slots__ = ("frame", "nodes")

    def __init__(self, frame, nodes):
        self.frame, self.nodes = frame, nodes


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
                 max_elements=MAX_ELEMENTS, max_bytes=MAX_BYTES, runtime=None):
        super().__init__(trainable, max_elements, max_bytes)
        self.model = model
        self.weights = weights
        self.input_shapes = dict(input_shapes or {})
        self.label = label
        # staged import (staged.py): the feeds and the boundaries met; None: a plain
        # import, where a value the graph computes that decides a shape is an error
        self.runtime = runtime
        self.tracing = False     # inside a while_loop's trace: no guard, no host op

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
        """The nodes the outputs depend on, in topological order (Kahn's, no recursion),
        each TF1 loop (its frame: the nodes reachable from its Enter nodes up to its Exit
        nodes) as one Loop unit in that order."""
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
        readers: dict = {}
        for n in sorted(seen, key=lambda n: nodes[n].index):
            for src, _ in nodes[n].inputs:
                readers.setdefault(src, []).append(n)
        frame_of = self.frames(nodes, seen, readers)
        unit_of = {n: frame_of.get(n, n) for n in seen}
        members: dict = {}
        for n in sorted(seen, key=lambda n: nodes[n].index):
            members.setdefault(unit_of[n], []).append(n)
        deps = {u: set() for u in members}
        for u, names in members.items():
            for n in names:
                for src, _ in nodes[n].inputs:
                    if unit_of[src] != u:
                        deps[u].add(unit_of[src])
        waiting = {u: len(d) for u, d in deps.items()}
        unit_readers: dict = {}
        for u, d in deps.items():
            for v in d:
                unit_readers.setdefault(v, []).append(u)
        first = {u: nodes[names[0]].index for u, names in members.items()}
        ready = sorted((u for u, c in waiting.items() if c == 0), key=lambda u: first[u],
                       reverse=True)
        order = []
        while ready:
            u = ready.pop()
            if isinstance(u, tuple):
                order.append(Loop(u[1], self.frame_order(nodes, members[u])))
            else:
                order.append(nodes[u])
            for r in unit_readers.get(u, ()):
                waiting[r] -= 1
                if waiting[r] == 0:
                    ready.append(r)
        if len(order) != len(members):
            stuck = min((nodes[members[u][0]] for u, c in waiting.items() if c > 0),
                        key=lambda n: n.index)
            raise TfjsImportError(f"{stuck.op} node '{short(stuck.name)}' is part of a cycle "
                                  f"(its inputs depend on its output) outside a TF1 loop's "
                                  f"frame: a malformed model")
        return order

    def frames(self, nodes, seen, readers) -> dict:
        """node name -> its TF1 loop's frame name (nodes of the root frame absent)."""
        frame_of: dict = {}
        for e in sorted((n for n in seen if nodes[n].op == "Enter"),
                        key=lambda n: nodes[n].index):
            frame = nodes[e].attrs.get("frame_name")
            if not isinstance(frame, str) or not frame:
                self.node = nodes[e]
                raise self.error("the Enter node has no frame_name")
            frame = ("frame", frame)
            stack = [e]
            while stack:
                n = stack.pop()
                if n in frame_of:
                    if frame_of[n] != frame:
                        self.node = nodes[n]
                        raise self.error("the node is in two TF1 loop frames (nested "
                                         "loops), which ff.tfjs.load does not import")
                    continue
                frame_of[n] = frame
                if nodes[n].op == "Exit":
                    continue
                for r in readers.get(n, ()):
                    if nodes[r].op == "Enter":
                        self.node = nodes[r]
                        raise self.error("a TF1 loop inside another (nested frames), "
                                         "which ff.tfjs.load does not import")
                    if r in seen:
                        stack.append(r)
        return frame_of

    def frame_order(self, nodes, names) -> list:
        """A loop frame's nodes in the order one iteration computes them: topological,
        without the back edges (NextIteration -> Merge)."""
        inside = set(names)
        deps = {}
        for n in names:
            d = set()
            for src, _ in nodes[n].inputs:
                if src in inside and not (nodes[n].op == "Merge"
                                          and nodes[src].op == "NextIteration"):
                    d.add(src)
            deps[n] = d
        waiting = {n: len(d) for n, d in deps.items()}
        readers: dict = {}
        for n, d in deps.items():
            for src in d:
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
        if len(order) != len(names):
            stuck = min((nodes[n] for n, c in waiting.items() if c > 0),
                        key=lambda n: n.index)
            raise TfjsImportError(f"{stuck.op} node '{short(stuck.name)}' is part of a cycle "
                                  f"inside a TF1 loop other than through NextIteration: a "
                                  f"malformed model")
        if not any(n.op == "LoopCond" for n in order):
            raise TfjsImportError(f"the TF1 loop frame of '{short(order[0].name)}' has no "
                                  f"LoopCond node: a malformed model")
        return order

    # -- the walk ---------------------------------------------------------------------
    def run(self) -> TfjsModel:
        from .op_table import RULES  # cycle: op_table imports this module
        nodes = self.parse_nodes()
        inputs, outputs = self.endpoints(nodes)
        order = self.needed(nodes, outputs)
        if self.runtime is None:
            for unit in order:
                if isinstance(unit, Loop) or unit.op in STAGED_OPS or unit.op.startswith(
                        ("TensorArray", "TensorList")):
                    node = unit.nodes[0] if isinstance(unit, Loop) else unit
                    self.node = node
                    raise self.error(f"op {node.op}: TF1 control flow or a shape that "
                                     f"depends on the data (the model is staged)",
                                     NeedsStaging)
        graph = self.graph = self.root = Graph(clean_name(
            os.path.splitext(self.label)[0], "tfjs_model"))
        input_names = {name for name, _, _ in inputs}
        placeholders, aliases = {}, {}
        with graph.as_default():
            for unit in order:
                if isinstance(unit, Loop):
                    self.run_loop(unit, RULES)
                    continue
                node = unit
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
                if values[index] is DEAD:
                    raise TfjsImportError(f"output '{short(shown)}' is on a branch not "
                                          f"taken (a dead tensor of TF1 control flow)")
                if isinstance(values[index], TensorSeq):
                    raise TfjsImportError(f"output '{short(shown)}' is a TensorArray or "
                                          f"TensorList, not a tensor")
                outs[shown] = self.tensor(values[index])
                if key:
                    keys[shown] = key
        meta = {k: self.model.get(k) for k in ("format", "generatedBy", "convertedBy")}
        return TfjsModel(graph, ins, outs, dict(self.variables), aliases, keys, meta)

    def run_loop(self, loop, rules):
        """A TF1 loop, unrolled on the feeds being staged: each iteration computes the
        frame's nodes in order (Merge: its Enter's value first, then its NextIteration's
        of the previous iteration); LoopCond's value (known at import, else a guard)
        decides whether another iteration follows; the Exit nodes' values when it is
        false are the loop's results."""
        back: dict = {}
        enter_of = {}
        for node in loop.nodes:
            if node.op == "Merge":
                srcs = [src for src, _ in node.inputs]
                kinds = [self.frame_node(loop, s) for s in srcs]
                if len(srcs) != 2 or sorted(k.op for k in kinds if k is not None) \
                        != ["Enter", "NextIteration"]:
                    self.node = node
                    raise self.error("a loop's Merge must read one Enter and one "
                                     "NextIteration node")
                enter_of[node.name] = [k for k in kinds if k.op == "Enter"][0].name
                back[node.name] = [k for k in kinds if k.op == "NextIteration"][0].name
        if self.loop_as_while(loop, rules, enter_of, back):
            return
        carried: dict = {}
        for iteration in range(MAX_LOOP_ITERATIONS):
            env: dict = {}
            going = None
            for node in loop.nodes:
                self.node = node
                with self.guard(), source_location(self.graph, f"{self.label}: "
                                                   f"{node.name}"):
                    if node.op == "Merge":
                        value = env[enter_of[node.name]][0] if iteration == 0 \
                            else carried[node.name]
                        env[node.name] = [value, np.asarray(0 if iteration == 0 else 1,
                                                            np.int32)]
                        continue
                    values = self.read_inputs(node, env)
                    if node.op == "LoopCond":
                        if values[0] is DEAD:
                            raise self.error("the loop's condition is dead")
                        going = bool(self.concrete(values[0], "the loop's condition")
                                     .reshape(-1)[0])
                        env[node.name] = [np.asarray(going)]
                        continue
                    with name_scope(f"iter{iteration}"):
                        env[node.name] = self.import_with(node, values, rules)
            if going is None:
                raise self.error("the loop's LoopCond was not computed")
            if not going:
                for node in loop.nodes:
                    if node.op == "Exit":
                        self.values[node.name] = env[node.name]
                return
            carried = {m: env[n][0] for m, n in back.items()}
            if len(self.graph.nodes) > MAX_NODES:
                self.node = loop.nodes[0]
                raise self.error(f"the TF1 loop, unrolled for {iteration + 1} iterations, "
                                 f"made more than {MAX_NODES} graph nodes")
        self.node = loop.nodes[0]
        raise self.error(f"the TF1 loop ran {MAX_LOOP_ITERATIONS} iterations without its "
                         f"condition turning false")

    def loop_as_while(self, loop, rules, enter_of, back) -> bool:
        """The loop as one ff.while_loop node (its body a sub-graph), where its condition
        is computed by the graph (unrolling would guard every iteration) and its body is
        pure tensors: no TensorArray/TensorList, no host op or guard inside, loop
        variables of fixed shapes. False (nothing made) where it is not: the loop is
        then unrolled."""
        ops = {n.op for n in loop.nodes}
        if any(op.startswith(("TensorArray", "TensorList")) or op in STAGED_OPS - {
                "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"}
               for op in ops):
            return False
        merges = [n for n in loop.nodes if n.op == "Merge"]
        cond_node = next(n for n in loop.nodes if n.op == "LoopCond")
        env = {}
        for node in loop.nodes:
            if node.op == "Enter":
                env[node.name] = self.read_inputs(node)
        init = [env[enter_of[m.name]][0] for m in merges]
        if any(isinstance(v, TensorSeq) or v is DEAD for v in init):
            return False
        exits = {}
        for node in loop.nodes:
            if node.op != "Exit":
                continue
            sw = self.frame_node(loop, node.inputs[0][0])
            src = self.frame_node(loop, sw.inputs[0][0]) if sw is not None else None
            if sw is None or sw.op != "Switch" or node.inputs[0][1] != 0 \
                    or src is None or src.op != "Merge":
                return False
            exits[node.name] = merges.index(src)
        # the first iteration's condition: static (then unrolling costs nothing) or not
        self.tracing = True
        try:
            probe = self.trace_iteration(loop, rules, env, init, cond_node, upto_cond=True)
        except _NotTraceable:
            return False
        finally:
            self.tracing = False
        if isinstance(probe, np.ndarray):
            return False

        def cond_fn(*values):
            return self.trace_iteration(loop, rules, env, values, cond_node, True)

        def body_fn(*values):
            out = self.trace_iteration(loop, rules, env, values, cond_node, False)
            return [self.tensor(out[back[m.name]]) for m in merges]

        self.tracing = True
        try:
            with name_scope(clean_name(cond_node.name, "while")):
                results = while_loop(cond_fn, body_fn, [self.tensor(v) for v in init],
                                     maximum_iterations=MAX_LOOP_ITERATIONS,
                                     return_same_structure=True)
        except (_NotTraceable, ControlFlowError):
            return False
        finally:
            self.tracing = False
        for name, k in exits.items():
            self.values[name] = [results[k]]
        return True

    def trace_iteration(self, loop, rules, env, values, cond_node, upto_cond):
        """One iteration of the loop's frame on the loop variables `values` (one per
        Merge, in order): LoopCond's input (upto_cond), else {NextIteration name: its
        value}. Switches on the LoopCond take their true branch."""
        env = dict(env)
        merges = [n for n in loop.nodes if n.op == "Merge"]
        for m, v in zip(merges, values):
            env[m.name] = [v, np.asarray(1, np.int32)]
        out = {}
        for node in loop.nodes:
            if node.op in ("Enter", "Merge") or node.name in env:
                continue
            self.node = node
            with self.guard():
                if node.op == "LoopCond":
                    value = self.read_inputs(node, env)[0]
                    if upto_cond:
                        return value
                    env[node.name] = [value]
                    continue
                if node.op == "Switch" and node.inputs[1][0] == cond_node.name:
                    env[node.name] = [DEAD, self.read_inputs(node, env)[0]]
                    continue
                if node.op == "Exit":
                    continue
                values_in = self.read_inputs(node, env)
                env[node.name] = self.import_with(node, values_in, rules)
                if node.op == "NextIteration":
                    out[node.name] = env[node.name][0]
        return out

    def frame_node(self, loop, name):
        return next((n for n in loop.nodes if n.name == name), None)

    def read_inputs(self, node, env=None) -> list:
        values = []
        for src, k in node.inputs:
            produced = env[src] if env is not None and src in env else self.values[src]
            if k >= len(produced):
                raise self.error(f"input '{short(src)}:{k}': that node has "
                                 f"{len(produced)} outputs")
            values.append(produced[k])
        return values

    # -- staging (staged.py) -----------------------------------------------------------
    def static(self, x, what: str) -> np.ndarray:
        """x's value at import time; while staging, a value the graph computes is
        computed on the feeds and becomes a guard of the plan."""
        if self.runtime is not None and not isinstance(x, (np.ndarray, Init)):
            return self.concrete(x, what)
        return super().static(x, what)

    def concrete(self, x, what: str) -> np.ndarray:
        """The value of x on the feeds being staged (a guard: the plan is built for it);
        NeedsStaging in a plain import."""
        if isinstance(x, np.ndarray):
            return x
        if isinstance(x, Init):
            return x.array
        if self.tracing:
            raise _NotTraceable()
        if self.runtime is None:
            raise self.error(f"{what} is computed by the graph and decides the graph's "
                             f"shapes or structure (the model is staged)", NeedsStaging)
        tensor = self.tensor(x)
        known = self.runtime.guarded.get(id(tensor))
        if known is not None and known[0] is tensor:    # one guard per value (rvm's
            return known[1]                              # Switches share a predicate)
        value = np.asarray(self.runtime.evaluate(self.graph, [tensor])[0])
        self.runtime.boundaries.append(Guard(tensor, value, f"{self.where()}: {what}"))
        self.runtime.guarded[id(tensor)] = (tensor, value)
        return value

    def host_op(self, inputs, fn, dtypes, what: str) -> list:
        """fn (numpy, as TF.js computes the op on the CPU) on inputs' values: at import
        where they are all known; while staging, a boundary whose results enter the graph
        as placeholders of their shapes; NeedsStaging in a plain import."""
        if all(isinstance(x, (np.ndarray, Init)) for x in inputs):
            return list(fn(*[x.array if isinstance(x, Init) else x for x in inputs]))
        if self.tracing:
            raise _NotTraceable()
        if self.runtime is None:
            raise self.error(f"{what}: its result's shape depends on the data (the model "
                             f"is staged)", NeedsStaging)
        tensors = [self.tensor(x) for x in inputs]
        values = [np.asarray(v) for v in self.runtime.evaluate(self.graph, tensors)]
        results = fn(*values)
        holders = []
        with name_scope("/"):
            for k, (r, dtype) in enumerate(zip(results, dtypes)):
                p = placeholder(tuple(r.shape), dtype, name=clean_name(
                    f"{self.node.name}_host{k}", "host"))
                self.runtime.feeds[p] = r
                holders.append(p)
        self.runtime.boundaries.append(HostOp(tensors, fn, holders, f"{self.where()}: "
                                              f"{what}"))
        return holders

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
            p = placeholder(shape, dtype, name=clean_name(node.name, "input"))
        if self.runtime is not None:
            fed = next((self.runtime.by_name[k] for k in [node.name, *keys]
                        if k in self.runtime.by_name), None)
            if fed is not None:
                self.runtime.feeds[p] = fed
        return p

    def import_node(self, node, rules) -> list:
        return self.import_with(node, self.read_inputs(node), rules)

    def import_with(self, node, values, rules) -> list:
        if node.op == "Merge":
            live = [(k, v) for k, v in enumerate(values) if v is not DEAD]
            if not live:
                return DeadOutputs()
            ReadAttrs(node.attrs, harmless=HARMLESS | {"T", "N"}).check_all_read(self)
            return [live[0][1], np.asarray(live[0][0], np.int32)]
        if any(v is DEAD for v in values):
            return DeadOutputs()
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
        if isinstance(outputs, DeadOutputs):
            return outputs
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        self.check_made(outputs, first_new)
        return outputs


def load(path, *, input_shapes: dict | None = None, trainable: bool = False,
         max_elements: int = MAX_ELEMENTS, max_bytes: int = MAX_BYTES,
         custom_objects: dict | None = None) -> TfjsModel:
    """Import a TF.js graph model or layers model (a model.json, or a folder holding one,
    with its weight shards beside it) as a fragflow graph. See docs/TFJS.md.

    input_shapes: {input name: shape} fixing the model's unknown dims (None: free).
    trainable: float weights become ff.Variables (fine-tuning, sess.save); False (the
    default) makes them constants, which the passes fold (batch norm into convolution
    weights). max_elements / max_bytes: the limits a model is held to (the largest tensor;
    model.json and shards together), checked before anything is allocated. Whatever is
    wrong with the files is a TfjsImportError naming the node or weight. custom_objects
    (layers models): {class name: ff.keras layer class} for the custom layer classes TF.js
    users register in JavaScript, as ff.keras.models.load_model takes them; a class that
    neither fragflow nor custom_objects has is a TfjsImportError naming it and its layer.

    >>> import fragflow as ff
    >>> m = ff.tfjs.load("model.json", input_shapes={"input": (1, 256, 256, 3)})  # doctest: +SKIP
    >>> ff.Session(m.graph).run(m.outputs, m.feed_dict({"input": x}))             # doctest: +SKIP
    """
    file = reader.model_json_path(path)
    model = reader.read_model_json(file, max_bytes)
    if layers_model.is_layers_model(model):     # a Keras topology: frontend/keras_files
        return layers_model.load_layers_model(model, file, input_shapes, trainable,
                                              max_elements, max_bytes, custom_objects)
    if custom_objects:
        raise TfjsImportError(f"{short(file)!r} is a TF.js graph model: custom_objects "
                              f"applies to layers models (Keras layer classes) only")
    weights = reader.read_weights(model, os.path.dirname(os.path.abspath(file)), max_bytes,
                                  max_elements)
    label = os.path.basename(os.path.dirname(os.path.abspath(file))) + "/" \
        + os.path.basename(file)
    importer = Importer(model, weights, trainable, input_shapes, label, max_elements,
                        max_bytes)
    try:
        imported = _guarded(importer.run)
        imported.graph.weight_encodings.extend(reader.weight_encodings(model))
        return imported
    except NeedsStaging as err:
        reason = str(err)

    def build(runtime):
        shapes = dict(input_shapes or {})
        shapes.update((name, value.shape) for name, value in runtime.by_name.items())
        staged = Importer(model, weights, trainable, shapes, label, max_elements,
                          max_bytes, runtime=runtime)
        return _guarded(staged.run)

    return staged_model(importer, build, reason)


def staged_model(importer, build, reason) -> StagedTfjsModel:
    """The StagedTfjsModel of a model the plain import found staged: its inputs as
    model.json gives them (InputSpecs), its outputs' names."""
    nodes = importer.parse_nodes()
    inputs, outputs = importer.endpoints(nodes)
    specs, aliases = {}, {}
    for name, _, key in inputs:
        node = nodes[name]
        dtype_attr = node.attrs.get("dtype")
        dtype = TF_DTYPES.get(dtype_attr[1] if isinstance(dtype_attr, tuple)
                              else "DT_FLOAT", "float32")
        shape_attr = node.attrs.get("shape")
        shape = shape_attr[1] if isinstance(shape_attr, tuple) else None
        specs[name] = InputSpec(name, shape, dtype)
        if key:
            aliases[key] = name
    names = [name if index == 0 else f"{name}:{index}" for name, index, _ in outputs]
    return StagedTfjsModel(build, specs, names, reason, aliases)


def _guarded(run):
    try:
        return run()
    except TfjsImportError:
        raise
    except RecursionError:
        raise TfjsImportError("the model nests too deep to import") from None
    except Exception as err:     # noqa: BLE001 -- a malformed model, never a traceback
        raise TfjsImportError(f"cannot import the model: {type(err).__name__}: "
                              f"{short(err, 300)}") from err
