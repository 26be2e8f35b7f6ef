"""What codegen hands the runtime: a Kernel (GLSL source and how to bind it) and a
LoweredGraph (the whole compiled graph as a flat list of steps).

A kernel's header comment (what it computes, for whom, from which textures) is rendered
from its record, once, by templates/kernel_header.glsl.j2: `kernel.source`,
`fn.dump_shaders` and `fragflow shaders` all show that one header, and a record changed
with dataclasses.replace (a stitch kernel's extra input, a blocked kernel's layers)
gets its header rendered afresh.

A node lowered to several kernels (a blocked matmul or conv and its stitch, packing
kernels, a tree of reduction passes) gives each of them the same nodes; the record
tells them apart by what they write (`Kernel.part`): a value between the node's kernels
('<value>#blocks', '<value>#panel_b', '<node>:r0'), or the node's value itself. The
header says which kernel computes which node from that (`Kernel.computes`)."""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from .environment import environment
from .layout import Layout

_COMMENT = re.compile(r"//[^\n]*")
HEADER_END = "// -- end of header --"     # templates end the (empty) header with it
USER_CODE_MARK = "// -- user code --"     # the line before a gpgpu_program's GLSL


@dataclass(frozen=True)
class Binding:
    """One texture a kernel reads (or the one it writes)."""
    sampler: str          # GLSL name of the sampler uniform (or of the output)
    value: str            # IR value it holds
    layout: Layout

    @property
    def shape(self):
        return self.layout.shape

    @property
    def dtype(self):
        return self.layout.dtype


@dataclass(frozen=True)
class NodeRecord:
    """One graph node a kernel computes, as its header and the profiler name it."""
    name: str
    op: str               # the IR op ("matmul", "gpgpu_program")
    scope: str            # its name scope, "" for the root
    source: str = ""      # the user's file:line, "" when unknown
    user_op: str = ""     # what the user wrote: the op, or a gpgpu_program's name

    def __post_init__(self):
        if not self.user_op:
            object.__setattr__(self, "user_op", self.op)


def records_of(nodes) -> tuple:
    """One NodeRecord per node a kernel computes (graph nodes, or stand-ins with name,
    op, scope and source): a fused node gives the nodes the fusion folded into it."""
    out = []
    for n in nodes:
        attrs = getattr(n, "attrs", None) or {}
        if n.op.startswith("fused") and attrs.get("nodes"):
            # a fused node: the nodes the fusion folded into it
            out.extend(NodeRecord(member, op, member.rpartition("/")[0], source or "")
                       for member, op, source in attrs["nodes"])
            continue
        program = attrs.get("name") if n.op == "gpgpu_program" else None
        out.append(NodeRecord(n.name, n.op, n.scope or "", n.source or "",
                              program or n.op))
    return tuple(out)


def node_value(value: str) -> str:
    """The graph value a value between the kernels of one node belongs to:
    'y#blocks', 'y#panel_b' -> 'y'; 'sum:r0' -> 'sum'; a graph value ('y', 'top:1') is
    itself.

    >>> node_value("d/relu#blocks"), node_value("sum:r1"), node_value("top_k:1")
    ('d/relu', 'sum', 'top_k:1')
    """
    base = value.split("#", 1)[0]
    head, sep, tail = base.rpartition(":")
    return head if sep and not tail.isdigit() else base


# Kernel.part: its place among the kernels one node is lowered to
PARTS = {
    "": "the node's one kernel",
    "targets": "writes render targets that its stitch reads",
    "stitch": "reads a blocked kernel's render targets and writes the node's value",
    "blocks": "writes render targets that its readers read in place (no stitch)",
    "pass": "writes a value a later kernel of the node reads",
    "last": "finishes the node from values earlier kernels of it wrote",
}


