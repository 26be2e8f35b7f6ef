"""Memory planning (runtime/memory_plan.py) without GL: hand-made LoweredGraphs for each
rule, and real graphs, lowered, checked against the liveness invariant (no two values
live at once share a texture)."""
import itertools

import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import lower
from fragflow.codegen.kernel import Binding, Kernel, LoweredGraph
from fragflow.codegen.layout import Layout
from fragflow.ir.types import TensorType
from fragflow.runtime.driver import optimize
from fragflow.runtime.memory_plan import plan_memory

SMALL = Layout((4, 4), "float32", 4, 1)
BIG = Layout((16, 16), "float32", 64, 1)
INT = Layout((4, 4), "int32", 4, 1)


def kernel(out, *inputs, extra=(), layers=0):
    return ("kernel", Kernel(name=f"k_{out}", op="op", nodes=(out,), scope="", location="",
                             source="", inputs=tuple(Binding(f"s{i}", v, None)
                                                     for i, v in enumerate(inputs)),
                             output=Binding("out", out, None),
                             extra_outputs=tuple(Binding("o", v, None) for v in extra),
                             output_layers=layers))


def hand_lowered(steps, outputs, layouts=None, feeds=("x",), variables=None, assigns=()):
    names = {s[1] if s[0] != "kernel" else s[1].output.value for s in steps}
    names |= {b.value for s in steps if s[0] == "kernel" for b in s[1].extra_outputs}
    names |= set(feeds) | set(variables or {})
    all_layouts = {n: SMALL for n in names}
    all_layouts.update(layouts or {})
    return LoweredGraph(layouts=all_layouts, feeds=list(feeds), constants={},
                        variables=dict(variables or {}), steps=list(steps),
                        assigns=list(assigns), outputs=list(outputs))


def test_reuse_when_lifetimes_do_not_overlap():
    plan = plan_memory(hand_lowered([kernel("a", "x"), kernel("b", "a"), kernel("c", "b"),
                                kernel("d", "c")], outputs=["d"]))
    assert plan.shares("a", "c")          # a's last reader (b) ran before c is written
    assert not plan.shares("a", "b") and not plan.shares("b", "c")
    assert len(plan.textures) == 3        # a/c, b, and d (fetched: a new one)


def test_no_reuse_when_lifetimes_overlap():
    plan = plan_memory(hand_lowered([kernel("a", "x"), kernel("b", "a"), kernel("c", "b", "a"),
                                kernel("d", "c")], outputs=["d"]))
    assert not plan.shares("a", "b")      # a is read again by c
    assert not plan.shares("a", "c") and not plan.shares("b", "c")
    assert len({plan.texture_of[v] for v in "abcd"}) == 4


def test_a_kernel_never_writes_a_texture_it_reads():
    plan = plan_memory(hand_lowered([kernel("a", "x"), kernel("b", "a"), kernel("c", "b")],
                               outputs=["c"]))
    assert not plan.shares("a", "b") and not plan.shares("b", "c")


def test_fetched_outputs_are_never_reused():
    plan = plan_memory(hand_lowered([kernel("a", "x"), kernel("b", "a"), kernel("c", "b"),
                                kernel("d", "c"), kernel("e", "d")], outputs=["a", "e"]))
    others = [plan.texture_of[v] for v in "bcde"]
    assert plan.texture_of["a"] not in others
    assert "a" in plan.kept and "e" in plan.kept


def test_a_fetched_view_keeps_its_root():
    plan = plan_memory(hand_lowered([kernel("a", "x"), ("alias", "v", "a"), kernel("b", "a"),
                                kernel("c", "b")], outputs=["v", "c"]))
    assert plan.root("v") == "a" and "a" in plan.kept
    assert not plan.shares("a", "c")


def test_variables_and_feeds_are_not_planned_and_never_reused():
    plan = plan_memory(hand_lowered([kernel("a", "w", "x"), kernel("b", "a"), kernel("c", "b")],
                               outputs=["c"], variables={"w": "w"}))
    assert "w" not in plan.texture_of and "x" not in plan.texture_of
    assert set(plan.texture_of) == {"a", "b", "c"}


def test_assigned_values_are_kept_for_the_swap():
    # w <- new: the new value is read by d, then its texture is free in liveness terms,
    # but the run ends by swapping it into the variable: nothing may write it before
    steps = [kernel("new", "w"), kernel("d", "new"), kernel("e", "d"), kernel("f", "e"),
             kernel("g", "f"), ("alias", "assign", "new")]
    plan = plan_memory(hand_lowered(steps, outputs=["g"], variables={"w": "w"},
                               assigns=[("w", "assign")]))
    assert plan.root("assign") == "new" and "new" in plan.kept
    assert plan.texture_of["new"] not in [plan.texture_of[v] for v in "defg"]
    assert plan.shares("d", "f")          # the others still reuse


def test_views_share_their_root_and_extend_its_life():
    plan = plan_memory(hand_lowered([kernel("a", "x"), ("alias", "v", "a"), kernel("b", "x"),
                                kernel("c", "v", "b"), kernel("d", "c"), kernel("e", "d")],
                               outputs=["e"]))
    assert plan.shares("v", "a")
    assert not plan.shares("a", "b")      # a is alive (as v) until c
    assert plan.shares("a", "d") or plan.shares("b", "d")


def test_a_value_bound_twice_is_freed_once():
    # matmul(a, a) binds a twice; freeing it twice let two later values share a texture
    steps = [kernel("a", "x"), kernel("m", "a", "a"), kernel("p", "m"), kernel("q", "m"),
             kernel("r", "p", "q")]
    plan = plan_memory(hand_lowered(steps, outputs=["r"]))
    assert not plan.shares("p", "q")
    assert plan.shares("a", "p") or plan.shares("a", "q")


