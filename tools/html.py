"""The HTML view: one self-contained page (inline CSS and JS, nothing fetched).

The graph is drawn as SVG here in Python (tools/layout.py places the nodes): nodes
coloured by op family, the nodes of each fused kernel outlined, edges labelled with the
types they carry. The page's script only reacts: clicking a node shows its attributes,
inputs, outputs, scope and source line, and the GLSL of the kernel that computes it
(for a node lowered to several kernels, the one writing its result, as the kernel
record says: a stitch for its epilogue, a reduction's last pass), then the node's other
kernels. The page opens scrolled to the graph's inputs (a large graph's canvas is
wider than the window); "fit to view" scales the whole graph into it. Opening the page
with #select=<node name> shows a node the same way; #click=<node name> clicks it.

A control-flow node (while_loop, cond, scan) is drawn as a box holding its sub-graphs
side by side (cond and body, true_branch and false_branch), each a box with its own
drawing, nested loops nested; the node itself is the box's title bar. The nodes inside
have the ids "<control node>:<sub-graph>:<name>" (names repeat across bodies); their
kernels are in plans of their own (`fragflow shaders` writes them in folders)."""
from __future__ import annotations

import html
import json
from urllib.parse import quote

from fragflow.codegen.kernel import PARTS, node_value
from fragflow.ir.dot import FAMILY_COLORS, OTHER_COLOR, family_of
from fragflow.ir.graph import Graph
from fragflow.ir.ops.control import subgraphs
from fragflow.ir.printer import format_attr, format_steps

from .compiled import node_kernels
from .layout import NODE_H, NODE_W, layered_layout

BOX_PAD, BOX_HEADER = 14, NODE_H + 14        # a control node's box: padding, title bar


def node_record(node, types: dict) -> dict:
    attrs = []
    for key, value in node.attrs.items():
        if isinstance(value, Graph):        # a loop's body, a branch: drawn inside
            attrs.append([key, f"a sub-graph of {len(value.nodes)} nodes, drawn in "
                               f"this node's box"])
        elif key == "steps":
            attrs.append([key, format_steps(value)])
        elif key == "glsl":
            attrs.append([key, value.strip()])
        elif key == "nodes":
            attrs.append([key, ", ".join(f"{n} ({op})" for n, op, *_ in value)])
        else:
            attrs.append([key, format_attr(value)])
    return {
        "op": node.op, "family": family_of(node.op), "scope": node.scope or "(root)",
        "source": node.source or "",
        "attrs": attrs,
        "inputs": [[v.name, types.get(v.name, str(v.type))] for v in node.inputs],
        "outputs": [[v.name, types.get(v.name, str(v.type))] for v in node.outputs],
    }


def render_page(graph, *, title: str, kernels=(), shader_texts=(), kernel_index=None,
                notes=None, types=None, subtitle: str = "", problem: str = "") -> str:
    """kernels: run order; shader_texts: the .frag text of each; kernel_index: {node
    name: kernel index} (tools/compiled.py kernel_of; the page shows the kernel that
    computes each node, node_kernels); notes: {node name: why it has no kernel};
    types: {value name: concrete type text}; problem: why there are no kernels (shown
    on the page)."""
    types, notes, kernel_index = types or {}, notes or {}, kernel_index or {}
    lowering = node_kernels(graph, kernels)
    for name, index in kernel_index.items():
        lowering.setdefault(name, (index, [index]))
    groups = {}       # the nodes of one lowering (a fused kernel, or it and its stitch)
    for name, (_, every) in lowering.items():
        groups.setdefault(tuple(every), []).append(name)
    outlined = {" + ".join(kernels[i].name for i in every): names
                for every, names in groups.items() if len(names) > 1}
    layout = _measure(graph, outlined, "")
    nodes = {n.name: {**node_record(n, types),
                      "kernel": lowering.get(n.name, (None,))[0],
                      "kernels": lowering.get(n.name, (None, []))[1],
                      "note": notes.get(n.name, "")} for n in graph.nodes}
    nodes.update(_inner_records(graph, ""))
    data = {
        "graph": graph.name,
        "nodes": nodes,
        "kernels": [{"name": k.name, "op": k.op, "nodes": list(k.nodes),
                     "computes": [r.name for r in k.computes], "part": k.part,
                     "role": PARTS[k.part], "source": text}
                    for k, text in zip(kernels, shader_texts)],
        "problem": problem,
    }
    svg = _svg(graph, layout, outlined, types)
    legend = "".join(
        f'<span class="chip" style="background:{color}">{html.escape(family)}</span>'
        for family, color in FAMILY_COLORS.items()
        if any(family_of(n.op) == family for n in graph.nodes))
    kernel_list = "".join(
        f'<li><a href="#select={html.escape(_url(_shown_node(k, graph)))}" '
        f'data-kernel="{i}">{i:02d} {html.escape(k.name)}</a> '
        f'<span class="dim">{html.escape(k.op)}</span></li>'
        for i, k in enumerate(kernels) if _shown_node(k, graph) in graph)
    return _PAGE.format(
        title=html.escape(title), subtitle=html.escape(subtitle),
        legend=legend, svg=svg,
        kernels=kernel_list or '<li class="dim">none</li>',
        problem=(f'<p class="problem">{html.escape(problem)}</p>' if problem else ""),
        data=_script_json(data), css=_CSS, js=_JS, error_hook=_ERROR_HOOK)


