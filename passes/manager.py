"""The pass pipeline: passes registered by name, run in a declared order, each
optionally dumped (FRAGFLOW_DUMP_PASSES=dir) and verified (FRAGFLOW_VERIFY=1).

Sub-graphs (a while_loop's cond and body, a cond's branches, a scan's body:
ir/ops/control.py) get each pass too, right after the graph holding them, nested
loops included, where the pipeline is the numpy executor's (no max_texture_units):
on GL each body is inlined into a plan of its own and optimized there
(runtime/control_flow.py), so doing it here too would only be done twice. A
sub-graph's parameters (its placeholders, in order) are kept even where the body
does not read them, and the user's sub-graphs are never changed: each pass works on
a copy."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from ..ir.errors import FragflowError
from ..ir.graph import Graph
from ..ir.ops import control as _control
from ..ir.printer import format_graph
from . import (
    attention,
    cond_select,
    conv_as_matmul,
    conv_lowering,
    fold_batch_norm,
    fuse_updates,
    fusion,
    layout_transposes,
    merge_matmuls,
    norms,
    pad_channels,
    pad_folding,
    simplify,
    split_wide,
    top_k,
)
from .rewrite import rebuild
from .verify import VerificationError, verify


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable          # (Graph, report: list of str, **options) -> Graph
    doc: str = ""
    # the target's limits the pass plans with, and "tuning" (the compile's Tuning, whose
    # knobs it reads), passed as keyword arguments (names from PassManager.options)
    options: tuple = ()


PASSES: dict = {}


def register_pass(name: str, doc: str = "", options: tuple = ()):
    def decorator(fn):
        PASSES[name] = Pass(name, fn, doc, tuple(options))
        return fn
    return decorator


register_pass("verify", "check edges, names and types")(lambda graph, report: verify(graph))
register_pass("fold_constants", "evaluate nodes of constants (numpy references)")(
    simplify.fold_constants)
register_pass("cse", "compute identical nodes once")(
    simplify.eliminate_common_subexpressions)
register_pass("simplify", "x*1, x+0, -(-x), same-dtype casts, transpose/reshape pairs")(
    simplify.simplify)
register_pass("select_conds",
              "a cond of cheap branches as a select (no predicate readback on GL); a "
              "cond of a constant predicate as its taken branch")(cond_select.select_conds)
register_pass("layout_transposes",
              "cancel transpose pairs, sink transposes below elementwise ops and "
              "reductions (an imported NCHW model's layout changes)")(
    layout_transposes.remove_layout_transposes)
register_pass("conv_backprop_as_conv",
              "stride-1 conv2d input gradients as convolutions (vec4 kernels)",
              options=("tuning",))(conv_lowering.conv_backprop_input_as_conv)
register_pass("fold_pads",
              "a zero pad before a convolution (-inf / +inf before a max / min pool) as "
              "the window's own padding")(pad_folding.fold_pads)
register_pass("fold_batch_norm",
              "per-channel scales after conv/matmul (inference batch norm) into weights")(
    fold_batch_norm.fold_batch_norm)
register_pass("conv_as_matmul",
              "a conv2d whose one window is its whole image (a head's dense layer) as a "
              "matmul", options=("tuning",))(conv_as_matmul.conv_as_matmul)
register_pass("pad_channels",
              "a conv2d's image of C % 4 != 0 channels padded to a multiple of 4 (whole "
              "texels a pixel)", options=("tuning",))(pad_channels.pad_channels)
register_pass("select_top_k",
              "top_k_indices of top_k_rank as one top_k_select (its lowering picks "
              "the kernels by row length)")(top_k.select_top_k)
register_pass("split_wide_nodes",
              "add_n / concat of more inputs than a kernel binds textures, as a tree",
              options=("max_texture_units",))(split_wide.split_wide_nodes)
register_pass("merge_matmuls",
              "sibling matmuls of one operand (q, k, v) as one over concatenated weights",
              options=("tuning",))(merge_matmuls.merge_matmuls)
register_pass("fuse_attention",
              "softmax(q kᵀ / c + mask) v (scaled dot-product attention) in one kernel",
              options=("tuning",))(attention.fuse_attention)
register_pass("fuse_norms",
              "LayerNorm and RMSNorm (mean, variance, rsqrt, scale, offset) in one kernel",
              options=("tuning",))(norms.fuse_norms)
register_pass("fuse_epilogues",
              "matmul / conv2d / depthwise_conv2d + bias + activation in one kernel",
              options=("max_texture_units",))(fusion.fuse_epilogues)
register_pass("fold_channel_pads",
              "a zero pad of the channels read by a fused matmul / conv's epilogue (a "
              "residual shortcut) read through, no kernel")(pad_folding.fold_channel_pads)
register_pass("fuse_updates",
              "an optimizer's update of a variable and its slots in one kernel",
              options=("max_texture_units", "max_draw_buffers"))(fuse_updates.fuse_updates)
register_pass("fuse_elementwise", "connected elementwise ops in one kernel",
              options=("max_texture_units",))(fusion.fuse_elementwise)

# The order a Session runs them in, after prune (which always runs first: it is what
# turns a user's graph and fetches into a compiled graph).
DEFAULT_PIPELINE = ("fold_constants", "layout_transposes", "cse", "simplify",
                    "select_conds", "select_top_k", "conv_backprop_as_conv", "fold_pads",
                    "fold_batch_norm", "pad_channels", "merge_matmuls", "split_wide_nodes",
                    "fuse_attention", "fuse_norms", "fuse_epilogues", "conv_as_matmul",
                    "fold_channel_pads", "fuse_updates", "fuse_elementwise", "verify")
# the passes whose decisions fusion_report lists (a cond run as a select among them)
FUSION_PASSES = ("merge_matmuls", "fuse_attention", "fuse_norms", "fuse_epilogues",
                 "fold_channel_pads", "fuse_updates",
                 "fuse_elementwise", "layout_transposes", "select_conds")
# What a compiled graph needs before any GPU can run it (no kernel reading more
# textures than the GPU binds): a custom pipeline for a GPU (max_texture_units given)
# that leaves one out gets it at its end, unless disable= names it. The numpy executor
# binds no textures: with passes=[] it runs the graph as built (the tests' oracle).
REQUIRED_PASSES = ("split_wide_nodes",)


class PassManager:
    """Runs passes in order. max_texture_units: how many textures one kernel may read
    (the GL context's GL_MAX_TEXTURE_IMAGE_UNITS; GL 3.3's 16 when not given);
    max_draw_buffers: how many render targets one kernel may write (GL_MAX_DRAW_BUFFERS;
    GL 3.3's 8 when not given); tuning: the compile's Tuning (codegen/tuning), handed
    to the passes that read knobs of it (the driver gives one; passes never import
    codegen); subgraphs: whether the passes also run inside loop bodies and branches
    (None: where max_texture_units is None, the numpy executor's pipeline; see the
    module docstring)."""

    def __init__(self, passes=None, disable=(), dump_dir: str | None = None,
                 verify_each: bool | None = None, max_texture_units: int | None = None,
                 max_draw_buffers: int | None = None, subgraphs: bool | None = None,
                 tuning=None):
        names = list(DEFAULT_PIPELINE if passes is None else passes)
        if max_texture_units is not None:      # a GPU's plan; the numpy executor has none
            names += [n for n in REQUIRED_PASSES if n not in names]
        unknown = [n for n in list(names) + list(disable) if n not in PASSES]
        if unknown:
            raise FragflowError(f"unknown pass(es) {unknown}; known: {sorted(PASSES)}")
        self.passes = [PASSES[n] for n in names if n not in set(disable)]
        self.dump_dir = dump_dir if dump_dir is not None else \
            os.environ.get("FRAGFLOW_DUMP_PASSES") or None
        self.verify_each = bool(os.environ.get("FRAGFLOW_VERIFY")) if verify_each is None \
            else verify_each
        self.subgraphs = max_texture_units is None if subgraphs is None else bool(subgraphs)
        self.log: list = []      # (pass name, nodes before, nodes after, report lines)
        self.options = {"max_texture_units": split_wide.DEFAULT_TEXTURE_UNITS
                        if max_texture_units is None else int(max_texture_units),
                        "max_draw_buffers": split_wide.DEFAULT_DRAW_BUFFERS
                        if max_draw_buffers is None else int(max_draw_buffers),
                        "tuning": tuning}

    def run(self, graph: Graph) -> Graph:
        self._dump(0, "prune", graph, None, [])
        for index, p in enumerate(self.passes, 1):
            before = len(graph.nodes)
            report: list = []
            graph = p.run(graph, report, **{k: self.options[k] for k in p.options})
            if self.subgraphs:
                graph = self._inside(graph, p, report)
            self.log.append((p.name, before, len(graph.nodes), report))
            if self.verify_each and p.name != "verify":
                verify(graph)
            self._dump(index, p.name, graph, before, report)
        return graph

    def _inside(self, graph: Graph, p: Pass, report: list, where: str = "") -> Graph:
        """graph with pass p run inside each control node's sub-graphs (and theirs);
        graph itself where none changed. Report lines from inside name the node."""
        changed: dict = {}
        for node in graph.nodes:
            subs = _control.subgraphs(node)
            if not subs:
                continue
            new_attrs = dict(node.attrs)
            for key, sub in subs:
                inner = f"{where}{node.name}'s {key}"
                lines: list = []
                after = self._on_subgraph(sub, p, lines, inner, report)
                if after is not sub:
                    new_attrs[key] = after
            if any(new_attrs[k] is not v for k, v in subs):
                changed[node] = new_attrs
        if not changed:
            return graph

        def swap(node, inputs, new, mapping):
            if node not in changed:
                return None
            return new.add_node(node.op, inputs, changed[node], exact_name=node.name,
                                scope=node.scope, source=node.source).outputs
        return rebuild(graph, swap)

    def _on_subgraph(self, sub: Graph, p: Pass, lines: list, where: str,
                     report: list) -> Graph:
        """sub after pass p (and p inside sub's own sub-graphs): a new graph, or sub
        where nothing changed; what p reports goes to report, naming where. The pass
        works on a copy whose outputs also list the parameters, so that no dead-node
        sweep drops one a body does not read."""
        params = _control.params(sub)
        work = Graph(sub.name)
        work.custom_gradients = sub.custom_gradients
        mapping: dict = {}
        for node in sub.nodes:
            copy = work.add_copy(node, [mapping[v] for v in node.inputs])
            mapping.update(zip(node.outputs, copy.outputs))
        returned = len(sub.outputs)
        work.outputs = [mapping[v] for v in sub.outputs] + [mapping[v] for v in params]
        after = p.run(work, lines, **{k: self.options[k] for k in p.options})
        report += [f"in {where}: {line}" for line in lines]
        after = self._inside(after, p, report, where=f"{where} > ")
        if after is work:
            return sub
        kept = _control.params(after)
        if [(v.name, v.type) for v in kept] != [(v.name, v.type) for v in params] or \
                after.outputs[returned:] != kept:
            raise VerificationError(f"pass {p.name} changed the parameters of {where}: "
                                    f"{[v.name for v in params]} -> "
                                    f"{[v.name for v in kept]}")
        after.outputs = after.outputs[:returned]
        if self.verify_each and p.name != "verify":
            verify(after)
        return after

    @property
    def fusion_report(self) -> list:
        """What the fusion passes fused and every candidate they turned down, and why."""
        return [line for name, _, _, report in self.log if name in FUSION_PASSES
                for line in report]

    def _dump(self, index: int, name: str, graph: Graph, before, report) -> None:
        if not self.dump_dir:
            return
        os.makedirs(self.dump_dir, exist_ok=True)
        path = os.path.join(self.dump_dir, f"{graph.name}.{index:02d}.{name}.txt")
        lines = [f"// after {name}: {len(graph.nodes)} nodes"
                 + (f" (before: {before})" if before is not None else "")]
        lines += [f"// {line}" for line in report]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n" + format_graph(graph) + "\n")
