"""Fusion: fewer, bigger kernels.

fuse_epilogues: a matmul, conv2d or depthwise_conv2d followed by a chain of
elementwise ops on its result (bias add, activation...) becomes one fused_matmul /
fused_conv whose kernel applies the chain as an epilogue.

fuse_elementwise: connected groups of elementwise ops become one fused_elementwise
(one kernel evaluating the expression DAG per element).

A node joins only when that is legal: its result is used by nothing outside the group
and is not fetched (a fused intermediate never exists in memory), and, for an epilogue,
the op keeps the matmul's shape, and the kernel reads at most max_texture_units
textures (the GPU's GL_MAX_TEXTURE_IMAGE_UNITS, passed in by the PassManager: a kernel
binding more does not link). Every candidate turned down is reported with why —
silent non-fusion is a known pain of TensorFlow's remapper."""
from __future__ import annotations

from ..ir.ops.fused import HEADS
from ..ir.ops.registry import get_op
from .rewrite import consumers, rebuild
from .split_wide import DEFAULT_TEXTURE_UNITS

MAX_STEPS = 32
# A big matmul / conv runs as a blocked kernel writing up to 8 render targets and a
# stitch kernel that reads them all and applies the epilogue (codegen/matmul.py,
# MAX_TARGETS): an epilogue's operands are bound after those 8 textures.
HEAD_TEXTURES = 8
NOT_STEPS = {"fill", "range", "linspace", "assign"}    # no operands / writes state


def fusable(node) -> bool:
    return get_op(node.op).family == "elementwise" and node.op not in NOT_STEPS \
        and len(node.outputs) == 1 and len(node.inputs) > 0


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
    chains: dict = {}              # last node of a chain -> (head, chain)
    for node in graph.nodes:
        if node.op in HEADS and node.outputs[0].dtype == "float32":
            chain = _epilogue_chain(node, users, fetched, report, max_texture_units)
            if chain:
                chains[chain[-1]] = (node, chain)
                report.append(f"fused {node.op} '{node.name}' with "
                              + ", ".join(f"{c.op} '{c.name}'" for c in chain))

    def transform(node, inputs, new, mapping):
        if node not in chains:
            return None
        head, chain = chains[node]
        steps, externals = fused_steps(chain, [head.outputs[0]])
        operands = [mapping[v] for v in (*head.inputs, *externals[1:])]
        common = dict(exact_name=node.name, scope=node.scope, source=node.source)
        provenance = member_provenance([head, *chain])
        if head.op == "matmul":
            return new.add_node(
                "fused_matmul", operands,
                {"steps": steps, "transpose_a": head.attrs["transpose_a"],
                 "transpose_b": head.attrs["transpose_b"], "nodes": provenance},
                **common).outputs
        return new.add_node(
            "fused_conv", operands,
            {"conv_op": head.op, "conv_attrs": tuple(sorted(head.attrs.items())),
             "steps": steps, "nodes": provenance}, **common).outputs

    skip = {n for head, chain in chains.values() for n in (head, *chain[:-1])}
    return rebuild(graph, transform, skip)


def _epilogue_chain(head, users, fetched, report, max_texture_units) -> list:
    """The elementwise ops after head that can run in its kernel's epilogue: each the
    single consumer of the one before, not fetched, keeping head's shape, and the
    kernel's textures (head's inputs or its blocked kernel's targets, then each
    distinct extra operand of the chain) within max_texture_units."""
    value, chain = head.outputs[0], []
    head_textures = max(len(head.inputs), HEAD_TEXTURES)
    extras: set = set()            # operands the chain reads besides head's result
    inside = {value}               # values the kernel computes itself
    where = f"the epilogue of {head.op} '{head.name}'"
    while True:
        if value in fetched:
            if chain:
                report.append(f"stopped {where} after '{value.node.name}': its result is "
                              f"fetched")
            break
        next_users = users.get(value, [])
        if len(next_users) > 1:
            report.append(f"stopped {where} after '{value.node.name}': its result has "
                          f"{len(next_users)} consumers")
            break
        if not next_users or not fusable(next_users[0]):
            break
        consumer = next_users[0]
        if consumer.outputs[0].shape != head.outputs[0].shape:
            report.append(f"rejected {consumer.op} '{consumer.name}' for {where}: it "
                          f"broadcasts the result to {consumer.outputs[0].type}")
            break
        more = extras | {v for v in consumer.inputs if v not in inside}
        if head_textures + len(more) > max_texture_units:
            report.append(f"rejected {consumer.op} '{consumer.name}' for {where}: the "
                          f"kernel would read {head_textures + len(more)} textures, "
                          f"more than the {max_texture_units} it may bind")
            break
        extras = more
        chain.append(consumer)
        value = consumer.outputs[0]
        inside.add(value)
    return chain