def _shown_node(kernel, graph) -> str:
    """The node a kernel's entry in the list selects: the node of the value it writes
    or finishes, else (a kernel before its node's last: a blocked product, packing, a
    reduction pass) the first node it computes or runs for ('d/matmul' for a blocked
    'd/relu#blocks'), else the node of the value it works towards ('sum' for 'sum:r0')."""
    value = node_value(kernel.output.value).partition(":")[0]
    if kernel.part in ("", "stitch", "last", "blocks") and value in graph:
        return value
    names = [n.name for n in kernel.computes] + list(kernel.nodes)
    return next((n for n in names if n in graph), value)


def _url(name: str) -> str:
    return quote(name, safe="")


def _script_json(data) -> str:
    """JSON that is safe inside <script>: no "</" or "<!--" can end the element."""
    text = json.dumps(data, ensure_ascii=True)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _measure(graph, outlined, prefix) -> dict:
    """graph's layout, each control node sized to hold its sub-graphs' layouts side by
    side ("inner": {node name: [(attr, sub-graph, its layout)]})."""
    inner, sizes = {}, {}
    for node in graph.nodes:
        subs = subgraphs(node)
        if not subs:
            continue
        laid = [(key, sub, _measure(sub, {}, f"{prefix}{node.name}:{key}:"))
                for key, sub in subs]
        inner[node.name] = laid
        sizes[node.name] = (max(NODE_W, sum(lay["width"] for _, _, lay in laid)
                                + BOX_PAD * (len(laid) + 1)),
                            BOX_HEADER + max(lay["height"] for _, _, lay in laid) + BOX_PAD)
    layout = layered_layout(graph, outlined, sizes)
    layout["inner"] = inner
    return layout


def _inner_records(graph, prefix) -> dict:
    """The page's records of the nodes inside graph's control nodes, by id."""
    out = {}
    for node in graph.nodes:
        for key, sub in subgraphs(node):
            at = f"{prefix}{node.name}:{key}:"
            where = f"inside {node.op} '{node.name}', its {key}"
            for inner in sub.nodes:
                out[at + inner.name] = {
                    **node_record(inner, {}), "kernel": None, "kernels": [],
                    "note": f"{where}: a loop's or branch's kernels are in a plan of its "
                            f"own (fragflow shaders writes them in a folder each)"}
            out.update(_inner_records(sub, at))
    return out


def _svg(graph, layout, outlined, types) -> str:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="graph" '
             f'width="{layout["width"]:.0f}" height="{layout["height"]:.0f}" '
             f'viewBox="0 0 {layout["width"]:.0f} {layout["height"]:.0f}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
             'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
             '<path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>']
    _draw(graph, layout, outlined, types, "", (0.0, 0.0), parts, top=True)
    parts.append("</svg>")
    return "\n".join(parts)


