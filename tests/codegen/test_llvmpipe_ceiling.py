"""benchmarks/llvmpipe_ceiling.py's pieces that its figures rest on: the fetch programs
read the texels they are said to read (each fetch mode against numpy), and the two
edits of the packed kernel ("split": without its products, without its fetches) still
find what they replace in today's template and change the kernel's result, so that a
template change cannot silently turn them into the kernel as compiled."""
import importlib.util
import os

import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.layout import layout_for
from fragflow.ir.types import TensorType

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks",
                    "llvmpipe_ceiling.py")


def body(kernel) -> str:
    """A kernel's source after its header (which names the user's line)."""
    return kernel.source.split("// -- end of header --", 1)[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("llvmpipe_ceiling", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("fetch", ["texelFetch", "textureLod", "textureLodOffset"])
def test_fetch_program_sums_its_run(bench, fetch):
    texels = bench.RESIDENT_TEXELS
    layout = layout_for(TensorType((texels * 4,), "float32"),
                        ff.gl_info()["max_texture_size"])
    data = np.random.default_rng(0).standard_normal(texels * 4).astype(np.float32)
    data[5] = -0.0
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((texels * 4,), name="x")
        y = bench.fetch_program(texels, layout.width, fetch)(x)
    got = ff.Session(g).run(y, {x: data})
    runs = (np.arange(bench.STREAM_ELEMENTS)[:, None] * bench.STEPS
            + np.arange(bench.STEPS)) & (texels - 1)
    want = data.reshape(-1, 4).astype(np.float64).sum(axis=1)[runs].sum(axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_fma_program_matches_float64(bench):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        y = bench.FMA_PROGRAM(x)
    got = ff.Session(g).run(y, {x: np.zeros(4, np.float32)})
    m = np.array([0.999, 0.998, 0.997, 0.996])
    for i in (0, 77, bench.STREAM_ELEMENTS - 1):
        a = np.array([[i + u] * 4 for u in range(bench.UNROLL)], np.float64)
        for _ in range(bench.FMA_STEPS):
            a = a * m + 1e-3 * (i & 7)
        assert abs(got[i] - a.sum()) < 1e-4 * abs(a.sum())


def test_split_edits_change_the_packed_kernel(bench):
    rng = np.random.default_rng(1)
    a0 = rng.standard_normal((128, 256)).astype(np.float32)
    b0 = rng.standard_normal((256, 256)).astype(np.float32)
    results, sources = {}, {}
    for label, edit in (("compiled", None), ("no products", bench.no_products),
                        ("no fetches", bench.no_fetches)):
        g = ff.Graph()
        with g.as_default():
            a = ff.placeholder(a0.shape, name="a")
            y = ff.matmul(a, ff.constant(b0))
        sess = ff.Session(g)
        if edit is None:
            fn = sess.compile([y], feeds=[a])
        else:
            with bench.edited("matmul_packed.glsl.j2", edit):
                fn = sess.compile([y], feeds=[a])
        (packed,) = [k for k in fn.kernels if k.template == "matmul_packed.glsl.j2"]
        sources[label] = body(packed)
        results[label] = fn(a0)[0]
    np.testing.assert_allclose(results["compiled"], a0.astype(np.float64) @ b0,
                               rtol=1e-4, atol=1e-3)
    assert len(bench.PRODUCT.findall(sources["compiled"])) >= 8
    assert not bench.PRODUCT.findall(sources["no products"])
    assert not bench.FETCH.findall(sources["no fetches"])
    for label in ("no products", "no fetches"):
        assert not np.allclose(results[label], results["compiled"])
    # the edit is undone on leaving: the next compile is the template's again
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(a0.shape, name="a")
        y = ff.matmul(a, ff.constant(b0))
    fn = ff.Session(g).compile([y], feeds=[a])
    (packed,) = [k for k in fn.kernels if k.template == "matmul_packed.glsl.j2"]
    assert body(packed) == sources["compiled"]
