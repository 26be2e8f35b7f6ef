"""Fusion: fewer, bigger kernels.

fuse_epilogues: a matmul, conv2d or depthwise_conv2d followed by a chain of
elementwise ops on its result (bias add, activation...) becomes one fused_matmul /
fused_conv whose kernel applies the chain as an epilogue; so does a small bias
gradient (sum_like) followed by its optimizer update (fused_sum_like). The chain may pass through
reshapes (they keep row-major order: operands of the reshaped shape are read as the
head's shape), and takes in the elementwise producers of its other operands that
nothing else uses (a ReLU's gradient mask, greater(y, 0), computed in the kernel that
applies it instead of a kernel of its own).

fuse_elementwise: connected groups of elementwise ops become one fused_elementwise
(one kernel evaluating the expression DAG per element).

A node joins only when that is legal: its result is used by nothing outside the group
and is not fetched (a fused intermediate never exists in memory), and, for an epilogue,
the op keeps the matmul's shape, and the kernel reads at most max_texture_units
textures (the GPU's GL_MAX_TEXTURE_IMAGE_UNITS, passed in by the PassManager: a kernel
binding more does not link). Every candidate turned down is reported with why —
silent non-fusion is a known pain of TensorFlow's remapper."""
from __future__ import annotations

from ..ir.ops.fused import CONV_HEADS, HEADS, bias_sum_dims
from ..ir.ops.registry import ops_where
from .rewrite import consumers, rebuild
from .split_wide import DEFAULT_TEXTURE_UNITS

MAX_STEPS = 32
# A big matmul / conv runs as a blocked kernel writing up to 8 render targets and a
# stitch kernel that reads them all and applies the epilogue (codegen/matmul.py
# max_targets): an epilogue's operands are bound after those 8 textures.
HEAD_TEXTURES = 8
# the ops a fused_elementwise kernel may hold as steps (OpDef.pointwise)
STEPS = ops_where(lambda opdef: opdef.pointwise)
# A bias's gradient (sum_like over the leading axes) takes an epilogue (its optimizer
# update) where one fragment can walk its rows: at most SUM_LIKE_ROWS rows and
# SUM_LIKE_WORK elements; longer sums stay reduction trees (and the update a kernel of
# its own), which win once a fragment's walk is long (docs/PERFORMANCE.md).
SUM_LIKE_WORK = 1 << 16
SUM_LIKE_ROWS = 1024
# fused heads an epilogue grows: a model's importer makes fused_conv / fused_matmul
# (TF's _FusedConv2D and the like: bias and activation); the elementwise ops after one
# (a residual add, its activation) join its steps, so they run in its kernel (a blocked
# head's stitch) instead of a kernel of their own
FUSED_HEADS = ("fused_conv", "fused_matmul")
# views an epilogue passes through: row-major order kept, so element i of the head's
# result is element i of theirs
EPILOGUE_VIEWS = frozenset({"reshape", "reshape_like"})


def fusable(node) -> bool:
    return node.op in STEPS and len(node.outputs) == 1 and len(node.inputs) > 0


def _why_not(value, group: set, users: dict, fetched: set):
    """Why the producer of value cannot join group (None if it can)."""
    if value in fetched:
        return "its result is fetched"
    outside = [n.name for n in users.get(value, []) if n not in group]
    if outside:
        return f"its result is also used by '{outside[0]}'"
    return None


def fused_steps(members: list, external_first: list) -> tuple:
    """(steps, external inputs) for members in creation order. external_first lists
    values that must be the first operands (a matmul's result)."""
    index_of_member = {m: j for j, m in enumerate(members)}
    externals = list(external_first)
    steps = []
    for m in members:
        args = []
        for v in m.inputs:
            if v.node in index_of_member:
                args.append(("step", index_of_member[v.node]))
            else:
                if v not in externals:
                    externals.append(v)
                args.append(("in", externals.index(v)))
        attrs = tuple(sorted(m.attrs.items()))
        steps.append((m.op, attrs, tuple(args)))
    return tuple(steps), externals