@dataclass(frozen=True)
class Kernel:
    name: str             # unique in its lowered graph, e.g. "k2_dense_matmul"
    op: str               # the op it runs ("matmul"), or "fused(...)" later
    nodes: tuple          # names of the IR nodes it implements
    scope: str            # the name scope of its (first) node
    location: str         # the user's file:line of its (first) node
    source: str           # full GLSL fragment shader (header rendered from this record)
    inputs: tuple         # (Binding, ...) in texture-unit order
    output: Binding
    uniforms: dict = field(default_factory=dict)   # name -> (glsl type, value)
    # user-written GLSL inside the source: (program name, first source line, its text)
    user_code: tuple | None = None
    # more render targets (layout locations 1, 2, ..) written by the same draw: blocked
    # kernels spread a fragment's block of results over several textures
    extra_outputs: tuple = ()
    # > 0: the output is a 2D array texture of that many layers, layer j written by
    # render target j (a blocked kernel's blocks; its stitch reads them as one sampler)
    output_layers: int = 0
    # the graph nodes it computes (every node a fusion folded in), in order; empty: the
    # header names `nodes` with the kernel's op, scope and location
    implements: tuple = ()
    # the template in codegen/templates/ that rendered the source ("": a hand-made
    # record), and the lowering's decisions it was rendered with (block sizes, vec4
    # paths, reduction passes, epilogue steps: codegen/common.py decisions), printable
    template: str = ""
    params: dict = field(default_factory=dict)
    # the strategy of its family's table that chose it ("conv.direct"; codegen/strategy.py)
    strategy: str = ""

    def __post_init__(self):
        if HEADER_END in self.source:
            object.__setattr__(self, "source", _with_header(self))

    def with_strategy(self, name: str) -> Kernel:
        """This record naming the strategy that chose it. The header does not show the
        strategy, so the source is kept as it is (dataclasses.replace would render the
        header again)."""
        out = copy.copy(self)
        object.__setattr__(out, "strategy", name)
        return out

    @property
    def node_records(self) -> tuple:
        """NodeRecord per node the kernel computes."""
        if self.implements:
            return tuple(self.implements)
        return tuple(NodeRecord(name, self.op, self.scope if len(self.nodes) == 1 else
                                name.rpartition("/")[0], self.location or "")
                     for name in self.nodes or (self.name,))

    @property
    def part(self) -> str:
        """Its place among the kernels its node is lowered to, from what it reads and
        writes (a key of PARTS): "" where it is the only one."""
        out = self.output.value
        base = node_value(out)
        if out != base:
            if out.endswith("#blocks") and self.output_layers:
                return "blocks" if getattr(self.output.layout, "blocking", None) \
                    is not None else "targets"
            return "pass"
        parts = [b.value for b in self.inputs
                 if b.value != base and node_value(b.value) == base]
        if any(v.endswith("#blocks") for v in parts):
            return "stitch"
        return "last" if parts else ""

    @property
    def computes(self) -> tuple:
        """The NodeRecords whose results this kernel writes: all of them for a node's
        one kernel, a stitch-free blocked kernel and a tree's last pass; for a blocked
        kernel and its stitch, the head (the product) is the blocked kernel's when an
        epilogue follows it, which the stitch applies (or, on pending targets, the
        kernels reading them: codegen/matmul.py plan_blocks); passes before the last compute
        none (their values are partial)."""
        records, part = self.node_records, self.part
        if part == "targets" or part == "blocks" and \
                getattr(self.output.layout, "pending", False):   # its readers finish it
            return records[:1] if len(records) > 1 else ()
        if part == "stitch":
            return records[1:] or records
        return () if part == "pass" else records

    @property
    def outputs(self) -> tuple:
        """Every texture the kernel writes, the primary output first."""
        return (self.output,) + tuple(self.extra_outputs)

    @property
    def body(self) -> str:
        """The source without its header: the version line, then everything after
        HEADER_END. Templates name no node or value outside the header (a sampler's
        comment gives its type, a step's its op), so kernels that differ only in their
        operands (the same layer repeated) have byte-identical bodies: one program in a
        WebGL export (docs/WEBGL.md)."""
        first, _, rest = self.source.partition("\n")
        if HEADER_END not in rest:
            return self.source
        body = rest.split(HEADER_END, 1)[1].removeprefix("\n")
        return f"{first}\n{body}"

    @property
    def body_offset(self) -> int:
        """How many lines of the source the body leaves out (the header's): line n of
        the body is line n + body_offset of the source (after the version line)."""
        return self.source.count("\n") - self.body.count("\n")

    @property
    def compiled_source(self) -> str:
        """The body with its // comments emptied (lines kept): what is compiled, and the
        shader cache's key, so that identical kernels of differently named nodes, and
        headers of different lengths, share one linked shader — in this process and,
        through Mesa's disk cache, in the next. Compiler messages count lines in it."""
        return _COMMENT.sub("", self.body)

    @property
    def compiled_user_code(self):
        """user_code with its first line counted in compiled_source (None without)."""
        if self.user_code is None:
            return None
        program, first, text = self.user_code
        return program, first - self.body_offset, text

    def __repr__(self):
        return (f"Kernel({self.name!r}, op={self.op!r}, scope={self.scope!r}, "
                f"inputs={[b.value for b in self.inputs]}, output={self.output.value!r})")


