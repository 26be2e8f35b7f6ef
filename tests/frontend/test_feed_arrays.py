"""Feeds from other array libraries: torch CPU tensors, anything with __dlpack__ or
__array__; used in place when already C-contiguous and of the tensor's dtype."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.session import _feed_array

torch = pytest.importorskip("torch", reason="torch not installed (pip: torch)")


def graph(dtype="float32"):
    g = ff.Graph("feeds")
    with g.as_default():
        x = ff.placeholder((None, 3), dtype, name="x")
        y = ff.relu(ff.cast(x, "float32") * 2.0 - 1.0)
    return g, x, y


def expected(a):
    return np.maximum(np.asarray(a, np.float64) * 2 - 1, 0).astype(np.float32)


class DlpackOnly:
    """Only the DLPack protocol: no __array__, no buffer protocol, no sequence."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class ArrayOnly:
    def __init__(self, array):
        self._array = array

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)


def test_contiguous_float32_torch_tensor_is_used_without_a_copy():
    _, x, _ = graph()
    t = torch.linspace(-2, 2, 12, dtype=torch.float32).reshape(4, 3)
    fed = _feed_array(x.value, t)
    assert fed.ctypes.data == t.data_ptr()      # the tensor's own memory
    t[0, 0] = 42.0                              # ...so it sees later writes
    assert fed[0, 0] == 42.0


def test_dlpack_only_object_is_used_without_a_copy():
    _, x, _ = graph()
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    fed = _feed_array(x.value, DlpackOnly(base))
    assert fed.ctypes.data == base.ctypes.data
    np.testing.assert_array_equal(fed, base)


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_torch_feeds_run_like_numpy_arrays(backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    g, x, y = graph()
    gen = torch.Generator().manual_seed(0)
    dense = torch.randn(5, 3, generator=gen)
    dense[0] = torch.tensor([0.0, -0.0, 0.5])          # edge values: zeros, the kink
    cases = {
        "contiguous": dense,
        "transposed (non-contiguous)": torch.randn(3, 5, generator=gen).T,  # strides (1, 5)
        "strided columns": torch.randn(4, 9, generator=gen)[:, ::3],
        "one row": dense[2:3],
        "float64, cast": dense.double(),
        "dlpack only": DlpackOnly(dense.numpy()),
        "__array__ only": ArrayOnly(dense.numpy()),
    }
    with ff.Session(g, backend=backend) as sess:
        for name, data in cases.items():
            reference = np.asarray(data.numpy() if isinstance(data, torch.Tensor) else
                                   np.asarray(data._array))
            out = sess.run(y, {x: data})
            np.testing.assert_allclose(out, expected(reference), rtol=1e-6, atol=1e-6,
                                       err_msg=name)


def test_non_contiguous_tensor_is_copied_in_c_order():
    _, x, _ = graph()
    t = torch.arange(30, dtype=torch.float32).reshape(3, 10)[:, ::4].T[:3].T   # (3, 3)
    assert not t.is_contiguous()
    fed = _feed_array(x.value, t)
    assert fed.flags.c_contiguous
    np.testing.assert_array_equal(fed, t.numpy())


def test_int64_tensor_into_int32_placeholder_is_range_checked():
    g, x, y = graph("int32")
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        out = sess.run(y, {x: torch.tensor([[-1, 0, 3]], dtype=torch.int64)})
        np.testing.assert_array_equal(out, expected([[-1, 0, 3]]))
        with pytest.raises(ff.FeedError, match="outside int32's range"):
            sess.run(y, {x: torch.tensor([[2**40, 0, 0]], dtype=torch.int64)})


@pytest.mark.parametrize("make, dtype, words", [
    (lambda: torch.ones(2, 3), "int32", ["'x'", "float32", "int32"]),
    (lambda: torch.ones(2, 3, dtype=torch.complex64), "float32", ["'x'", "complex64"]),
    (lambda: torch.ones(2, 3, dtype=torch.bfloat16), "float32", ["'x'", "BFloat16"]),
    (lambda: torch.ones(2, 3, requires_grad=True), "float32", ["'x'", "detach"]),
    (lambda: DlpackOnly(np.ones((2, 3), np.float64)), "bool", ["'x'", "float64", "bool"]),
])
def test_unusable_tensors_raise_feed_error_saying_why(make, dtype, words):
    g, x, y = graph(dtype)
    with ff.Session(g, backend="numpy", passes=[]) as sess, pytest.raises(ff.FeedError) as err:
        sess.run(y, {x: make()})
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_wrong_shape_torch_tensor_names_both_shapes():
    g, x, y = graph()
    with ff.Session(g, backend="numpy", passes=[]) as sess, pytest.raises(ff.FeedError) as err:
        sess.run(y, {x: torch.zeros(2, 4)})
    assert "(2, 4)" in str(err.value) and "(?, 3)" in str(err.value)