def _draw(graph, layout, outlined, types, prefix, offset, parts, top=False) -> None:
    """graph's groups, boxes, edges and nodes, its layout moved by offset; node ids
    prefixed (a sub-graph's)."""
    ox, oy = offset
    pos = {n: (x + ox, y + oy) for n, (x, y) in layout["nodes"].items()}
    size = layout["sizes"]
    for label, names in outlined.items():
        xs = [pos[n][0] for n in names if n in pos]
        ys = [pos[n][1] for n in names if n in pos]
        if not xs:
            continue
        x0, y0 = min(xs) - NODE_W / 2 - 10, min(ys) - NODE_H / 2 - 22
        x1, y1 = max(xs) + NODE_W / 2 + 10, max(ys) + NODE_H / 2 + 10
        parts.append(f'<g class="group"><rect x="{x0:.1f}" y="{y0:.1f}" '
                     f'width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" rx="10"/>'
                     f'<text x="{x0 + 8:.1f}" y="{y0 + 14:.1f}">fused kernel'
                     f'{"s" if " + " in label else ""} {html.escape(label)}</text></g>')
    for name, laid in layout["inner"].items():
        (cx, cy), (w, h) = pos[name], size[name]
        x0, y0 = cx - w / 2, cy - h / 2
        parts.append(f'<g class="cfbox"><rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" '
                     f'height="{h:.1f}" rx="12"/></g>')
        x = x0 + BOX_PAD
        for key, sub, lay in laid:
            parts.append(f'<g class="cfsub"><rect x="{x:.1f}" y="{y0 + BOX_HEADER:.1f}" '
                         f'width="{lay["width"]:.1f}" height="{lay["height"]:.1f}" rx="8"/>'
                         f'<text x="{x + 8:.1f}" y="{y0 + BOX_HEADER + 16:.1f}">'
                         f'{html.escape(key)}</text></g>')
            _draw(sub, lay, {}, {}, f"{prefix}{name}:{key}:", (x, y0 + BOX_HEADER), parts)
            x += lay["width"] + BOX_PAD
    drawn = set()
    for node in graph.nodes:
        for v in node.inputs:
            key = (v.node.name, node.name, v.name)
            if key in drawn:
                continue
            drawn.add(key)
            (sx, sy), (dx, dy) = pos[v.node.name], pos[node.name]
            sy, dy = sy + size[v.node.name][1] / 2, dy - size[node.name][1] / 2
            bend = max(30.0, (dy - sy) / 2)
            path = f"M{sx:.1f},{sy:.1f} C{sx:.1f},{sy + bend:.1f} {dx:.1f},{dy - bend:.1f} " \
                   f"{dx:.1f},{dy:.1f}"
            label = types.get(v.name, str(v.type))
            mx, my = (sx + dx) / 2, (sy + dy) / 2
            parts.append(f'<g class="edge"><path d="{path}" marker-end="url(#arrow)"/>'
                         f'<text x="{mx:.1f}" y="{my:.1f}">{html.escape(label)}</text></g>')
    # where the page opens: the graph's inputs (placeholders), else its top row
    inputs = ({n.name for n in graph.nodes if n.op == "placeholder"} or
              {name for name, (_, y) in pos.items()
               if y == min(p[1] for p in pos.values())}) if top else set()
    for node in graph.nodes:
        x, y = pos[node.name]
        if node.name in layout["inner"]:      # the title bar of its box
            y = y - size[node.name][1] / 2 + BOX_PAD / 2 + NODE_H / 2
        mark = ' data-input="1"' if node.name in inputs else ""
        color = FAMILY_COLORS.get(family_of(node.op), OTHER_COLOR)
        out = ", ".join(types.get(v.name, str(v.type)) for v in node.outputs)
        parts.append(
            f'<g class="node" data-node="{html.escape(prefix + node.name)}" '
            f'data-x="{x:.0f}" '
            f'data-y="{y:.0f}"{mark} tabindex="0">'
            f'<title>{html.escape(node.name)} = {html.escape(node.op)}'
            f'{"  " + html.escape(node.source) if node.source else ""}</title>'
            f'<rect x="{x - NODE_W / 2:.1f}" y="{y - NODE_H / 2:.1f}" width="{NODE_W}" '
            f'height="{NODE_H}" rx="6" fill="{color}"/>'
            f'<text class="name" x="{x:.1f}" y="{y - 5:.1f}">'
            f'{html.escape(_clip(node.name, 26))}</text>'
            f'<text class="op" x="{x:.1f}" y="{y + 12:.1f}">'
            f'{html.escape(_clip(f"{node.op} : {out}", 30))}</text></g>')


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