def _type(layout) -> str:
    short = {"float32": "f32", "int32": "i32", "bool": "bool"}.get(layout.dtype,
                                                                   layout.dtype)
    return f"{short}[{','.join(str(d) for d in layout.shape)}]"


def _texels(layout, layers: int = 0) -> str:
    fmt = "RGBA32I" if layout.dtype != "float32" else "RGBA32F"
    text = f"{layout.width}x{layout.height} {fmt} texels"
    return text + (f", {layers} layers of one array texture" if layers else "")


def _shown(value) -> str:
    """A decision as the header prints it: rows=4, epilogue=(add relu)."""
    if isinstance(value, dict):
        return "(" + " ".join(f"{k}={_shown(v)}" for k, v in value.items()) + ")"
    if isinstance(value, tuple):
        return "(" + " ".join(_shown(v) for v in value) + ")"
    return str(value)


def _header_context(kernel, user_line: int) -> dict:
    """What templates/kernel_header.glsl.j2 writes; text, raw (the template passes
    everything through the `comment` filter)."""
    nodes = kernel.node_records
    ops = [n.op if n.op == n.user_op else f"{n.op} '{n.user_op}'" for n in nodes]
    lhs = [f"{n.name} = {op}" for n, op in zip(nodes, ops)]
    width = max(map(len, lhs))
    computed = kernel.computes
    marked = kernel.part in ("targets", "stitch") and len(nodes) > 1
    bind = [{"sampler": b.sampler, "value": b.value, "type": _type(b.layout),
             "texels": _texels(b.layout)} for b in kernel.inputs]
    outs = [{"sampler": b.sampler, "value": b.value, "type": _type(b.layout),
             "texels": _texels(b.layout, kernel.output_layers if i == 0 else 0)}
            for i, b in enumerate(kernel.outputs)]
    return {"kernel": kernel, "user_line": user_line, "inputs": bind, "outputs": outs,
            "nodes": [{"lhs": text.ljust(width), "scope": n.scope or "(root)",
                       "source": n.source, "here": marked and n in computed}
                      for n, text in zip(nodes, lhs)],
            "fused": len(nodes) > 1, "part": kernel.part, "roles": _roles(kernel),
            "params": ", ".join(f"{key}={_shown(value)}"
                                for key, value in kernel.params.items()),
            "uniforms": [(name, glsl_type, repr(value))
                         for name, (glsl_type, value) in kernel.uniforms.items()]}


