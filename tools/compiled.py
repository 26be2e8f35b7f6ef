"""A TARGET compiled the way a Session compiles it (runtime/driver.py): the graph after
each pass, the kernels in run order, and which kernel computes each node of the user's
graph."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import numpy as np

import fragflow as ff
from fragflow.codegen.kernel import node_value
from fragflow.codegen.lower import VIEW_OPS
from fragflow.passes import DEFAULT_PIPELINE
from fragflow.passes.manager import REQUIRED_PASSES
from fragflow.runtime import driver
from fragflow.runtime.backend import get_backend

from .target import Target

STAGES = ("prune",) + tuple(DEFAULT_PIPELINE)


@dataclass
class CompiledRun:
    target: Target
    compiled: object           # the driver's Compiled record (its plan: a GLPlan)
    backend: object            # its backend (runtime/backend.py GLBackend)
    feeds: dict                # Value -> array

    @property
    def kernels(self) -> list:
        return list(self.compiled.kernels)

    @property
    def graph(self):
        """The compiled graph (after every pass)."""
        return self.compiled.graph

    def close(self):
        """The plan's textures and shaders, and its variables' textures, given back."""
        with self.backend.lock:
            self.backend.release_plan(self.compiled.plan)
            self.compiled.variables.release()
            self.backend.evict()


def compile_target(target: Target, feed_shapes=None, debug: bool = False) -> CompiledRun:
    """Compile on GL with the feeds' shapes (debug: as Session(debug=True), one kernel
    per node)."""
    feeds = target.feeds(feed_shapes)
    backend = get_backend("gl")
    disable = ("fuse_norms", "fuse_epilogues", "fuse_updates", "fuse_elementwise") \
        if debug else ()
    types = {v: ff.TensorType(np.shape(a), v.dtype) for v, a in feeds.items()}
    variables = backend.variables()
    try:
        compiled = driver.compile(target.graph, target.fetches, types, backend, variables,
                                  disable=disable)
    except BaseException:
        with backend.lock:
            variables.release()
        raise
    return CompiledRun(target, compiled, backend, feeds)


def check_stage(name: str) -> str:
    if name not in STAGES and name != "all":
        raise ff.FragflowError(f"--after {name!r}: no such pass; the pipeline is "
                               f"{', '.join(STAGES)} (or all)")
    return name


def graph_after(target: Target, stage: str, feed_shapes=None):
    """The graph the pipeline has made after `stage` ("prune" or a pass name)."""
    check_stage(stage)
    stages = STAGES[1:STAGES.index(stage) + 1]         # none: prune alone
    return driver.optimize(target.graph, target.fetches, target.feed_types(feed_shapes),
                           passes=stages, dump_dir="",
                           disable=[n for n in REQUIRED_PASSES if n not in stages]).graph


def stage_dumps(target: Target, feed_shapes=None) -> list:
    """[(stage name, text)] exactly as FRAGFLOW_DUMP_PASSES writes them: a comment with
    the node counts and what the pass reported (fusion decisions), then the text dump."""
    with tempfile.TemporaryDirectory(prefix="fragflow-passes-") as directory:
        driver.optimize(target.graph, target.fetches, target.feed_types(feed_shapes),
                        dump_dir=directory)
        out = []
        for file_name in sorted(os.listdir(directory)):
            stage = file_name.rsplit(".", 2)[-2]
            with open(os.path.join(directory, file_name), encoding="utf-8") as f:
                out.append((stage, f.read().rstrip("\n")))
    return out


def concrete_types(target: Target, feed_shapes=None) -> dict:
    """{value name: type text} with the shapes the run has (prune re-infers them from
    the fed shapes); empty where they cannot be known."""
    try:
        graph = graph_after(target, "prune", feed_shapes)
    except ff.FragflowError:
        return {}
    return {v.name: str(v.type) for n in graph.nodes for v in n.outputs}


def kernel_of(graph, kernels) -> dict:
    """{node name: index of the first kernel of it} for the nodes of graph (the
    user's graph or one after any pass): a kernel runs for the nodes it lists (a fused
    kernel lists every node folded into it) and the node of its output value. A node
    lowered to several kernels has more: node_kernels says which one computes it."""
    out = {}
    for index, kernel in enumerate(kernels):
        names = list(kernel.nodes) + [kernel.output.value.partition(":")[0]]
        for name in names:
            if name in graph:
                out.setdefault(name, index)
    return out


def node_kernels(graph, kernels) -> dict:
    """{node name: (index of the kernel that computes it, [index of every kernel of
    it, in run order])} for the nodes of graph: a node lowered to several kernels (a
    blocked matmul and its stitch, a tree of reduction passes) is computed by the one
    writing its result, as the kernel record says (Kernel.computes): the stitch for
    an epilogue's nodes, the blocked kernel for the product before it, a tree's last
    pass."""
    first = kernel_of(graph, kernels)
    every, computing = {}, {}
    for index, kernel in enumerate(kernels):
        value = node_value(kernel.output.value).partition(":")[0]
        for name in dict.fromkeys(list(kernel.nodes) + [value]):
            if name in graph:
                every.setdefault(name, []).append(index)
        for record in kernel.computes:
            if record.name in graph:
                computing[record.name] = index
        if kernel.part in ("", "stitch", "last") and value in graph and \
                value not in computing:
            computing[value] = index
    return {name: (computing.get(name, index), every.get(name, [index]))
            for name, index in first.items()}


def node_notes(graph, kernels, compiled_graph=None, pruned_names=None) -> dict:
    """Why a node has no kernel of its own, for the nodes that have none."""
    computed = kernel_of(graph, kernels)
    notes = {}
    for node in graph.nodes:
        if node.name in computed:
            continue
        if pruned_names is not None and node.name not in pruned_names:
            notes[node.name] = "not needed for the fetches: pruned, never runs"
        elif node.op == "placeholder":
            notes[node.name] = "fed: uploaded into a texture before the kernels run"
        elif node.op == "variable":
            notes[node.name] = "a variable: a texture the session keeps across runs"
        elif node.op == "constant":
            notes[node.name] = "a constant: uploaded once when the plan is built"
        elif node.op in VIEW_OPS:
            notes[node.name] = (f"a view ({node.op}): shares its input's texture, "
                                f"no kernel")
        elif compiled_graph is not None and node.name in compiled_graph and \
                compiled_graph.node(node.name).op == "constant":
            notes[node.name] = "folded into a constant by fold_constants"
        else:
            notes[node.name] = ("no kernel of its own: the passes folded, simplified or "
                                "merged it (see fragflow dump --after all)")
    return notes