_ERROR_HOOK = """
window.ffErrors = [];
window.addEventListener('error', function (e) {
  window.ffErrors.push(String(e.message || e));
  document.documentElement.setAttribute('data-ff-errors', window.ffErrors.join(' | '));
});
"""

_CSS = """
body { margin: 0; font: 13px/1.4 system-ui, sans-serif; color: #222; }
header { padding: 8px 14px; border-bottom: 1px solid #ddd; }
header h1 { font-size: 16px; margin: 0 8px 0 0; display: inline; }
.dim { color: #777; }
.chip { display: inline-block; padding: 0 6px; margin: 2px; border-radius: 4px;
        border: 1px solid #bbb; font-size: 11px; }
main { display: flex; height: calc(100vh - 64px); }
#canvas { flex: 1 1 55%; overflow: auto; border-right: 1px solid #ddd; }
#details { flex: 1 1 45%; overflow: auto; padding: 8px 14px; }
#details h2 { font-size: 15px; margin: 6px 0; font-family: monospace; }
#details table { border-collapse: collapse; font-family: monospace; font-size: 12px; }
#details td { border-top: 1px solid #eee; padding: 2px 8px 2px 0; vertical-align: top; }
#details td:first-child { color: #666; white-space: nowrap; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 8px; font-size: 11.5px;
      overflow: auto; }
.problem { color: #a33; }
g.node { cursor: pointer; }
g.node rect { stroke: #666; stroke-width: 1; }
g.node.selected rect { stroke: #d00; stroke-width: 3; }
g.node text { text-anchor: middle; font-family: monospace; pointer-events: none; }
g.node text.name { font-size: 12px; font-weight: bold; }
g.node text.op { font-size: 10.5px; fill: #333; }
g.edge path { fill: none; stroke: #999; stroke-width: 1.2; }
g.edge text { font: 10px monospace; fill: #555; text-anchor: middle;
              paint-order: stroke; stroke: #fff; stroke-width: 3px; }
g.group rect { fill: none; stroke: #3060c0; stroke-width: 1.5; stroke-dasharray: 6 4; }
g.group text { font: 11px monospace; fill: #3060c0; }
g.cfbox rect { fill: #fbf3e8; stroke: #b07020; stroke-width: 1.5; }
g.cfsub rect { fill: #fff; stroke: #b07020; stroke-width: 1; }
g.cfsub text { font: bold 11px monospace; fill: #b07020; }
#canvas.fit svg { width: 100%; height: auto; }
details.other-kernel summary { font-family: monospace; cursor: pointer; margin: 4px 0; }
#kernels { font-family: monospace; font-size: 12px; padding-left: 18px; list-style: none; }
"""

