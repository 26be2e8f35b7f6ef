"""A layered drawing of a graph for the HTML view, in the Sugiyama spirit: layers by
topological depth, then a few barycenter sweeps to untangle edges; the nodes of one
fused kernel are kept side by side so that their outline stays tight. A node may be
given a size of its own (a control-flow node drawn as a box holding its sub-graphs);
the others are NODE_W x NODE_H."""
from __future__ import annotations

NODE_W, NODE_H = 190, 44
GAP_X, GAP_Y = 36, 74
MARGIN = 40


def _depths(graph, shown: set, group_of: dict) -> dict:
    """Longest-path depth; sources (constants, variables, placeholders) sit just above
    their first consumer rather than all at the top (and above the whole group of
    nodes a fused kernel runs, so they are not drawn inside its outline)."""
    depth = {}
    for node in graph.nodes:
        if node.name not in shown:
            continue
        preds = [depth[v.node.name] for v in node.inputs if v.node.name in depth]
        depth[node.name] = 1 + max(preds) if preds else 0
    consumers = {}
    for node in graph.nodes:
        for v in node.inputs:
            if node.name in depth and v.node.name in depth:
                consumers.setdefault(v.node.name, []).append(node.name)
    group_top = {}
    for name, group in group_of.items():
        if name in depth:
            group_top[group] = min(group_top.get(group, depth[name]), depth[name])
    for node in graph.nodes:
        if node.name in depth and not node.inputs and node.name in consumers:
            tops = [group_top[group_of[c]] if c in group_of else depth[c]
                    for c in consumers[node.name]]
            depth[node.name] = max(0, min(tops) - 1)
    return depth


def layered_layout(graph, groups: dict | None = None, sizes: dict | None = None) -> dict:
    """{"nodes": {name: (x, y)} (box centres), "sizes": {name: (w, h)}, "width",
    "height"} for every node; sizes: {name: (w, h)} for nodes not NODE_W x NODE_H."""
    size = {n.name: (sizes or {}).get(n.name, (NODE_W, NODE_H)) for n in graph.nodes}
    shown = {n.name for n in graph.nodes}
    group_of = {}
    for index, names in enumerate((groups or {}).values()):
        for name in names:
            group_of.setdefault(name, index)
    depth = _depths(graph, shown, group_of)
    layers: dict = {}
    for node in graph.nodes:
        layers.setdefault(depth[node.name], []).append(node.name)
    preds = {n.name: [v.node.name for v in n.inputs] for n in graph.nodes}
    succs: dict = {n.name: [] for n in graph.nodes}
    for name, ps in preds.items():
        for p in ps:
            succs[p].append(name)

    levels = [layers[d] for d in sorted(layers)]
    x = {}

    def place(level):
        cursor = -(sum(size[n][0] for n in level) + GAP_X * (len(level) - 1)) / 2
        for name in level:
            x[name] = cursor + size[name][0] / 2         # the box's centre
            cursor += size[name][0] + GAP_X

    for level in levels:
        place(level)
    for sweep in range(6):
        order = levels if sweep % 2 == 0 else list(reversed(levels))
        neighbours = preds if sweep % 2 == 0 else succs
        for level in order:
            def key(name, neighbours=neighbours):   # bound now: B023
                near = [x[m] for m in neighbours[name] if m in x]
                centre = sum(near) / len(near) if near else x[name]
                return (centre, group_of.get(name, -1))
            level.sort(key=key)
            _keep_groups_together(level, group_of)
            place(level)

    left = min((x[n] - size[n][0] / 2 for n in x), default=0)
    positions = {}
    top = MARGIN + 18
    for level in levels:
        row = max(size[n][1] for n in level)
        for name in level:
            positions[name] = (x[name] - left + MARGIN, top + row / 2)
        top += row + GAP_Y
    width = max((p[0] + size[n][0] / 2 for n, p in positions.items()), default=0) + MARGIN
    height = max((p[1] + size[n][1] / 2 for n, p in positions.items()), default=0) + MARGIN
    return {"nodes": positions, "sizes": size, "width": width, "height": height}


def _keep_groups_together(level: list, group_of: dict) -> None:
    """Stable: members of a group follow the first member of it in this level."""
    out, seen = [], set()
    for name in level:
        g = group_of.get(name)
        if g is None:
            out.append(name)
        elif g not in seen:
            seen.add(g)
            out.extend(m for m in level if group_of.get(m) == g)
    level[:] = out