def member_provenance(members):
    """(name, op, source line) of each node a fused kernel stands for (its header says them)."""
    return tuple((m.name, m.op, m.source) for m in members)


def _grow(root, users, fetched, report, accept):
    """The group of root: producers join while legal (and accept(node) says so)."""
    group = {root}
    frontier = [root]
    externals = set()
    while frontier:
        node = frontier.pop()
        for v in node.inputs:
            producer = v.node
            if producer in group:
                continue
            if not fusable(producer) or not accept(producer):
                externals.add(v)
                continue
            reason = _why_not(v, group, users, fetched)
            if reason is None and len(group) >= MAX_STEPS:
                reason = f"the group already has {MAX_STEPS} steps"
            if reason is not None:
                report.append(f"rejected {producer.op} '{producer.name}' for the group of "
                              f"'{root.name}': {reason}")
                externals.add(v)
                continue
            group.add(producer)
            frontier.append(producer)
    return group


def fuse_elementwise(graph, report, max_texture_units: int = DEFAULT_TEXTURE_UNITS):
    """Connected elementwise ops → fused_elementwise, each reading at most
    max_texture_units distinct textures."""
    users = consumers(graph)
    fetched = set(graph.outputs)
    position = {node: k for k, node in enumerate(graph.nodes)}
    assigned: set = set()
    groups: dict = {}              # root -> members in creation order
    for node in reversed(graph.nodes):
        if node in assigned or not fusable(node):
            continue
        group = _grow(node, users, fetched, report, lambda n: n not in assigned)
        members = sorted(group, key=position.__getitem__)
        _, externals = fused_steps(members, [])
        while len(externals) > max_texture_units and len(members) > 1:
            dropped = members.pop(0)         # the earliest: it stays a kernel of its own
            report.append(f"rejected {dropped.op} '{dropped.name}' for the group of "
                          f"'{node.name}': the kernel would read {len(externals)} "
                          f"textures, more than the {max_texture_units} it may bind")
            _, externals = fused_steps(members, [])
        assigned.update(members)
        if len(members) > 1:
            groups[node] = members
            report.append(f"fused {len(members)} ops into one kernel '{node.name}': "
                          + ", ".join(m.name for m in members))

    def transform(node, inputs, new, mapping):
        if node not in groups:
            return None
        members = groups[node]
        steps, externals = fused_steps(members, [])
        return new.add_node("fused_elementwise", [mapping[v] for v in externals],
                            {"steps": steps, "nodes": member_provenance(members)},
                            exact_name=node.name, scope=node.scope,
                            source=node.source).outputs

    skip = {m for root, members in groups.items() for m in members if m is not root}
    return rebuild(graph, transform, skip)


