"""fuse_updates: the elementwise updates of several variables that read each other's
new values become one fused_update node (ir/ops/update.py), one kernel writing one
render target per variable.

An optimizer's step assigns a variable and its slots values computed from each other
(Adam's new variable reads the new m and v); plain elementwise fusion cannot put them
in one kernel (the new m has two consumers), so Adam ran three kernels per variable.
- a group is the assigns whose new values (float32, elementwise, of one type) are
  computed from one another's, plus the one-element updates of one type (Adam's
  beta powers);
- its kernel computes every elementwise op the new values need that nothing outside
  the group reads; one-element results read elsewhere too (a learning-rate schedule,
  Adam's bias correction) are computed again in each kernel;
- a group whose kernel would read more textures than a kernel binds, or that could not
  be placed where its members were, stays as it was, and the report says why.

It runs after fuse_epilogues (an SGD update folded into its gradient's matmul stays
there) and before fuse_elementwise, which fuses what is left.
"""
from __future__ import annotations

from .fusion import MAX_STEPS, fusable, fused_steps, member_provenance
from .rewrite import consumers, rebuild
from .split_wide import DEFAULT_DRAW_BUFFERS, DEFAULT_TEXTURE_UNITS

# A result of at most this many elements that something outside a group reads is
# computed again inside the group's kernel (cheaper than a kernel of its own).
RECOMPUTED_UP_TO = 16


def _cone(root) -> set:
    """The elementwise nodes root's value is computed through (root included)."""
    cone, stack = set(), [root]
    while stack:
        node = stack.pop()
        if node in cone:
            continue
        cone.add(node)
        stack.extend(v.node for v in node.inputs if fusable(v.node))
    return cone


def _small(node) -> bool:
    return node.outputs[0].type.is_static and node.outputs[0].type.size <= RECOMPUTED_UP_TO


def _groups(roots: list) -> list:
    """Roots (the producers of assigned values) in groups: connected when one is in the
    other's cone, or both are one-element updates; each group of one type."""
    parent = {r: r for r in roots}

    def find(r):
        while parent[r] is not r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r
    cones = {r: _cone(r) for r in roots}
    for a in roots:
        for b in roots:
            if a is b or a.outputs[0].type != b.outputs[0].type:
                continue
            if b in cones[a] or (a.outputs[0].type.size == 1 and
                                 b.outputs[0].type.size == 1):
                parent[find(a)] = find(b)
    groups: dict = {}
    for r in roots:
        groups.setdefault(find(r), []).append(r)
    return [members for members in groups.values() if len(members) > 1]


def _members(group: list, users: dict, fetched: set, inside_users: set) -> set:
    """The elementwise nodes the group's kernel computes: the roots, and every node of
    their cones whose result only the kernel (or its assigns) reads, or that is small
    enough to compute again."""
    members = set().union(*(_cone(r) for r in group))
    roots = set(group)
    while True:
        allowed = members | inside_users
        dropped = {n for n in members - roots
                   if not _small(n) and (n.outputs[0] in fetched or
                                         any(u not in allowed
                                             for u in users.get(n.outputs[0], [])))}
        # what is left must still be reachable from the roots through members
        kept = members - dropped
        reachable, stack = set(), list(roots)
        while stack:
            node = stack.pop()
            if node in reachable:
                continue
            reachable.add(node)
            stack.extend(v.node for v in node.inputs if v.node in kept)
        if reachable == members:
            return members
        members = reachable


