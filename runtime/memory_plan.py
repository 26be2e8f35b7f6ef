"""Memory planning: which texture each value of a LoweredGraph lives in.

A pure function over the LoweredGraph (its steps, layouts, outputs and assigns): no GL, no
pool. GLPlan acquires one texture per entry of `MemoryPlan.textures` and binds values
to them through `texture_of`; tests check the planning without a context.

The rules:
- Feeds, constants and variables are not planned: feeds and constants get textures of
  the plan's own, variables live in the session's store.
- A view (an "alias" step: reshape, squeeze, an assign that takes its value's texture)
  shares the texture of the value it views (its root).
- A value a step writes gets a texture of its layout's key (width, height, format):
  one freed by a value of that key whose last reader has run, else a new one. Values
  fetched or assigned are kept to the end of the run (read back, or swapped into the
  variable, after the last kernel), so they get new textures and never free theirs.
- A kernel's output never shares a texture with its inputs: the inputs it reads for
  the last time are freed after its outputs are placed (GL cannot read and write one
  texture in a draw).
- A kernel with output_layers renders into an array texture of its own (not pooled);
  its value is in `layered`, not in `texture_of`.
- Hoisted values (`hoisted_values`: computed only from constants and variables no run
  of the plan assigns, so the runtime computes them once, not every run) get textures
  of their own that nothing else reuses, like kept values.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryPlan:
    textures: tuple       # texture index -> texture key (width, height, format)
    texture_of: dict      # value name -> texture index, for each value a step writes
    kept: frozenset       # values (roots) kept to the end of the run: fetched, assigned
    layered: frozenset    # values written into an array texture of their kernel's own
    roots: dict           # view value -> the value whose texture it shares
    hoisted: frozenset = frozenset()   # values computed once (hoisted_values)

    def root(self, value: str) -> str:
        """The value whose texture `value` is (itself unless it is a view)."""
        return self.roots.get(value, value)

    def shares(self, a: str, b: str) -> bool:
        """Whether values a and b live in one texture."""
        a, b = self.root(a), self.root(b)
        return a == b or (a in self.texture_of and b in self.texture_of and
                          self.texture_of[a] == self.texture_of[b])


def view_roots(steps) -> dict:
    """{view value: the value it views, through chains of views} for alias steps."""
    roots: dict = {}
    for step in steps:
        if step[0] == "alias":
            roots[step[1]] = roots.get(step[2], step[2])
    return roots


def invariant_inputs(lowered_graph) -> frozenset:
    """The values of a LoweredGraph that no run of it changes: its constants, and its
    variables' values where the graph never assigns that variable (another plan's
    assign or Session.set may: the runtime computes what is hoisted from them again)."""
    assigned = {var for var, _ in lowered_graph.assigns}
    return frozenset(lowered_graph.constants) | frozenset(
        value for value, var in lowered_graph.variables.items() if var not in assigned)


def hoisted_values(lowered_graph, invariant=None) -> frozenset:
    """The values of kernels to hoist: kernels with inputs, each input (through views)
    an invariant value (invariant_inputs, or the set given) or a hoisted kernel's
    output, none of their outputs fetched, assigned or in a window of a larger texture
    (a fetched value's texture may be handed on: a loop swaps it with its variable's).
    Such a kernel gives the same result every run (a matmul's packed copy of a weight,
    a transposed constant): the runtime runs it once and keeps its textures."""
    if invariant is None:
        invariant = invariant_inputs(lowered_graph)
    roots = view_roots(lowered_graph.steps)
    layouts = lowered_graph.layouts
    assigned = {roots.get(n, n) for _, n in lowered_graph.assigns} | \
        {roots.get(n, n) for n in lowered_graph.outputs} | \
        set(lowered_graph.fetched_blocks.values())
    hoisted: set = set()
    for step in lowered_graph.steps:
        if step[0] != "kernel" or not step[1].inputs:
            continue
        kernel = step[1]
        outputs = [b.value for b in kernel.outputs]
        if any(v in assigned or layouts[v].window for v in outputs):
            continue
        if all(roots.get(b.value, b.value) in invariant or
               roots.get(b.value, b.value) in hoisted for b in kernel.inputs):
            hoisted.update(outputs)
    return frozenset(hoisted)


def plan_memory(lowered_graph, hoisted=frozenset()) -> MemoryPlan:
    """The textures a LoweredGraph's steps write into, reused by liveness (see the module
    docstring for the rules); `hoisted` (hoisted_values) get textures of their own."""
    roots = view_roots(lowered_graph.steps)
    layouts = lowered_graph.layouts

    def root(value):
        return roots.get(value, value)

    hoisted = frozenset(hoisted)
    kept = frozenset(root(n) for n in lowered_graph.outputs) | \
        frozenset(root(n) for _, n in lowered_graph.assigns)
    own = kept | hoisted
    layered = frozenset(s[1].output.value for s in lowered_graph.steps
                        if s[0] == "kernel" and s[1].output_layers)
    last_read = {}
    for index, step in enumerate(lowered_graph.steps):
        if step[0] == "kernel":
            for binding in step[1].inputs:
                last_read[root(binding.value)] = index

    textures: list = []
    texture_of: dict = {}
    free: dict = {}          # texture key -> indices of textures no live value holds

    def new(key):
        textures.append(key)
        return len(textures) - 1

    def reuse_or_new(key):
        reusable = free.get(key)
        return reusable.pop() if reusable else new(key)

    for index, step in enumerate(lowered_graph.steps):
        if step[0] == "alias":
            continue
        if step[0] == "empty":
            written = [step[1]]
        elif step[1].output_layers:          # its own array texture
            written = []
        else:                                # the primary output, then more targets
            written = [b.value for b in step[1].outputs]
        for value in written:
            key = layouts[value].texture_key
            texture_of[value] = new(key) if value in own else reuse_or_new(key)
        if step[0] != "kernel":
            continue
        # each value once, though a kernel may bind it twice (matmul(a, a))
        for value in dict.fromkeys(root(b.value) for b in step[1].inputs):
            if last_read[value] == index and value not in own and value in texture_of:
                free.setdefault(layouts[value].texture_key, []).append(texture_of[value])
    return MemoryPlan(tuple(textures), texture_of, kept, layered, roots, hoisted)
