"""Lowering fused ops: fused_elementwise renders templates/elementwise.glsl.j2 with
several steps; fused_matmul renders templates/matmul.glsl.j2 with an epilogue
(templates/epilogue.glsl.j2); fused_conv the conv kernels with one; fused_sum_like
templates/fused_sum_like.glsl.j2."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..ir.errors import FragflowError
from ..ir.ops.fused import bias_sum_dims, eval_steps, infer_step
from ..ir.types import TensorType, promote
from . import elementwise, norm, schedule
from .common import kernel_name, make_kernel, output_operand
from .depthwise import BlocksOperand
from .kernel import records_of
from .layout import broadcast_index
from .matmul import matmul_kernel
from .operands import GLSL_SCALAR, Operand


@dataclass(frozen=True)
class ConvHead:
    """The convolution a fused_conv node starts with, read by conv.lower_node as it reads
    a node: the head's op and attrs over the first two inputs, under the fused node's
    name, scope and source line."""
    op: str
    attrs: Mapping
    inputs: tuple
    outputs: tuple
    fused: object                   # the fused_conv node

    @classmethod
    def of(cls, node) -> ConvHead:
        return cls(node.attrs["conv_op"], dict(node.attrs["conv_attrs"]),
                   tuple(node.inputs[:2]), tuple(node.outputs), node)

    @property
    def name(self) -> str:
        return self.fused.name

    @property
    def scope(self) -> str:
        return self.fused.scope

    @property
    def source(self) -> str:
        return self.fused.source

    def where(self) -> str:
        return self.fused.where()


def _operand(sampler, arg, value_name, layout, dtype):
    return Operand(sampler=sampler, value=value_name, layout=layout,
                   type=str(TensorType(layout.shape, dtype)), arg=arg)


def glsl_steps(steps, operand_exprs: list, operand_types: list) -> tuple:
    """(template steps, result variable) for fused steps over operands given as GLSL
    expressions with their TensorTypes."""
    out, types = [], []

    def run(op, attrs, args):
        index = len(out)
        arg_types = [t for _, t in args]
        result_type = infer_step(op, attrs, arg_types)
        step = elementwise.StepOp(op, attrs, tuple(t.dtype for t in arg_types),
                                  result_type.dtype, f"step {index}: {op}")
        out.append(elementwise.step_for(step, f"r{index}",
                                        [(expr, GLSL_SCALAR[t.dtype]) for expr, t in args]))
        types.append(result_type)
        return (f"r{index}", result_type)

    eval_steps(steps, list(zip(operand_exprs, operand_types)), run)
    return out, out[-1]["var"]


def _header_nodes(node):
    """The nodes a kernel header lists: those the fusion folded in, else the node."""
    names = node.attrs.get("nodes") or ()
    if not names:
        return [node]
    return list(records_of([node]))


def lower_fused_elementwise(node, layouts, prefix):
    out = output_operand(node.outputs[0], layouts)
    inputs = [_operand(f"x{k}", f"a{k}", v.name, layouts[v.name], v.dtype)
              for k, v in enumerate(node.inputs)]
    steps, result = glsl_steps(node.attrs["steps"], [b.arg for b in inputs],
                               [v.type for v in node.inputs])
    nodes = _header_nodes(node)
    kernel = elementwise._kernel(nodes, steps, result, inputs, out, prefix,
                                 constants=elementwise.scalar_constants(node.inputs))
    # named, as fusion_report names it, after the fused node (its last member)
    return replace(kernel, name=kernel_name(prefix, node))


def epilogue_operands(node, out, layouts, first: int = 2) -> tuple:
    """([operand], [TensorType]) of a fused matmul's or conv's epilogue operands (its
    inputs after the first two), samplers x<first>, .. (args e0, e1, ..), each with its
    broadcast index and lanes mode (lanes_mode); one the node reads zero-padded at the
    end of its last axis (`pad_last`, passes/pad_folding.py fold_channel_pads) has
    `pad_last` (its channels, the output's) and lanes "padded4" (whole texels of both)
    or "padded" (templates/epilogue.glsl.j2 takes 0 past its channels), and the padded
    type. Read from a producer's render targets where planned (_from_blocks)."""
    pads = dict(node.attrs.get("pad_last", ()))
    extra, types = [], []
    for k, v in enumerate(node.inputs[2:]):
        e = _operand(f"x{k + first}", f"e{k}", v.name, layouts[v.name], v.dtype)
        amount = pads.get(k + 2)
        if amount is None:
            e.index, e.pad_last = broadcast_index(out.layout.shape, e.layout.shape), None
            e.lanes = lanes_mode(e)
            extra.append(_from_blocks(node, v, e))
            types.append(v.type)
            continue
        c_in = v.type.shape[-1]
        e.index = broadcast_index(out.layout.shape, out.layout.shape)
        e.pad_last = (c_in, c_in + amount)
        e.lanes = "padded4" if c_in % 4 == 0 and amount % 4 == 0 else "padded"
        extra.append(e)
        types.append(TensorType(v.type.shape[:-1] + (c_in + amount,), v.dtype))
    return extra, types


def matmul_epilogue(node, layouts, first: int = 2) -> tuple:
    """(extra operands, epilogue) of fused_matmul `node`: its operands after A and B,
    samplers x<first>, x<first + 1>, .. (args e0, e1, ..), and the template context
    epilogue.glsl.j2 applies to its product (here, or in a kernel reading its render
    targets: codegen/norm.py). A residual operand a LayerNorm left in its render
    targets (codegen/norm.py plan_blocks, reads_residual) is read there."""
    out = output_operand(node.outputs[0], layouts)
    extra, types = epilogue_operands(node, out, layouts, first)
    acc_type = TensorType(out.layout.shape, _infer_acc_dtype(node))
    steps, result = glsl_steps(node.attrs["steps"], ["acc"] + [e.arg for e in extra],
                               [acc_type] + types)
    return extra, {"operands": extra, "steps": steps, "result": result}


def lower_fused_matmul(node, layouts, prefix):
    out = output_operand(node.outputs[0], layouts)
    a_val, b_val = node.inputs[:2]
    a = _operand("x0", "a0", a_val.name, layouts[a_val.name], a_val.dtype)
    b = _operand("x1", "a1", b_val.name, layouts[b_val.name], b_val.dtype)
    extra, epilogue = matmul_epilogue(node, layouts)
    return matmul_kernel(node, a, b, out, prefix, extra=extra, epilogue=epilogue,
                         op="fused_matmul", nodes=_header_nodes(node), layouts=layouts)


def lower_fused_conv(node, layouts, prefix):
    from . import conv  # cycle: conv imports this module's ConvHead at its top
    out = output_operand(node.outputs[0], layouts)
    head = ConvHead.of(node)
    extra, types = epilogue_operands(node, out, layouts)
    acc_type = TensorType(out.layout.shape, "float32")
    steps, result = glsl_steps(node.attrs["steps"], ["acc"] + [e.arg for e in extra],
                               [acc_type] + types)
    epilogue = {"operands": extra, "steps": steps, "result": result}
    return conv.lower_node(head, layouts, prefix, extra=extra, epilogue=epilogue,
                           kernel_op=f"fused_{node.attrs['conv_op']}",
                           nodes=_header_nodes(node))


def _from_blocks(node, value, operand):
    """An epilogue operand as it is, or read from the render targets its producer left
    it in (codegen/conv.py plan_blocks, reads_epilogue_blocks): lanes "blocks"."""
    view = schedule.active().blocks.get(value.name)
    if view is None:
        return operand
    if view.mapping != "matmul" or value.shape != node.outputs[0].shape:
        raise FragflowError(f"{node.where()}: planned to read {value.name} from its "
                            f"producer's render targets, which its epilogue cannot")
    blocks = BlocksOperand(sampler=operand.sampler, value=f"{value.name}#blocks",
                           layout=view, type=operand.type, arg=operand.arg)
    blocks.index, blocks.lanes = operand.index, "blocks"
    return blocks


def lower_fused_sum_like(node, layouts, prefix):
    """A bias's gradient and its epilogue: one fragment per output texel walks g's rows
    (passes/fusion.py fuses only sums small enough for that, SUM_LIKE_WORK)."""
    out = output_operand(node.outputs[0], layouts)
    g_val, x_val, *extra_vals = node.inputs      # x gives the shape only
    rows, columns = bias_sum_dims(g_val.type, x_val.type)
    g = _operand("x0", "a0", g_val.name, layouts[g_val.name], g_val.dtype)
    extra = [_operand(f"x{k + 1}", f"e{k}", v.name, layouts[v.name], v.dtype)
             for k, v in enumerate(extra_vals)]
    for e in extra:
        e.index = broadcast_index(out.layout.shape, e.layout.shape)
    acc_type = TensorType(out.layout.shape, "float32")
    steps, result = glsl_steps(node.attrs["steps"], ["acc"] + [e.arg for e in extra],
                               [acc_type] + [v.type for v in extra_vals])
    epilogue = {"operands": extra, "steps": steps, "result": result}
    return make_kernel("fused_sum_like.glsl.j2", prefix, "fused_sum_like",
                       _header_nodes(node), [g, *extra], out, epilogue=epilogue,
                       rows=rows, columns=columns)


def lanes_mode(operand) -> str:
    """How the four lanes e..e+3 (e % 4 == 0) of an output texel read an epilogue
    operand through its broadcast index: "texel" when they read one aligned texel of it
    in order (a bias along a last axis of 4k elements), "same" when all read one
    element (a scalar, or a bias along an outer axis), else "lanes" (one fetch each)."""
    if operand.dtype == "bool":
        return "lanes"             # stored as int: read per lane, converted per lane
    index = operand.index
    inner = [(s, d, t) for s, d, t in index.terms if s < 4]
    outer = [(s, d, t) for s, d, t in index.terms if s >= 4]
    if any(s % 4 for s, _, _ in outer):
        return "lanes"
    if not inner:
        return "same"
    if len(inner) != 1:
        return "lanes"
    (s, d, t), = inner
    aligned = index.offset % 4 == 0 and all(t_ % 4 == 0 for _, _, t_ in outer)
    return "texel" if (s, t) == (1, 1) and d % 4 == 0 and aligned else "lanes"


def _infer_acc_dtype(node) -> str:
    return promote(node.inputs[0].dtype, node.inputs[1].dtype)


def lower_node(node, layouts, prefix):
    if node.op == "fused_attention":
        from . import attention  # its own strategy table (codegen/attention.py)
        return attention.lower_node(node, layouts, prefix)
    if node.op == "fused_layer_norm":
        return norm.lower_node(node, layouts, prefix)
    if node.op == "fused_matmul":
        return lower_fused_matmul(node, layouts, prefix)
    if node.op == "fused_conv":
        return lower_fused_conv(node, layouts, prefix)
    if node.op == "fused_sum_like":
        return lower_fused_sum_like(node, layouts, prefix)
    return lower_fused_elementwise(node, layouts, prefix)


__all__ = ["glsl_steps", "lower_node"]
