"""Lowering user-written GPU programs to templates/program.glsl.j2."""
from __future__ import annotations

import textwrap

from ..ir.program_loops import check_program_loops
from .common import make_kernel, output_operand
from .layout import broadcast_index, strides
from .operands import Operand


def getter_name(input_name: str) -> str:
    """'x' -> 'X', 'bias' -> 'Bias' (TensorFlow.js's getX / getBias)."""
    return input_name[:1].upper() + input_name[1:]


def user_glsl(attrs) -> str:
    """The user's GLSL as a gpgpu_program kernel holds it (Kernel.user_code's text)."""
    return textwrap.dedent(attrs["glsl"]).rstrip()


def lower_node(node, layouts, prefix):
    attrs = node.attrs
    out = output_operand(node.outputs[0], layouts)
    out_shape = out.layout.shape
    inputs = []
    for k, (v, user_name) in enumerate(zip(node.inputs, attrs["inputs"])):
        layout = layouts[v.name]
        b = Operand(sampler=f"x{k}", value=v.name, layout=layout, type=str(v.type),
                    index=broadcast_index(out_shape, layout.shape), arg=f"a{k}")
        b.user_name, b.getter, b.strides = user_name, getter_name(user_name), \
            strides(layout.shape)
        inputs.append(b)
    declared = dict(attrs["uniforms"])
    values = dict(attrs["uniform_values"])
    uniforms = {name: (glsl_type, values[name]) for name, glsl_type in declared.items()}
    glsl = user_glsl(attrs)
    # shapes are all known now: a loop bound made of them may run past llvmpipe's limit
    check_program_loops(attrs, [v.shape for v in node.inputs], out_shape, node.source)
    return make_kernel("program.glsl.j2", prefix, attrs["name"], [node], inputs, out,
                       uniforms=uniforms, user_code=(attrs["name"], glsl), glsl=glsl,
                       out_unravel=list(zip(strides(out_shape), out_shape)))
