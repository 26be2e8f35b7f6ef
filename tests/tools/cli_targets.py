"""Targets for the `fragflow` command's tests: each function builds a graph and returns
its fetches (and, for some, a feed_dict), as `fragflow dump cli_targets.py:dense` expects."""
import os

import numpy as np

import fragflow as ff


def dense():
    """examples/demo.py's graph: x has an unknown batch dimension (needs --feed-shape)."""
    g = ff.Graph("demo")
    with g.as_default():
        x = ff.placeholder((None, 4), "float32", name="x")
        w = ff.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")
        b = ff.constant(np.array([0.1, -0.2, 0.3], np.float32), name="b")
        with ff.name_scope("dense"):
            y = ff.relu(x @ w + b)
        loss = ff.mean(ff.square(y))
    return [y, loss]


def dense_fed():
    """The same graph with its data: a (fetches, feed_dict) pair."""
    y, loss = dense()
    x = y.graph.node("x").outputs[0]
    xb = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    return {"y": y, "loss": loss}, {x: xb}


square_add = ff.gpgpu_program(
    name="square_add", inputs=["x"], output=lambda x: (x.shape, x.dtype),
    uniforms={"scale": "float"},
    glsl="""
        float v = getXAtOutCoords();
        setOutput(scale * (v * v + v));
    """)


def program():
    """A user GPU program between two scoped ops."""
    g = ff.Graph("custom")
    with g.as_default():
        x = ff.placeholder((6, 5), name="x")
        with ff.name_scope("prep"):
            h = ff.tanh(x)
        with ff.name_scope("custom"):
            y = square_add(h, scale=0.5)
        out = ff.sum(y, axis=1)
    return out


def heavy():
    """Enough work per kernel (a 192x192 matmul, a fused epilogue, a reduction) that a
    profile's per-kernel times are well above the timer's resolution."""
    rng = np.random.default_rng(1)
    g = ff.Graph("heavy")
    with g.as_default():
        x = ff.placeholder((192, 192), name="x")
        w = ff.constant(rng.standard_normal((192, 192)).astype(np.float32) * 0.1, name="w")
        with ff.name_scope("layer"):
            h = ff.relu(x @ w + 0.5)
        with ff.name_scope("head"):
            out = ff.sum(ff.square(h), axis=1)
    return out, {x: rng.standard_normal((192, 192)).astype(np.float32)}


HERE = os.path.abspath(__file__)


def target(func: str) -> str:
    """The TARGET argument naming one of this file's functions."""
    return f"{HERE}:{func}"


def run_cli(capsys, *argv):
    """fragflow's main() in this process (one GL context, shared linked-shader cache):
    (exit code, stdout, stderr)."""
    from fragflow.tools.cli import main
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
