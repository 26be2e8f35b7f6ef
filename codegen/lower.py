"""Lowering a compiled graph to a LoweredGraph: a kernel per compute node (one per fused
group once fusion runs), views for the ops that only reshape, uploads for feeds and
constants, and the variables' textures.

A family's lowering, `lower_node(node, layouts, prefix)`, returns one Kernel or a list
of Kernels run in that order (a tree of reduction passes, a blocked matmul and its
stitch). The last one writes the node's output; the ones before it write values of
their own, named "<node name>:<suffix>" (e.g. "sum_3:r0"), whose layouts lower() takes
from the kernels' output bindings (codegen/reduce_tree.py scratch_layout makes such
layouts). The runtime plans them like any value: a texture, freed after its last
reader. `prefix` ("k<N>", N = the run index of the node's first kernel) starts every
kernel name; make each name unique, e.g. "k<N>.p<i>_<node>" for the passes before the
last and "k<N>_<node>" for the last, which is the name a single kernel would have."""
from __future__ import annotations

from dataclasses import replace
from importlib import import_module
from importlib.util import find_spec

from ..ir.errors import FragflowError, TooManyInputsError
from ..ir.graph import Graph
from ..ir.ops.registry import FAMILIES, get_op
from . import elementwise  # lower_copy, an assign's copy kernel
from .kernel import LoweredGraph
from .layout import VIEW_OPS, layout_for
from .limits import DESKTOP, Limits, lowering_with
from .schedule import active as facts_active, facts_with, schedule
from .tuning import Tuning, tuning_with

# op family (ir/ops/<family>.py) -> lowering of one node to a Kernel: the lower_node of
# codegen/<family>.py (imported in name order); a family without one (state) has no kernels
LOWERINGS = {family: import_module(f"{__package__}.{family}").lower_node
             for family in sorted(FAMILIES) if find_spec(f"{__package__}.{family}")}

# the families' scheduling decisions that span nodes (codegen/schedule.py), in order
PLANNERS = (import_module(f"{__package__}.conv").plan_blocks,
            import_module(f"{__package__}.norm").plan_blocks,
            import_module(f"{__package__}.matmul").plan_blocks)


def lower(graph: Graph, limits: Limits | int | None = None,
          max_texture_units: int | None = None, tuning: Tuning | None = None,
          windows: dict | None = None) -> LoweredGraph:
    """limits: the dialect and the device's limits (codegen/limits.py; a context's:
    `Limits.from_context(info)`); None: GL 3.3 core's. The older form
    lower(graph, max_texture_size, max_texture_units=None) means desktop GL with those.
    tuning: the knobs kernel choice follows (codegen/tuning; None: the llvmpipe
    profile). The scheduling step (codegen/schedule.py) runs first; the families read
    the limits, the tuning and its facts as their modules' `active()` while this runs.
    windows: {value name: (width, height, uniform)}: values that live inside a larger
    texture at a texel offset the uniform holds (a scan step's slices and outputs,
    runtime/control_flow.py; window_safe says which kernels honour them)."""
    if limits is None or isinstance(limits, int):
        limits = Limits(max_texture_size=limits or DESKTOP.max_texture_size,
                        max_texture_units=DESKTOP.max_texture_units if max_texture_units is None
                        else max_texture_units)
    elif max_texture_units is not None:
        raise FragflowError("lower(graph, limits): max_texture_units is in the Limits")
    tuning = Tuning() if tuning is None else tuning
    with lowering_with(limits), tuning_with(tuning), \
            facts_with(schedule(graph, limits, tuning, PLANNERS)):
        return _lower(graph, limits, windows or {})