_JS = r"""
(function () {
  var data = JSON.parse(document.getElementById('ff-data').textContent);
  var details = document.getElementById('details');

  function add(parent, tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    parent.appendChild(e);
    return e;
  }
  function row(table, key, value) {
    var tr = add(table, 'tr');
    add(tr, 'td', key);
    add(tr, 'td', value);
  }

  function select(name) {
    var node = data.nodes[name];
    var previous = document.querySelectorAll('g.node.selected');
    for (var i = 0; i < previous.length; i++) previous[i].classList.remove('selected');
    details.innerHTML = '';
    if (!node) {
      add(details, 'p', 'no node named "' + name + '" in this graph', 'problem');
      return;
    }
    var groups = document.querySelectorAll('g.node');
    for (var j = 0; j < groups.length; j++) {
      if (groups[j].getAttribute('data-node') === name) {
        groups[j].classList.add('selected');
        if (groups[j].scrollIntoView) groups[j].scrollIntoView({block: 'nearest'});
      }
    }
    add(details, 'h2', name).id = 'selected-name';
    var table = add(details, 'table');
    row(table, 'op', node.op + '  (' + node.family + ')');
    row(table, 'scope', node.scope);
    row(table, 'source', node.source || '(unknown)');
    node.inputs.forEach(function (v, k) { row(table, 'input ' + k, v[0] + ' : ' + v[1]); });
    node.outputs.forEach(function (v, k) { row(table, 'output ' + k, v[0] + ' : ' + v[1]); });
    node.attrs.forEach(function (a) { row(table, a[0], a[1]); });
    if (node.kernel === null || node.kernel === undefined) {
      add(details, 'p', node.note || data.problem || 'no kernel computes this node', 'dim')
        .id = 'no-kernel';
      return;
    }
    var kernel = data.kernels[node.kernel];
    var computes = kernel.computes.length ? kernel.computes : kernel.nodes;
    var others = computes.filter(function (n) { return n !== name; });
    add(details, 'h2', 'kernel #' + node.kernel + ' ' + kernel.name + ' : ' + kernel.op)
      .id = 'kernel-name';
    if (kernel.part) add(details, 'p', 'it ' + kernel.role, 'dim');
    if (others.length) add(details, 'p', 'the same kernel computes: ' + others.join(', '),
                           'dim');
    add(details, 'pre', kernel.source).id = 'glsl';
    var rest = (node.kernels || []).filter(function (k) { return k !== node.kernel; });
    if (!rest.length) return;
    add(details, 'h2', 'the other kernels of this node, in run order');
    rest.forEach(function (k) {
      var other = data.kernels[k];
      var box = add(details, 'details', null, 'other-kernel');
      box.setAttribute('data-kernel', String(k));
      add(box, 'summary', 'kernel #' + k + ' ' + other.name + ' : ' + other.op + ' (it ' +
          other.role + ')');
      add(box, 'pre', other.source);
    });
  }

  // open on the graph's inputs: a large graph's canvas is far wider than the window
  var canvas = document.getElementById('canvas');
  function showInputs() {
    var marks = document.querySelectorAll('g.node[data-input]');
    if (!marks.length || canvas.classList.contains('fit')) return;
    var xs = [], ys = [];
    for (var m = 0; m < marks.length; m++) {
      xs.push(Number(marks[m].getAttribute('data-x')));
      ys.push(Number(marks[m].getAttribute('data-y')));
    }
    var middle = (Math.min.apply(null, xs) + Math.max.apply(null, xs)) / 2;
    canvas.scrollLeft = Math.max(0, middle - canvas.clientWidth / 2);
    canvas.scrollTop = Math.max(0, Math.min.apply(null, ys) - 80);
    canvas.setAttribute('data-ff-view', [canvas.scrollLeft, canvas.scrollTop,
                                         canvas.clientWidth, canvas.clientHeight].join(','));
  }
  document.getElementById('fit').addEventListener('click', function () {
    canvas.classList.toggle('fit');
    showInputs();
  });

  var nodes = document.querySelectorAll('g.node');
  for (var i = 0; i < nodes.length; i++) {
    nodes[i].addEventListener('click', function (event) {
      var name = event.currentTarget.getAttribute('data-node');
      select(name);
      if (history.replaceState) history.replaceState(null, '', '#select=' +
                                                     encodeURIComponent(name));
    });
  }
  // #select=<node> shows a node as a click does; #click=<node> clicks it (for tests
  // and links that want the click handler itself to run)
  function fromHash() {
    var match = /^#(select|click)=(.*)$/.exec(location.hash);
    if (!match) return;
    var name = decodeURIComponent(match[2]);
    if (match[1] === 'select') return select(name);
    for (var k = 0; k < nodes.length; k++) {
      if (nodes[k].getAttribute('data-node') === name) {
        nodes[k].dispatchEvent(new MouseEvent('click', {bubbles: true}));
        return;
      }
    }
    select(name);
  }
  window.addEventListener('hashchange', fromHash);
  showInputs();
  fromHash();
  document.body.setAttribute('data-ff-ready', '1');
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<script>{error_hook}</script>
<style>{css}</style>
</head>
<body>
<header><h1>{title}</h1><span class="dim">{subtitle}</span>
<button id="fit" type="button">fit to view</button><br>{legend}</header>
<main>
<div id="canvas">
{svg}
</div>
<section id="details">
<p class="dim">Click a node to see its attributes, source line and the GLSL of the kernel
that computes it. Dashed outlines are fused kernels.</p>
{problem}
<h2>kernels in run order</h2>
<ul id="kernels">{kernels}</ul>
</section>
</main>
<script type="application/json" id="ff-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""
