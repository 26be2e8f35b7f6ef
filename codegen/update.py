"""Lowering fused_update (ir/ops/update.py): the elementwise template with one render
target per result (templates/update.glsl.j2), so an optimizer's update of a variable
and its slots is one draw.

The inputs are read as an elementwise kernel reads them (codegen/elementwise.py
read_of); the runtime binds the results' textures to one framebuffer and follows the
swaps that hand them to the variables (runtime/slot_targets.py)."""
from __future__ import annotations

from dataclasses import replace

from ..ir.errors import FragflowError
from ..ir.types import TensorType
from . import elementwise
from .common import kernel_name, make_kernel, output_operand
from .fused import glsl_steps
from .kernel import Binding, records_of
from .layout import broadcast_index
from .limits import active
from .operands import Operand


def _inputs(node, layouts) -> list:
    return [Operand(sampler=f"x{k}", value=v.name, layout=layouts[v.name],
                    type=str(TensorType(layouts[v.name].shape, v.dtype)), arg=f"a{k}")
            for k, v in enumerate(node.inputs)]


def lower_node(node, layouts, prefix):
    most = active().max_draw_buffers
    if len(node.outputs) > most:      # fuse_updates keeps such groups apart
        raise FragflowError(f"{node.where()}: one kernel would write {len(node.outputs)} "
                            f"render targets, more than the {most} this GPU draws at once; "
                            f"run fuse_updates with max_draw_buffers={most}")
    outs = [output_operand(v, layouts) for v in node.outputs]
    out = outs[0]
    inputs = _inputs(node, layouts)
    steps, _ = glsl_steps(node.attrs["steps"], [b.arg for b in inputs],
                          [v.type for v in node.inputs])
    results = [steps[j]["var"] for j in node.attrs["results"]]
    # one-element constants (a learning rate, beta1) become uniforms on big outputs,
    # as in elementwise kernels
    constants = elementwise.scalar_constants(node.inputs)
    textures, scalars, uniforms = [], [], {}
    for b in inputs:
        b.index = broadcast_index(out.layout.shape, b.layout.shape)
        b.read = elementwise.read_of(b.index) if b.size > 1 else "splat"
        if b.value in constants and elementwise.uniforms_pay(out.size):
            b.read = "uniform"
            uniforms[f"u_{b.arg}"] = (b.scalar, constants[b.value])
            scalars.append(b)
        else:
            textures.append(b)
    more = [{"sampler": f"ff_out{j}", "value": o.value, "result": r}
            for j, (o, r) in enumerate(zip(outs[1:], results[1:]), start=1)]
    nodes = records_of([node])
    kernel = make_kernel("update.glsl.j2", prefix, "fused_update", [node], textures, out,
                         uniforms=uniforms, scalars=scalars, steps=steps,
                         result=results[0], indexed=False, invariant_output=True,
                         fetch_helpers={b.sampler for b in textures if b.read != "same"},
                         more_outputs=more)
    extra = tuple(Binding(m["sampler"], o.value, o.layout) for m, o in zip(more, outs[1:]))
    return replace(kernel, name=kernel_name(prefix, node), extra_outputs=extra,
                   implements=nodes)


__all__ = ["lower_node"]
