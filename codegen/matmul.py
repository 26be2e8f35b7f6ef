"""Lowering matmul to templates/matmul.glsl.j2."""
from __future__ import annotations

from .common import make_kernel, operands, output_operand
from .layout import affine_index, strides
from .reduce import unroll_for


def _batch_strides(operand_shape, batch_shape):
    """Strides of an operand's batch dims, per output batch dim (0 where broadcast)."""
    own = operand_shape[:-2]
    padded = (1,) * (len(batch_shape) - len(own)) + tuple(own)
    own_strides = strides(operand_shape)[:-2]
    padded_strides = (0,) * (len(batch_shape) - len(own)) + tuple(own_strides)
    return [0 if d == 1 else s for d, s in zip(padded, padded_strides)]


def matmul_kernel(node, a, b, out, prefix, extra=(), epilogue=None, op="matmul",
                  nodes=None):
    """A matmul kernel; with an epilogue (codegen/fused.py), it applies elementwise
    steps to each result before writing it, reading the extra operands."""
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    out_shape = out.layout.shape
    batch = out_shape[:-2]
    m, n = out_shape[-2], out_shape[-1]
    k = a.layout.shape[-2] if ta else a.layout.shape[-1]
    a_index = affine_index(out_shape, _batch_strides(a.layout.shape, batch)
                           + [1 if ta else k, 0])
    b_index = affine_index(out_shape, _batch_strides(b.layout.shape, batch)
                           + [0, k if tb else 1])
    a_step = m if ta else 1
    b_step = 1 if tb else n
    columns_in_texels = n % 4 == 0 and not tb
    rows_in_texels = columns_in_texels and k % 4 == 0 and not ta
    # The template names the operands inputs[0] and inputs[1]; x @ x binds one texture.
    bound = [a, b] if a is not b else [a, _alias(a)]
    return make_kernel("matmul.glsl.j2", prefix, op, nodes or [node], bound + list(extra),
                       out, a_index=a_index, b_index=b_index, a_step=a_step,
                       b_step=b_step, k=k, columns_in_texels=columns_in_texels,
                       rows_in_texels=rows_in_texels, epilogue=epilogue,
                       unroll=unroll_for(k // 4 if rows_in_texels else k))


def lower_node(node, layouts, prefix):
    ins = operands(node, layouts)
    a, b = (ins[0], ins[0]) if len(ins) == 1 else ins
    return matmul_kernel(node, a, b, output_operand(node.outputs[0], layouts), prefix)


def _alias(op):
    from .operands import Operand
    return Operand(sampler="x1", value=op.value, layout=op.layout, type=op.type, arg="a1")