def _named(records) -> str:
    """"matmul 'd/matmul'", "add 'd/add' and relu 'd/relu'"."""
    names = [f"{n.user_op} '{n.name}'" for n in records]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _roles(kernel) -> list:
    """The header's lines on which kernel of a node's lowering computes which node
    (Kernel.part, Kernel.computes); none for a node's one kernel."""
    part, records = kernel.part, kernel.node_records
    out = kernel.output.value
    value = node_value(out)
    if part == "targets":
        head = records[0]
        lines = [f"computes {'the product of ' if head.op == 'matmul' else ''}"
                 f"{_named(records[:1])} into {kernel.output_layers} render targets "
                 f"(the layers of '{out}'), not its value;"]
        rest = records[1:]
        if rest:
            lines.append(f"its stitch, the kernel that reads '{out}' and writes "
                         f"'{value}', computes {_named(rest)}")
        else:
            lines.append(f"its stitch, the kernel that reads '{out}', gathers them into "
                         f"'{value}'")
        return lines
    if part == "stitch":
        blocks = next(b.value for b in kernel.inputs if b.value.endswith("#blocks")
                      and node_value(b.value) == value)
        head = records[0]
        rest = records[1:]
        lines = [f"the stitch of {_named([head])}: gathers its result from the render "
                 f"targets in '{blocks}' (written by the blocked kernel before it)"]
        lines.append(f"computes {_named(rest)} and writes '{value}'" if rest else
                     f"and writes it into '{value}'")
        return lines
    if part == "blocks" and getattr(kernel.output.layout, "pending", False):
        rest = records[1:]
        return [f"computes the product of {_named(records[:1])} into "
                f"{kernel.output_layers} render targets (the layers of '{out}'), which "
                f"the kernels reading it read in place"
                + (f", applying {_named(rest)}:" if rest else ":"),
                f"no stitch, '{value}' itself is never written "
                f"(codegen/matmul.py plan_blocks)"]
    if part == "blocks":
        return [f"computes {_named(records)} into {kernel.output_layers} render targets "
                f"(the layers of '{out}'),",
                f"which the kernels reading it read in place: no stitch, '{value}' itself "
                f"is never written"]
    number, count = kernel.params.get("pass_number"), kernel.params.get("pass_count")
    step = f" (pass {number} of {count})" if number and count else ""
    if part == "pass":
        return [f"one step of {_named(records)}{step}: writes '{out}', which a later "
                f"kernel of the same node reads;",
                f"the kernel that writes '{value}' finishes it"]
    if part == "last":
        parts = [b.value for b in kernel.inputs
                 if b.value != value and node_value(b.value) == value]
        read = " and ".join(f"'{v}'" for v in parts)
        return [f"finishes {_named(records)}{step} from {read} (written by earlier "
                f"kernels of the same node) and writes '{value}'"]
    return []


def _with_header(kernel) -> str:
    """kernel.source with the header rendered from the record before HEADER_END (a
    header already there is replaced: the record may have changed)."""
    first, _, rest = kernel.source.partition("\n")          # "#version 330 core"
    body = rest.split(HEADER_END, 1)[1].removeprefix("\n")
    template = environment().get_template("kernel_header.glsl.j2")
    header = template.render(**_header_context(kernel, 0))
    if kernel.user_code:             # the user's first line, counted in this very text
        mark = next((i for i, line in enumerate(body.splitlines())
                     if line.strip() == USER_CODE_MARK), None)
        if mark is not None:
            line = 1 + header.count("\n") + 1 + mark + 2
            header = template.render(**_header_context(kernel, line))
            program, _, text = kernel.user_code
            object.__setattr__(kernel, "user_code", (program, line, text))
    return f"{first}\n{header}{HEADER_END}\n{body}"


@dataclass
class LoweredGraph:
    """A compiled graph lowered to kernels: where every value comes from, in run order.

    steps: ("kernel", Kernel) or ("alias", out_value, in_value) — an alias is a view
    of the same texture (reshape, squeeze, identity...)."""
    layouts: dict                 # value name -> Layout
    feeds: list                   # value names, in feed order
    constants: dict               # value name -> numpy array
    variables: dict               # value name -> variable name
    steps: list
    assigns: list                 # (variable name, value name), applied when a run ends
    outputs: list                 # value names, in fetch order
    # fetched value -> the value of the render targets it stays in (an array texture
    # whose layout, a BlocksLayout, says which layer and texel hold each of its texels:
    # a norm.rows LayerNorm's, codegen/norm.py plan_blocks): readbacks put them in order
    fetched_blocks: dict = field(default_factory=dict)

    @property
    def kernels(self) -> list:
        return [step[1] for step in self.steps if step[0] == "kernel"]