def fuse_epilogues(graph, report, max_texture_units: int = DEFAULT_TEXTURE_UNITS):
    """matmul / conv2d / depthwise_conv2d + its elementwise chain (bias, activation,
    ...) → fused_matmul / fused_conv, reading at most max_texture_units textures."""
    users = consumers(graph)
    fetched = set(graph.outputs)
    position = {node: k for k, node in enumerate(graph.nodes)}
    claimed: set = set()           # nodes some epilogue computes
    chains: dict = {}              # last node of a chain -> (head, members)
    for node in graph.nodes:
        if _takes_epilogue(node) and node not in claimed:
            members = _epilogue_chain(node, users, fetched, report, max_texture_units,
                                      claimed, position)
            if members:
                members.sort(key=position.__getitem__)
                claimed.update([node, *members])
                chains[members[-1]] = (node, members)
                report.append(f"fused {node.op} '{node.name}' with "
                              + ", ".join(f"{c.op} '{c.name}'" for c in members))

    def transform(node, inputs, new, mapping):
        if node not in chains:
            return None
        head, members = chains[node]
        steps, externals = epilogue_steps(head, members)
        shape = head.outputs[0].shape
        fused_head = head.op in FUSED_HEADS
        extra = []
        for k, v in enumerate(externals[1:]):
            value = mapping[v]
            if not _broadcasts_to(v.shape, shape):
                # an operand of a reshaped part of the chain (its shape, or one
                # element: readable() let only those in), read as the head's shape
                value = new.add_node(
                    "reshape", [value], {"shape": shape if v.type.size > 1 else ()},
                    exact_name=f"{node.name}/epilogue_operand_{k}", scope=node.scope,
                    source=node.source).outputs[0]
            extra.append(value)
        # a fused head's own operands past its two are among externals (its steps'
        # operands, in order)
        operands = [mapping[v] for v in head.inputs[:2 if fused_head else None]] + extra
        tail_shape = node.outputs[0].shape
        name = node.name if tail_shape == shape else f"{node.name}/before_reshape"
        common = dict(exact_name=name, scope=node.scope, source=node.source)
        provenance = (head.attrs["nodes"] or member_provenance([head])) + \
            member_provenance(members) if fused_head else member_provenance([head, *members])
        if head.op == "sum_like":
            fused = new.add_node("fused_sum_like", operands,
                                 {"steps": steps, "nodes": provenance}, **common)
        elif head.op == "fused_matmul":
            fused = new.add_node(
                "fused_matmul", operands,
                {"steps": steps, "transpose_a": head.attrs["transpose_a"],
                 "transpose_b": head.attrs["transpose_b"], "nodes": provenance},
                **common)
        elif head.op == "fused_conv":
            fused = new.add_node(
                "fused_conv", operands,
                {"conv_op": head.attrs["conv_op"], "conv_attrs": head.attrs["conv_attrs"],
                 "steps": steps, "nodes": provenance}, **common)
        elif head.op == "matmul":
            fused = new.add_node(
                "fused_matmul", operands,
                {"steps": steps, "transpose_a": head.attrs["transpose_a"],
                 "transpose_b": head.attrs["transpose_b"], "nodes": provenance},
                **common)
        else:
            fused = new.add_node(
                "fused_conv", operands,
                {"conv_op": head.op, "conv_attrs": tuple(sorted(head.attrs.items())),
                 "steps": steps, "nodes": provenance}, **common)
        if tail_shape == shape:
            return fused.outputs
        return (new.add_node("reshape", [fused.outputs[0]], {"shape": tail_shape},
                             exact_name=node.name, scope=node.scope,
                             source=node.source).outputs[0],)

    skip = {n for head, members in chains.values() for n in (head, *members[:-1])}
    return rebuild(graph, transform, skip)


def _takes_epilogue(node) -> bool:
    """A head: a float32 matmul / conv, or a bias's gradient small enough for one
    fragment per output texel (fused_sum_like)."""
    if node.outputs[0].dtype != "float32":
        return False
    if node.op in HEADS or node.op in CONV_HEADS:
        return True
    if node.op in FUSED_HEADS:
        # not a filter gradient's fused update (fuse_updates' business)
        return node.op == "fused_matmul" or node.attrs["conv_op"] in HEADS
    if node.op != "sum_like":
        return False
    dims = bias_sum_dims(node.inputs[0].type, node.inputs[1].type)
    return dims is not None and dims[0] <= SUM_LIKE_ROWS and \
        dims[0] * dims[1] <= SUM_LIKE_WORK


def _broadcasts_to(shape, target) -> bool:
    # an unknown dim is read as it is (readable() took it at the head's shape)
    return len(shape) <= len(target) and all(
        a == 1 or a == b or a is None for a, b in zip(reversed(shape), reversed(target)))


