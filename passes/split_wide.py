"""Split nodes that read more textures than one kernel can bind.

A fragment shader samples at most GL_MAX_TEXTURE_IMAGE_UNITS textures (GL 3.3
promises 16; the Session passes the number its context reports). Some ops take any
number of inputs: the gradient of a weight used 100 times (an unrolled RNN) is an
add_n of 100 tensors, and a long concat reads one texture per piece. Such a node
becomes a tree of nodes of the same op, each within the limit; the root keeps the
node's name, so fetches, dumps and kernel headers still point at it.

The splits are declared per op in SPLITTERS. A node that reads too many textures and
has no splitter (a gpgpu_program with many inputs) is left alone: lowering raises
TooManyInputsError naming it."""
from __future__ import annotations

from .rewrite import rebuild

# What GL 3.3 guarantees: the limit when the context's own is not known (the numpy
# backend uses it too, so both backends compile the same graphs by default).
DEFAULT_TEXTURE_UNITS = 16
DEFAULT_DRAW_BUFFERS = 8       # GL 3.3's guarantee (ES 3.0 and WebGL2: 4)


def _chunks(values: list, size: int) -> list:
    return [values[i:i + size] for i in range(0, len(values), size)]


def _free_name(node, new, suffix: str) -> str:
    """A name for an inner node that neither graph uses (originals keep theirs)."""
    base = f"{node.name}_{suffix}"
    name, n = base, 0
    while name in new or name in node.graph:
        n += 1
        name = f"{base}_{n}"
    return name


def _split_add_n(node, inputs, new, limit):
    def part(values, name):
        return new.add_node("add_n", values, {}, exact_name=name, scope=node.scope,
                            source=node.source).outputs[0]
    roots = _tree_of(node, inputs, new, limit, part)
    return new.add_node("add_n", roots, {}, exact_name=node.name, scope=node.scope,
                        source=node.source).outputs


def _split_concat(node, inputs, new, limit):
    # concatenating consecutive pieces along the same axis, then those results, keeps
    # the order: concat(concat(a, b), concat(c, d)) == concat(a, b, c, d)
    attrs = dict(node.attrs)

    def part(values, name):
        return new.add_node("concat", values, attrs, exact_name=name, scope=node.scope,
                            source=node.source).outputs[0]
    roots = _tree_of(node, inputs, new, limit, part)
    return new.add_node("concat", roots, attrs, exact_name=node.name, scope=node.scope,
                        source=node.source).outputs


def _tree_of(node, inputs, new, limit, make_part) -> list:
    """Combine inputs level by level, `limit` at a time, until the root can read them
    all; make_part(values, name) builds one inner node of the tree."""
    values = list(inputs)
    level = 0
    while len(values) > limit:
        level += 1
        values = [chunk[0] if len(chunk) == 1 else
                  make_part(chunk, _free_name(node, new, f"split{level}_{k}"))
                  for k, chunk in enumerate(_chunks(values, limit))]
    return values


# op -> split(node, copied inputs, new graph, limit) -> the node's new outputs
SPLITTERS = {
    "add_n": _split_add_n,
    "concat": _split_concat,
}


def split_wide_nodes(graph, report, max_texture_units: int = DEFAULT_TEXTURE_UNITS):
    """Every node with more inputs than max_texture_units and a splitter becomes a tree
    of nodes that each read at most max_texture_units textures."""
    limit = max(2, int(max_texture_units))
    wide = [n for n in graph.nodes if n.op in SPLITTERS and len(n.inputs) > limit]
    if not wide:
        return graph
    wide = set(wide)

    def transform(node, inputs, new, mapping):
        if node not in wide:
            return None
        report.append(f"split {node.op} '{node.name}' of {len(node.inputs)} inputs into "
                      f"kernels of at most {limit} (the GPU binds {limit} textures per "
                      f"kernel)")
        return SPLITTERS[node.op](node, inputs, new, limit)

    return rebuild(graph, transform)
