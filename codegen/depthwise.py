"""The direct depthwise 2D convolution kernel (templates/depthwise_direct.glsl.j2): one
fragment per output texel (4 channels of one pixel) in the output's own layout, its
taps unrolled, the fused epilogue (bias, activation) applied in the same kernel.

Strategy "depthwise.direct" of codegen/conv.py TABLE: the depthwise convolutions that
do not run blocked (output elements x taps below matmul's blocked_min_macs, and not
read only by conv2d kernels that take a blocked depthwise kernel's targets). Where the
image's producer left it in its render targets (codegen/conv.py plan_blocks), the
kernel reads them. A fragment's fetches (9 input, 9 weight texels) are its cost.
"""
from __future__ import annotations

from dataclasses import dataclass

from .common import make_kernel
from .operands import Operand


def direct_applies(taps: int, c: int, mult: int, dtype: str, out_size: int, tuning) -> bool:
    """Whether the direct kernel takes a depthwise conv2d: whole output texels
    (multiplier 1 and C % 4 == 0, or multiplier % 4 == 0), float, a filter it unrolls,
    too small for the blocked kernel."""
    return ((mult == 1 and c % 4 == 0) or mult % 4 == 0) and \
        taps <= tuning.conv.depthwise_direct_max_taps and dtype == "float32" and \
        out_size * taps < tuning.matmul.blocked_min_macs


def reads_blocks(node, value, tuning) -> bool:
    """Whether graph node `node` is a depthwise conv that can read `value` (its image,
    and nothing else of it) straight from the render targets of the blocked conv2d
    that computes it (matmul.BlocksLayout: multiplier 1, no stitch in between): the
    direct kernel reads them, and the blocked one where the node is too big for the
    direct one (codegen/conv.py)."""
    conv_op = node.attrs.get("conv_op") if node.op == "fused_conv" else node.op
    if conv_op != "depthwise_conv2d" or node.inputs[0] is not value or \
            any(v is value for v in node.inputs[1:]):
        return False
    x, w, out = node.inputs[0].type, node.inputs[1].type, node.outputs[0].type
    if len(x.shape) != 4 or len(w.shape) != 4 or not x.is_static or not w.is_static:
        return False
    return w.shape[3] == 1 and x.shape[3] % 4 == 0 and \
        x.dtype == w.dtype == out.dtype == "float32" and \
        w.shape[0] * w.shape[1] <= min(tuning.conv.depthwise_direct_max_taps,
                                       tuning.conv.blocked_depthwise_taps)


@dataclass
class BlocksOperand(Operand):
    """An input read from a blocked kernel's render targets (an array texture)."""
    sampler_type = property(lambda self: "sampler2DArray")


def direct_kernel(g, context: dict, inputs, out, prefix: str, op: str, nodes,
                  extra=(), epilogue=None, view=None, knobs=None):
    """The kernel of a depthwise conv2d direct_applies takes; `view`: the image's
    producer's render targets (a BlocksLayout) where it left it there."""
    x, w = inputs
    blocks = getattr(view, "blocking", None)
    if blocks is not None:
        x = BlocksOperand(sampler=x.sampler, value=f"{x.value}#blocks", layout=view,
                          type=x.type, arg=x.arg)
    bound = [x, w] + list(extra)
    # the prologue's texelFetch helpers take a sampler2D: none for the layers
    helpers = {"fetch_helpers": {b.sampler for b in bound[1:]}} if blocks else {}
    return make_kernel("depthwise_direct.glsl.j2", prefix, op, nodes, bound,
                       out, g=g, xs=context["xs"], epilogue=epilogue, epilogue_vec4=True,
                       lod_fetch=knobs.depthwise_lod_fetch, x_blocks=blocks, **helpers)