def _lower(graph: Graph, limits: Limits, windows: dict) -> LoweredGraph:
    max_texture_size, units = limits.max_texture_size, limits.max_texture_units
    layouts = {}
    for node in graph.nodes:
        for v in node.outputs:
            layouts[v.name] = layout_for(v.type, max_texture_size, f"{node.where()}'s output")
            if v.name in windows:
                width, height, uniform = windows[v.name]
                layouts[v.name] = replace(layouts[v.name], width=width, height=height,
                                          window=uniform)
            elif node.op in VIEW_OPS and layouts[node.inputs[0].name].window:
                within = layouts[node.inputs[0].name]     # a view shares its texture
                layouts[v.name] = replace(layouts[v.name], width=within.width,
                                          height=within.height, window=within.window)
    planned = facts_active()
    lowered_graph = LoweredGraph(layouts=layouts, feeds=[], constants={}, variables={},
                                 steps=[], assigns=[], outputs=[v.name for v in graph.outputs])
    for node in graph.nodes:
        out = node.outputs[0].name if node.outputs else None
        if node.op in ("placeholder", "run_counter"):   # the session feeds run_counter
            lowered_graph.feeds.append(out)
        elif node.op == "constant":
            lowered_graph.constants[out] = node.attrs["value"]
        elif node.op == "variable":
            lowered_graph.variables[out] = node.name
        elif node.op in VIEW_OPS:
            if node.inputs[0].name not in planned.blocks:   # else never written: its
                lowered_graph.steps.append(("alias", out, node.inputs[0].name))
            # readers bind its producer's targets (codegen/matmul.py plan_blocks)
        elif any(layouts[v.name].size == 0 for v in node.outputs):
            lowered_graph.steps.append(("empty", out))    # nothing to compute
        elif node.op == "assign":
            # The new value's texture replaces the variable's when the run ends (GL
            # cannot read and write one texture): the texture a kernel of this run
            # wrote it into, where no one else needs that texture; else a copy.
            if _takes_texture(lowered_graph, node.inputs[1].name, out, layouts):
                lowered_graph.steps.append(("alias", out, node.inputs[1].name))
            else:
                kernel = elementwise.lower_copy(
                    node, layouts, f"k{len(lowered_graph.kernels)}").with_strategy(
                        "state.assign_copy")
                lowered_graph.steps.append(("kernel", kernel))
            lowered_graph.assigns.append((node.inputs[0].node.name, out))
        else:
            family = get_op(node.op).family
            lowered = LOWERINGS[family](node, layouts, f"k{len(lowered_graph.kernels)}")
            # a node may run as several kernels (see the module docstring)
            for kernel in lowered if isinstance(lowered, list) else [lowered]:
                if not kernel.strategy:     # a family with one kernel kind: its template's
                    kernel = kernel.with_strategy(
                        f"{family}.{kernel.template.split('.')[0] or node.op}")
                _check_texture_units(node, kernel, units)
                for b in kernel.outputs:        # values between a node's kernels
                    layouts.setdefault(b.value, b.layout)
                lowered_graph.steps.append(("kernel", kernel))
    lowered_graph.fetched_blocks.update(_fetched_blocks(lowered_graph, planned))
    return lowered_graph


def _fetched_blocks(lowered_graph: LoweredGraph, planned) -> dict:
    """{fetched value: its render targets' value} for the fetched values a planner left
    in render targets (codegen/norm.py plan_blocks): a readback reads every layer and
    puts the texels in order, which it can where one kernel wrote all of them, each
    texel once (a Blocking of one matrix, no K splits, rows not interleaved)."""
    found = {}
    for name in dict.fromkeys(lowered_graph.outputs):
        view = planned.blocks.get(name)
        if view is None:
            continue
        targets = f"{name}#blocks"
        writers = [k for k in lowered_graph.kernels
                   if k.output.value == targets and k.output_layers]
        blocking = getattr(view, "blocking", None)
        if len(writers) != 1 or getattr(view, "pending", False) or \
                view.mapping != "matmul" or blocking.batch != 1 or blocking.splits != 1 or \
                blocking.interleaved:
            raise FragflowError(f"'{name}' is fetched but left in render targets a readback "
                                f"cannot read ({view.mapping} {blocking}); this is a "
                                f"fragflow bug (a planner in codegen/lower.py PLANNERS)")
        found[name] = targets
    return found


def _check_texture_units(node, kernel, units: int) -> None:
    """A kernel binding more textures than the GPU has units would not link; the passes
    split what they can (split_wide_nodes, fusion), so this is what they cannot."""
    if len(kernel.inputs) > units:
        raise TooManyInputsError(
            f"{node.where()}: its kernel would read {len(kernel.inputs)} textures but the "
            f"GPU binds at most {units} per kernel (GL_MAX_TEXTURE_IMAGE_UNITS); give it "
            f"fewer inputs, e.g. combine some first")


def _takes_texture(lowered_graph: LoweredGraph, value: str, assigned: str,
                   layouts: dict) -> bool:
    """Whether an assign can hand the variable the very texture `value` was computed
    into (no copy kernel). The runtime swaps it with the variable's at the end of the
    run and the next run computes `value` into the variable's old texture. Only for a
    value that one kernel of this lowered graph writes (not a variable, feed or
    constant, whose texture must keep its content), that no earlier assign took, and
    whose texture has the variable's size and format. Fetched values are read back
    before the swap; kernels reading the value later in the run still find it there."""
    root = value
    aliases = {s[1]: s[2] for s in lowered_graph.steps if s[0] == "alias"}
    while root in aliases:
        root = aliases[root]
    writers = [s[1] for s in lowered_graph.steps
               if s[0] == "kernel" and any(b.value == root for b in s[1].outputs)]
    if len(writers) != 1 or writers[0].output_layers:
        return False        # an array texture's layer is not a texture of its own
    # (several render targets: the plan's framebuffer follows the swapped textures,
    # runtime/slot_targets.py)
    taken = set()
    for _, name in lowered_graph.assigns:
        while name in aliases:
            name = aliases[name]
        taken.add(name)
    return root not in taken and \
        layouts[root].texture_key == layouts[assigned].texture_key