def test_textures_are_reused_only_within_a_key():
    layouts = {"a": BIG, "b": SMALL, "c": BIG, "d": INT, "e": SMALL}
    plan = plan_memory(hand_lowered([kernel("a", "x"), kernel("b", "a"), kernel("c", "b"),
                                kernel("d", "c"), kernel("e", "d")], outputs=["e"],
                               layouts=layouts))
    for value, index in plan.texture_of.items():
        assert plan.textures[index] == layouts[value].texture_key
    assert plan.shares("a", "c")          # BIG, a dead before c
    assert not plan.shares("b", "d")      # same size, other format


def test_extra_outputs_get_textures_and_free_them():
    plan = plan_memory(hand_lowered([kernel("a", "x", extra=["a1", "a2"]),
                                kernel("b", "a", "a1", "a2"), kernel("c", "b"),
                                kernel("d", "c"), kernel("e", "d")], outputs=["e"]))
    assert len({plan.texture_of[v] for v in ("a", "a1", "a2")}) == 3
    assert plan.texture_of["c"] in {plan.texture_of[v] for v in ("a", "a1", "a2")}


def test_kept_extra_outputs_get_new_textures():
    # an optimizer's update writes several assigned values in one draw
    steps = [kernel("a", "x"), kernel("b", "a"), kernel("u", "b", "w", extra=["m"]),
             kernel("y", "u"), ("alias", "assign_w", "u"), ("alias", "assign_m", "m")]
    plan = plan_memory(hand_lowered(steps, outputs=["y"], variables={"w": "w"},
                               assigns=[("w", "assign_w"), ("m", "assign_m")]))
    assert {"u", "m"} <= plan.kept
    shared_by = [v for v in plan.texture_of if v not in ("u", "m")]
    assert plan.texture_of["m"] not in [plan.texture_of[v] for v in shared_by]
    assert plan.texture_of["u"] not in [plan.texture_of[v] for v in shared_by]


def test_layered_outputs_live_in_their_own_array():
    plan = plan_memory(hand_lowered([kernel("blocks", "x", layers=4), kernel("y", "blocks")],
                               outputs=["y"]))
    assert "blocks" in plan.layered and "blocks" not in plan.texture_of


def test_empty_values_get_a_texture():
    plan = plan_memory(hand_lowered([("empty", "z"), kernel("y", "z")], outputs=["y"]))
    assert "z" in plan.texture_of and not plan.shares("z", "y")


# -- real graphs lowered: the liveness invariant ----------------------------------------
def assert_no_live_values_share(lowered_graph, plan):
    """Every value a step writes is live from that step to its last reader (to the end
    of the run if kept); two values live at one step never share a texture, and kept
    values share theirs with no one."""
    end = len(lowered_graph.steps)
    born, last = {}, {}
    for index, step in enumerate(lowered_graph.steps):
        if step[0] == "alias":
            continue
        if step[0] == "empty":
            written = [step[1]]
        else:
            written = [b.value for b in step[1].outputs]
            for b in step[1].inputs:
                last[plan.root(b.value)] = index
        for value in written:
            born.setdefault(value, index)
    for value in plan.kept:
        last[value] = end
    spans = {v: (born[v], last.get(v, born[v])) for v in plan.texture_of}
    by_texture: dict = {}
    for value, texture in plan.texture_of.items():
        by_texture.setdefault(texture, []).append(value)
    for values in by_texture.values():
        ordered = sorted(values, key=lambda v: spans[v])
        for first, second in itertools.pairwise(ordered):
            # strictly after: the step that reads `first` last must not write `second`
            # into its texture (GL cannot read and write one texture in a draw)
            assert spans[first][1] < spans[second][0], (first, second, spans)
    for value in plan.kept & set(plan.texture_of):
        assert by_texture[plan.texture_of[value]] == [value]


def lowered(fetches, feed_types, graph, disable=()):
    compiled = optimize(graph, [f.value for f in fetches], feed_types, disable=disable)
    return lower(compiled.graph, 16384)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize("disable", [(), ("fuse_epilogues", "fuse_elementwise")])
def test_lowered_training_step_keeps_the_invariant(disable, optimizer):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 6), "float32", name="x")
        w1 = ff.Variable(np.ones((6, 8), np.float32), name="w1")
        w2 = ff.Variable(np.ones((8, 3), np.float32), name="w2")
        h = ff.relu(x @ w1)
        logits = h @ w2
        loss = ff.reduce_mean(ff.square(logits)) + ff.reduce_sum(ff.exp(h) * h)
        step = getattr(ff.optim, optimizer)(0.1).minimize(loss)
    lowered_graph = lowered([loss, step], {x.value: TensorType((5, 6), "float32")}, g, disable)
    plan = plan_memory(lowered_graph)
    assigned = [n for _, n in lowered_graph.assigns]
    assert len(assigned) >= 2 and all(plan.root(n) in plan.kept for n in assigned)
    assert_no_live_values_share(lowered_graph, plan)
    assert len(plan.textures) < len(plan.texture_of)      # something was reused


def test_lowered_double_binding_keeps_the_invariant():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((8, 8), "float32", name="x")
        m = ff.matmul(ff.exp(x), ff.exp(x))
        r = ff.exp(m * 0.001) + ff.square(m)
    lowered_graph = lowered([r], {x.value: TensorType((8, 8), "float32")}, g,
                   disable=("fuse_elementwise",))
    assert_no_live_values_share(lowered_graph, plan_memory(lowered_graph))