def fuse_updates(graph, report, max_texture_units: int = DEFAULT_TEXTURE_UNITS,
                 max_draw_buffers: int = DEFAULT_DRAW_BUFFERS):
    """Groups of assigned elementwise updates → one fused_update each (see the module
    docstring)."""
    users = consumers(graph)
    fetched = set(graph.outputs)
    position = {node: k for k, node in enumerate(graph.nodes)}
    assign_of: dict = {}
    for node in graph.nodes:
        if node.op != "assign":
            continue
        producer = node.inputs[1].node
        if fusable(producer) and node.inputs[1].dtype == "float32" and \
                node.inputs[1].type.is_static and node.inputs[1].type.size > 0 and \
                producer not in assign_of:
            assign_of[producer] = node
    plans = []                     # (members in creation order, roots in creation order)
    taken: set = set()
    for group in _groups(sorted(assign_of, key=position.__getitem__)):
        roots = sorted(group, key=position.__getitem__)
        names = ", ".join(f"'{assign_of[r].inputs[0].node.name}'" for r in roots)
        members = _members(roots, users, fetched, {assign_of[r] for r in roots})
        ordered = sorted(members, key=position.__getitem__)
        steps, externals = fused_steps(ordered, [])
        last = position[ordered[-1]]
        own_assigns = {assign_of[r] for r in roots}
        early = [u.name for r in roots for u in users.get(r.outputs[0], [])
                 if u not in members and u not in own_assigns and position[u] < last]
        inside = members | own_assigns
        recomputed = [n for n in members - set(roots) if n.outputs[0] in fetched or
                      any(u not in inside for u in users.get(n.outputs[0], []))]
        why = None
        shared = [n for n in members & taken if not _small(n)]
        if shared:
            why = f"'{shared[0].name}' is computed by another group's kernel"
        elif len(roots) > max_draw_buffers:
            why = (f"its kernel would write {len(roots)} render targets, more than the "
                   f"{max_draw_buffers} the GPU draws at once")
        elif len(externals) > max_texture_units:
            why = (f"its kernel would read {len(externals)} textures, more than the "
                   f"{max_texture_units} it may bind")
        elif len(ordered) > 2 * MAX_STEPS:
            why = f"its kernel would have {len(ordered)} steps"
        elif early:
            why = f"'{early[0]}' reads a new value before the group's last op"
        elif any(v.node in roots for n in recomputed for v in n.inputs):
            why = "a recomputed one-element op reads a new value"
        if why:
            report.append(f"kept the updates of {names} apart: {why}")
            continue
        taken |= members
        plans.append((ordered, roots, steps, externals))
        report.append(f"one kernel updates {names} ({len(ordered)} ops)")
    if not plans:
        return graph

    at_last = {ordered[-1]: (ordered, roots, steps, externals)
               for ordered, roots, steps, externals in plans}
    every_root = {r for _, roots, _, _ in plans for r in roots}
    skip = set(every_root) - set(at_last)
    # the group's assigns made before its last op are made again after it
    deferred = {assign_of[r] for ordered, roots, _, _ in plans for r in roots
                if position[assign_of[r]] < position[ordered[-1]]}
    skip |= deferred
    for ordered, roots, _, _ in plans:
        inside = set(ordered) | {assign_of[r] for r in roots}
        skip |= {n for n in ordered[:-1] if n.outputs[0] not in fetched and
                 all(u in inside for u in users.get(n.outputs[0], []))}
    # a recomputed small node that others read stays a node of its own too, and so
    # do the nodes it reads
    kept = [n for n in taken if n not in skip and n not in at_last]
    while kept:
        node = kept.pop()
        for v in node.inputs:
            if v.node in skip and v.node not in every_root:
                skip.discard(v.node)
                kept.append(v.node)

    def transform(node, inputs, new, mapping):
        if node not in at_last:
            return None
        ordered, roots, steps, externals = at_last[node]
        index = {m: j for j, m in enumerate(ordered)}
        outputs = new.add_node(
            "fused_update", [mapping[v] for v in externals],
            {"steps": steps, "results": tuple(index[r] for r in roots),
             "nodes": member_provenance(ordered)},
            exact_name=node.name, scope=node.scope, source=node.source).outputs
        by_root = dict(zip(roots, outputs))
        for r in roots:                     # the roots before this one were skipped
            mapping[r.outputs[0]] = by_root[r]
            a = assign_of[r]
            if a in deferred:
                mapping[a.outputs[0]], = new.add_node(
                    "assign", [mapping[a.inputs[0]], by_root[r]], dict(a.attrs),
                    exact_name=a.name, scope=a.scope, source=a.source).outputs
        return [by_root[node]]

    return rebuild(graph, transform, skip)
