"""ONNX DFT (frontend/onnx/spectral.py: matmuls with constant cosine and sine
matrices) on GL against numpy's FFT: real and complex signals, axes, onesided,
inverse, the real inverse of one-sided frequencies, dft_length padding and truncating;
and against onnxruntime for opset 20's axis input."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.onnx.helpers import assert_close
from tests.onnx.test_import_ops import check, make_model, node, randn

pytestmark = pytest.mark.usefixtures("gl")


def _run(model, x):
    imported = ff.onnx.load(model)
    return ff.Session(imported.graph).run(imported.outputs[0], {"x": x})


def _as_pairs(z):
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


@pytest.mark.parametrize("complex_input", [False, True])
@pytest.mark.parametrize("axis, length, onesided", [(1, None, 0), (2, None, 1), (1, 9, 0),
                                                    (2, 5, 0), (1, 6, 1)])
def test_forward(complex_input, axis, length, onesided):
    x = randn(2, 7, 6, 2 if complex_input else 1)
    signal = x[..., 0] + 1j * x[..., 1] if complex_input else x[..., 0]
    inputs = ["x", "n"] if length else ["x"]
    inits = {"n": np.array(length, np.int64)} if length else None
    model = make_model([node("DFT", inputs, axis=axis, onesided=onesided)], {"x": x}, ["y"],
                       inits, opset=17)
    want = np.fft.fft(signal, n=length, axis=axis)
    if onesided:
        want = np.take(want, range(want.shape[axis] // 2 + 1), axis=axis)
    assert_close(_run(model, x), _as_pairs(want))


def test_inverse():
    x = randn(3, 8, 2)
    model = make_model([node("DFT", ["x"], axis=1, inverse=1)], {"x": x}, ["y"], opset=17)
    assert_close(_run(model, x), _as_pairs(np.fft.ifft(x[..., 0] + 1j * x[..., 1], axis=1)))


@pytest.mark.parametrize("length", [None, 9])
def test_real_inverse_of_onesided_frequencies(length):
    x = randn(2, 5, 2)
    inputs = ["x", "n"] if length else ["x"]
    inits = {"n": np.array(length, np.int64)} if length else None
    model = make_model([node("DFT", inputs, axis=1, inverse=1, onesided=1)], {"x": x}, ["y"],
                       inits, opset=17)
    want = np.fft.irfft(x[..., 0] + 1j * x[..., 1], n=length, axis=1)[..., None]
    assert_close(_run(model, x), want.astype(np.float32))


def test_opset_20_axis_input_against_onnxruntime():
    check([node("DFT", ["x", "", "axis"])], {"x": randn(2, 6, 5, 1)},
          initializers={"axis": np.array(-3, np.int64)}, opset=20)
