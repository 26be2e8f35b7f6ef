"""sess.profile / `fragflow profile`: time per user op and scope that adds up to the run
time; debug mode: the first NaN or Inf names the node, its scope and the user's line."""
import logging
import time

import numpy as np
import pytest

import fragflow as ff

from cli_targets import heavy, program, run_cli, target


def test_profile_parts_add_up_to_the_measured_run_time(gl):
    out, feeds = heavy()
    with ff.Session(out.graph) as sess:
        sess.profile(out, feeds, runs=1)                  # compile and JIT first
        start = time.perf_counter()
        p = sess.profile(out, feeds, runs=5)
        elapsed = time.perf_counter() - start
    parts = sum(r["wall_seconds"] for r in p.rows) + p.phases["upload"] + \
        p.phases["readback"]
    assert abs(parts - p.total) <= 0.10 * p.total, str(p)
    # the profiled runs fit inside the call's own time (no upper bound: on a loaded
    # machine the call can be descheduled between runs, and that is not the profiler's)
    assert p.runs * p.total <= elapsed, str(p)
    for r in p.rows:                   # a kernel's GPU time is within its wall time
        assert 0 < r["seconds"] <= r["wall_seconds"] * 1.05 + 1e-4, str(p)
    assert abs(sum(r["seconds"] for r in p.kernel_rows) - p.kernel_seconds) < 1e-9
    assert p.compile_seconds >= 0


def test_profile_rows_are_the_users_ops_and_scopes(gl):
    out, feeds = heavy()
    with ff.Session(out.graph) as sess:
        p = sess.profile(out, feeds, runs=2)
    rows = {(r["scope"], r["op"]) for r in p.rows}
    # matmul, its bias and relu run in one fused kernel (its epilogue may take in the
    # head's square too): the row names the user's ops and scopes, not the kernel's
    assert any(scope.startswith("layer") and op.startswith("matmul+add+relu")
               for scope, op in rows), rows
    assert any("head" in scope and "sum" in op for scope, op in rows), rows
    assert not any(op.startswith(("fused", "k0")) for _, op in rows), rows
    text = str(p)
    for needed in ("layer", "matmul+add+relu", "head", "(upload)", "(readback)", "total per run",
                   "compile (first run only)"):
        assert needed in text
    assert [r["wall_seconds"] for r in p.rows] == \
        sorted((r["wall_seconds"] for r in p.rows), reverse=True)


def test_a_gpgpu_program_is_profiled_under_its_name(gl, capsys):
    code, out, err = run_cli(capsys, "profile", target("program"), "--runs", "3")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "square_add" in ln)
    assert line.split()[0] == "custom"
    assert "prep" in out and "tanh" in out and "total per run" in out
    code, out, err = run_cli(capsys, "profile", target("program"), "--runs", "2",
                             "--by", "kernel")
    assert code == 0, err
    assert [ln.split()[0] for ln in out.splitlines()[2:5]] == \
        ["k0_prep_tanh", "k1_custom_square_add", "k2_sum"]


def test_profile_on_the_numpy_backend_names_ops_too():
    out = program()
    with ff.Session(out.graph, backend="numpy", passes=[]) as sess:
        with pytest.raises(ff.FragflowError):       # square_add has no numpy reference
            sess.profile(out, {out.graph.node("x").outputs[0]: np.ones((6, 5), np.float32)})
    y, loss = __import__("cli_targets").dense()
    x = y.graph.node("x").outputs[0]
    with ff.Session(y.graph, backend="numpy", passes=[]) as sess:
        p = sess.profile([loss], {x: np.ones((3, 4), np.float32)}, runs=2)
    rows = {(r["scope"], r["op"]) for r in p.rows}
    assert ("(root)", "mean") in rows, rows


def planted_nan():
    g = ff.Graph("planted")
    with g.as_default():
        x = ff.placeholder((5,), name="x")
        with ff.name_scope("model"):
            shifted = x - 2.0
            y = ff.log(shifted)                                    # NaN where x < 2
            z = ff.sum(y * 3.0)
    return g, x, z


LOG_LINE = planted_nan.__code__.co_firstlineno + 6


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_debug_mode_names_the_node_that_made_a_nan(backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    g, x, z = planted_nan()
    data = np.array([1, 3, 4, 5, 6], np.float32)
    with ff.Session(g, backend=backend) as sess:
        assert np.isnan(sess.run(z, {x: data}))            # without debug: silently NaN
    with ff.Session(g, backend=backend, debug=True) as sess:
        with pytest.raises(ff.NumericsError) as info:
            sess.run(z, {x: data})
        assert sess.run(z, {x: data + 2}) == pytest.approx(
            3 * np.log(data).sum(), rel=1e-5)             # finite data runs as usual
    message = str(info.value)
    assert message.startswith("log 'model/log' (scope 'model', ")
    assert f"test_profile_and_debug.py:{LOG_LINE})" in message
    assert "produced NaN in 1 of 5 elements (first at [0])" in message


def test_debug_mode_finds_inf_and_logs_each_kernel_with_its_scope(gl, caplog):
    g = ff.Graph("inf")
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        with ff.name_scope("ratio"):
            y = ff.exp(x) / (x - x)
    with ff.Session(g, debug=True) as sess, caplog.at_level(logging.INFO, "fragflow"):
        with pytest.raises(ff.NumericsError, match=r"^div 'ratio/\w+' \(scope 'ratio', "
                                                   r"\S+test_profile_and_debug.py:\d+\) "
                                                   r"produced Inf in 3 of 3"):
            sess.run(y, {x: np.ones(3, np.float32)})
        with pytest.raises(ff.NumericsError, match="the feed for 'x' contains NaN"):
            sess.run(y, {x: np.array([1, np.nan, 2], np.float32)})
    ran = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ran ")]
    assert any("in scope 'ratio'" in m and "(exp)" in m for m in ran), ran