def epilogue_steps(head, members: list) -> tuple:
    """(steps, external operands) of an epilogue: members in creation order, reshapes
    passing their input through; the head's result is operand 0. A fused head's own
    steps come first, over its own operands (1, 2, ...), its result their last step."""
    externals = [head.outputs[0]]
    where = {head.outputs[0]: ("in", 0)}     # value -> the step argument that holds it
    steps = []
    if head.op in FUSED_HEADS and head.attrs["steps"]:
        steps = list(head.attrs["steps"])
        externals += list(head.inputs[2:])
        where = {head.outputs[0]: ("step", len(steps) - 1)}
        for k, v in enumerate(head.inputs[2:], 1):
            where.setdefault(v, ("in", k))
    for m in members:
        if m.op in EPILOGUE_VIEWS:
            where[m.outputs[0]] = where[m.inputs[0]]
            continue
        args = []
        for v in m.inputs:
            if v not in where:
                externals.append(v)
                where[v] = ("in", len(externals) - 1)
            args.append(where[v])
        where[m.outputs[0]] = ("step", len(steps))
        steps.append((m.op, tuple(sorted(m.attrs.items())), tuple(args)))
    return tuple(steps), externals


def _diamond(value, shape, users, fetched, claimed, position) -> list | None:
    """The elementwise nodes after value, in graph order, that read it twice or more
    and close on one node (GELU: x * 0.5 * (1 + erf(x / sqrt(2))) reads x twice): each
    reads value or an earlier one, keeps the shape, writes float32 and is not fetched
    (but the last); every reader of a value they compute but the last's is one of
    them. None where they do not close within MAX_STEPS nodes. Only the readers of
    the values so far are visited, earliest first."""
    pending = {value: set(users.get(value, []))}     # value -> readers not yet taken
    region: list = []
    while True:
        node = min((n for readers in pending.values() for n in readers),
                   key=position.__getitem__, default=None)
        if node is None:           # a value no later node reads: nothing to close on
            return None
        reads = [v for v in dict.fromkeys(node.inputs) if v in pending]
        out = node.outputs[0]
        if not fusable(node) or node in claimed or len(region) >= MAX_STEPS or \
                out.shape != shape or out.dtype != "float32" or \
                any(v in fetched for v in reads):
            return None
        region.append(node)
        for v in reads:
            pending[v].discard(node)
            if not pending[v]:
                del pending[v]
        pending[out] = set(users.get(out, []))
        if list(pending) == [out]:
            return region


def _epilogue_chain(head, users, fetched, report, max_texture_units, claimed,
                    position) -> list:
    """The nodes after head that can run in its kernel's epilogue: a chain of
    elementwise ops and reshapes, each the single consumer of the one before (or a
    diamond closing on one node, _diamond), not
    fetched, keeping the shape (no broadcasting of the result), plus the elementwise
    producers of the chain's other operands that only the chain uses (of the shape
    where they are used); operands after a reshape of the head's shape or one element
    (read as the head's shape); the kernel's textures (head's inputs or its blocked
    kernel's targets, then each distinct extra operand) within max_texture_units.
    Empty where no elementwise op would join."""
    value, members = head.outputs[0], []
    head_shape, head_size = head.outputs[0].shape, head.outputs[0].type.size
    # a fused head's steps count against MAX_STEPS
    max_steps = MAX_STEPS - (len(head.attrs["steps"]) if head.op in FUSED_HEADS else 0)
    head_textures = max(len(head.inputs), HEAD_TEXTURES)
    extras: set = set()            # operands the epilogue reads besides head's result
    inside = {value}               # values the kernel computes itself
    if head.op in FUSED_HEADS:     # or reads already: a fused head's own operands
        own = set(head.inputs[2:])
        head_textures = max(2, HEAD_TEXTURES) + len(own)
        inside |= own
    where = f"the epilogue of {head.op} '{head.name}'"

    def readable(v, shape) -> bool:
        """Whether an operand can be read at the elements of a step of this shape."""
        if shape == head_shape:
            return True            # broadcast as it is
        return v.type.is_static and v.type.size in (1, head_size) and \
            (v.type.size == 1 or v.shape == shape)

    def textures_with(nodes) -> set:
        computed = inside | {n.outputs[0] for n in nodes}
        return extras | {v for n in nodes for v in n.inputs if v not in computed}

    def take(node, shape) -> bool:
        """Adds node (a step at this shape) and, first, the producers of its operands
        that can join; False (nothing added) where node's operands cannot be read."""
        nonlocal extras
        if not all(readable(v, shape) for v in node.inputs if v not in inside):
            report.append(f"rejected {node.op} '{node.name}' for {where}: an operand "
                          f"cannot be read after the reshape to {list(shape)}")
            return False
        more = textures_with([node])
        if head_textures + len(more) > max_texture_units:
            report.append(f"rejected {node.op} '{node.name}' for {where}: the kernel "
                          f"would read {head_textures + len(more)} textures, more than "
                          f"the {max_texture_units} it may bind")
            return False
        members.append(node)
        inside.add(node.outputs[0])
        extras = more
        for v in node.inputs:
            _take_producer(v, node, shape)
        return True

    def _take_producer(v, consumer, shape) -> None:
        producer = v.node
        if v in inside or not fusable(producer) or producer in claimed \
                or len(members) >= max_steps:
            return
        reason = _why_not(v, {consumer}, users, fetched)
        if reason is None and v.shape != shape:
            reason = f"it has shape {v.type}, the epilogue {list(shape)}"
        if reason is None and not all(readable(u, shape) for u in producer.inputs
                                      if u not in inside):
            reason = f"an operand cannot be read after the reshape to {list(shape)}"
        if reason is None:
            more = textures_with([producer]) - {v}
            if head_textures + len(more) > max_texture_units:
                reason = "the kernel would read too many textures"
        if reason is not None:
            report.append(f"rejected producer {producer.op} '{producer.name}' for "
                          f"{where}: {reason}")
            return
        take(producer, shape)
        extras.discard(v)

    shape = head_shape
    while True:
        if value in fetched:
            if members:
                report.append(f"stopped {where} after '{value.node.name}': its result "
                              f"is fetched")
            break
        next_users = users.get(value, [])
        if len(next_users) > 1:
            region = _diamond(value, shape, users, fetched, claimed, position)
            before = (list(members), set(inside), set(extras))
            if region and all(take(n, shape) for n in region):
                report.append(f"took {len(region)} ops reading '{value.node.name}' "
                              f"into {where}")
                value = region[-1].outputs[0]
                continue
            members[:], inside, extras = before[0], before[1], before[2]
            report.append(f"stopped {where} after '{value.node.name}': its result has "
                          f"{len(next_users)} consumers")
            break
        if not next_users or next_users[0] in claimed:
            break
        consumer = next_users[0]
        if consumer.op in EPILOGUE_VIEWS and consumer.inputs[0] is value and \
                consumer.outputs[0].type.is_static and head.outputs[0].type.is_static:
            members.append(consumer)
            inside.add(consumer.outputs[0])
            value, shape = consumer.outputs[0], consumer.outputs[0].shape
            continue
        if not fusable(consumer):
            break
        if consumer.outputs[0].shape != shape:
            report.append(f"rejected {consumer.op} '{consumer.name}' for {where}: it "
                          f"broadcasts the result to {consumer.outputs[0].type}")
            break
        if consumer.outputs[0].dtype != "float32":      # the kernels write float32
            report.append(f"rejected {consumer.op} '{consumer.name}' for {where}: its "
                          f"result is {consumer.outputs[0].dtype}")
            break
        if len(members) >= max_steps or not take(consumer, shape):
            break
        value = consumer.outputs[0]
    while members and members[-1].op in EPILOGUE_VIEWS:     # nothing computed after them
        inside.discard(members.pop().outputs[0])
    if not any(m.op not in EPILOGUE_VIEWS for m in members):
        return []
    return members
