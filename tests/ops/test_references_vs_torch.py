"""fragflow's numpy references for convolution, pooling, resize, LRN and batch
normalization checked against an independent implementation: torch on the CPU.

Every case runs the graph on the numpy executor (ff.Session(g, backend="numpy", passes=[]), no GL)
and the same computation in torch, in float64 from the same float32 inputs. Torch is
NCHW / OIHW and pads symmetrically, so the test transposes layouts and computes
TensorFlow's SAME padding itself (its own formula, not fragflow's), padding with F.pad
first when it is asymmetric.

Tolerances (fragflow computes in float32, torch here in float64):
- sums of products (convs, their gradients): |a - e| <= 1e-4 * |e| + 1e-4 * s, where s
  is the same op on |inputs| (the sum of |terms|: cancellation can make e tiny);
- averages, interpolation, LRN, batch norm: 1e-5 relative, with atol 1e-5 times the
  largest |input| (batch norm: times the size of its terms), again for results near
  zero by cancellation;
- max / min pooling and nearest-neighbour resize: exactly equal (they copy a value);
- gradients of pools and resizes (sums of a few dy): 1e-5 relative, atol 1e-5 times
  |dy|'s largest times the most terms one input can gather (8, 16); LRN's: 1e-4.

Gradients (ff.gradients with grad_ys against torch.autograd) check the references of
conv*_backprop_input / _filter, max_pool(3d)_grad, avg_pool(3d)_grad, the resize
gradients and lrn_grad as well.

Two modes have no torch.nn.functional.interpolate equivalent: TF1's bilinear without
flags (src = o * in / out, no half-pixel offset) and nearest with align_corners (round
half away from zero). Both are compared through grid_sample at the same coordinates
instead (see tf1_bilinear_grid, align_corners_nearest_grid); nothing is skipped.

torch is not a dependency of fragflow: these tests skip when it is absent. .ci/run
installs it (torch==2.13.0, the CPU build) so CI runs them.
"""
import numpy as np
import pytest

import fragflow as ff

torch = pytest.importorskip(
    "torch", reason="torch (CPU) is not installed: pip install torch==2.13.0 to cross-check "
                    "the numpy references against it")
F = torch.nn.functional

CONV_RTOL = 1e-4
RTOL = 1e-5


# -- helpers -----------------------------------------------------------------------
def rand(rng, shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def run_ref(build, *arrays, grads=None):
    """fragflow's numpy executor on placeholders fed with arrays: y = build(*xs), and
    with grads (an array shaped like y) also d(sum(y * grads))/d each input."""
    g = ff.Graph()
    with g.as_default():
        xs = [ff.placeholder(a.shape) for a in arrays]
        y = build(*xs)
        fetches = [y]
        if grads is not None:
            fetches += list(ff.gradients(y, xs, grad_ys=ff.constant(grads)))
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        out = sess.run(fetches, dict(zip(xs, arrays)))
    return out if grads is not None else out[0]


def run_torch(fn, *arrays, grads=None):
    """fn over float64 torch tensors of arrays (and with grads, the input gradients of
    sum(fn(...) * grads) by autograd), as numpy float64."""
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=grads is not None)
          for a in arrays]
    y = fn(*ts)
    if grads is None:
        return y.detach().numpy()
    dxs = torch.autograd.grad(y, ts, grad_outputs=torch.tensor(grads, dtype=torch.float64))
    return [y.detach().numpy()] + [d.numpy() for d in dxs]


def check(actual, expected, rtol, atol=0.0, what=""):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == np.float32, f"{what}: dtype {actual.dtype}"
    diff = np.abs(actual.astype(np.float64) - expected)
    bound = atol + rtol * np.abs(expected)
    bad = ~(diff <= bound)
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {bad.sum()} of {bad.size} differ; first at {idx}: fragflow "
            f"{actual[idx]!r}, torch {expected[idx]!r} (|diff| {diff[idx]:.3g} > "
            f"{bound[idx]:.3g}); max |diff| {diff.max():.3g}")


def check_exact(actual, expected, what=""):
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    bad = actual.astype(np.float64) != expected
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} differ; first at {idx}: "
                             f"fragflow {actual[idx]!r}, torch {expected[idx]!r}")


def tf_same_pads(size, k, stride, dilation=1):
    """TensorFlow's SAME rule: out = ceil(size / stride), the extra put after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def pads_for(spatial, ksize, strides, dilations, padding):
    """((before, after), ...) per spatial axis."""
    if padding == "VALID":
        return [(0, 0)] * len(spatial)
    if padding == "SAME":
        return [tf_same_pads(n, k, s, r)
                for n, k, s, r in zip(spatial, ksize, strides, dilations)]
    return [tuple(p) for p in padding]


def torch_pad(x, pads, value=0.0):
    """F.pad of an NC* tensor by per-spatial-axis (before, after) pairs (F.pad lists the
    last axis first)."""
    flat = [p for pair in reversed(pads) for p in pair]
    if not any(flat):
        return x
    return F.pad(x, flat, value=value)


def to_nc(x):
    """NHWC / NDHWC -> NCHW / NCDHW."""
    return x.permute(0, x.dim() - 1, *range(1, x.dim() - 1))


def to_nhwc(x):
    return x.permute(0, *range(2, x.dim()), 1)


def sum_scale(fn, *arrays):
    """The op on |inputs| (torch, float64): the sum of |terms| for the conv tolerance."""
    return run_torch(fn, *[np.abs(a) for a in arrays])


# -- conv2d ----------------------------------------------------------------------------
# (x shape, filter shape HWIO, strides, padding, dilations)
CONV2D_CASES = [
    ((2, 7, 9, 3), (3, 3, 3, 5), 1, "SAME", 1),
    ((2, 7, 9, 3), (3, 3, 3, 5), 1, "VALID", 1),
    ((1, 10, 11, 4), (3, 2, 4, 8), 2, "SAME", 1),          # strides not dividing sizes
    ((1, 10, 11, 4), (3, 2, 4, 8), (3, 2), "VALID", 1),
    ((2, 8, 8, 2), (4, 4, 2, 3), 3, "SAME", 1),            # asymmetric SAME padding
    ((1, 9, 12, 3), (3, 3, 3, 4), 1, "SAME", 2),           # dilation
    ((1, 11, 10, 2), (2, 3, 2, 3), 1, "VALID", (3, 2)),
    ((1, 6, 7, 5), (1, 1, 5, 7), 2, "SAME", 1),            # 1x1
    ((2, 7, 6, 3), (3, 3, 3, 2), 2, [(1, 2), (0, 3)], 1),  # explicit padding
    ((1, 5, 5, 1), (5, 5, 1, 1), 1, "SAME", 1),            # filter as large as the input
]


def conv2d_torch(strides, padding, dilations, x_shape, w_shape):
    s = strides if isinstance(strides, tuple) else (strides, strides)
    r = dilations if isinstance(dilations, tuple) else (dilations, dilations)
    pads = pads_for(x_shape[1:3], w_shape[:2], s, r, padding)

    def fn(x, w):
        y = F.conv2d(torch_pad(to_nc(x), pads), w.permute(3, 2, 0, 1), stride=s,
                     dilation=r)
        return to_nhwc(y)
    return fn


@pytest.mark.parametrize("x_shape,w_shape,strides,padding,dilations", CONV2D_CASES)
def test_conv2d(x_shape, w_shape, strides, padding, dilations):
    rng = np.random.default_rng(1)
    x, w = rand(rng, x_shape), rand(rng, w_shape)
    fn = conv2d_torch(strides, padding, dilations, x_shape, w_shape)
    want = run_torch(fn, x, w)
    dy = rand(rng, want.shape)
    y, dx, dw = run_ref(lambda a, b: ff.conv2d(a, b, strides=strides, padding=padding,
                                               dilations=dilations), x, w, grads=dy)
    _, tdx, tdw = run_torch(fn, x, w, grads=dy.astype(np.float64))
    scale = sum_scale(fn, x, w)
    check(y, want, CONV_RTOL, CONV_RTOL * scale, "conv2d")
    # the gradients are conv2d_backprop_input / conv2d_backprop_filter's references
    _, dx_scale, dw_scale = run_torch(fn, np.abs(x), np.abs(w), grads=np.abs(dy))
    check(dx, tdx, CONV_RTOL, CONV_RTOL * dx_scale, "conv2d_backprop_input")
    check(dw, tdw, CONV_RTOL, CONV_RTOL * dw_scale, "conv2d_backprop_filter")


def test_conv1d():
    rng = np.random.default_rng(2)
    x, w = rand(rng, (2, 13, 3)), rand(rng, (4, 3, 5))
    for stride, padding in ((1, "SAME"), (3, "SAME"), (2, "VALID")):
        pads = pads_for((13,), (4,), (stride,), (1,), padding)
        fn = lambda a, b: to_nhwc(F.conv1d(torch_pad(to_nc(a), pads), b.permute(2, 1, 0),
                                           stride=stride))
        y = run_ref(lambda a, b: ff.conv1d(a, b, stride=stride, padding=padding), x, w)
        check(y, run_torch(fn, x, w), CONV_RTOL, CONV_RTOL * sum_scale(fn, x, w),
              f"conv1d stride {stride} {padding}")


# -- depthwise_conv2d --------------------------------------------------------------------
# (x shape, filter shape [H, W, C, M], strides, padding, dilations)
DEPTHWISE_CASES = [
    ((2, 7, 8, 3), (3, 3, 3, 1), 1, "SAME", 1),
    ((1, 9, 10, 3), (3, 3, 3, 2), 2, "SAME", 1),           # channel multiplier 2
    ((1, 9, 10, 2), (2, 3, 2, 3), 3, "VALID", 1),          # multiplier 3, stride 3
    ((1, 10, 9, 4), (3, 3, 4, 2), 1, "SAME", 2),           # dilation 2
    ((2, 6, 6, 5), (4, 4, 5, 4), 2, "SAME", 1),            # asymmetric SAME
]


@pytest.mark.parametrize("x_shape,w_shape,strides,padding,dilations", DEPTHWISE_CASES)
def test_depthwise_conv2d(x_shape, w_shape, strides, padding, dilations):
    rng = np.random.default_rng(3)
    x, w = rand(rng, x_shape), rand(rng, w_shape)
    kh, kw, c, m = w_shape
    s, r = (strides,) * 2, (dilations,) * 2
    pads = pads_for(x_shape[1:3], (kh, kw), s, r, padding)

    def fn(a, b):
        # torch groups=C: output channel c * M + m uses weight row c * M + m, as TF's
        weight = b.reshape(kh, kw, c * m).permute(2, 0, 1).unsqueeze(1)
        return to_nhwc(F.conv2d(torch_pad(to_nc(a), pads), weight, stride=s, dilation=r,
                                groups=c))
    want = run_torch(fn, x, w)
    dy = rand(rng, want.shape)
    y, dx, dw = run_ref(lambda a, b: ff.depthwise_conv2d(a, b, strides=strides,
                                                         padding=padding,
                                                         dilations=dilations),
                        x, w, grads=dy)
    _, tdx, tdw = run_torch(fn, x, w, grads=dy.astype(np.float64))
    check(y, want, CONV_RTOL, CONV_RTOL * sum_scale(fn, x, w), "depthwise_conv2d")
    _, dx_scale, dw_scale = run_torch(fn, np.abs(x), np.abs(w), grads=np.abs(dy))
    check(dx, tdx, CONV_RTOL, CONV_RTOL * dx_scale, "depthwise_conv2d_backprop_input")
    check(dw, tdw, CONV_RTOL, CONV_RTOL * dw_scale, "depthwise_conv2d_backprop_filter")


def test_separable_conv2d():
    rng = np.random.default_rng(4)
    x, dw, pw = rand(rng, (1, 9, 8, 3)), rand(rng, (3, 3, 3, 2)), rand(rng, (1, 1, 6, 4))
    pads = pads_for((9, 8), (3, 3), (2, 2), (1, 1), "SAME")

    def fn(a, b, p):
        h = F.conv2d(torch_pad(to_nc(a), pads),
                     b.reshape(3, 3, 6).permute(2, 0, 1).unsqueeze(1), stride=2, groups=3)
        return to_nhwc(F.conv2d(h, p.permute(3, 2, 0, 1)))
    y = run_ref(lambda a, b, p: ff.separable_conv2d(a, b, p, strides=2, padding="SAME"),
                x, dw, pw)
    check(y, run_torch(fn, x, dw, pw), CONV_RTOL, CONV_RTOL * sum_scale(fn, x, dw, pw),
          "separable_conv2d")


# -- conv2d_transpose ---------------------------------------------------------------------
# (output_shape of the transpose = the forward conv's input, filter HWIO of the forward
# conv [H, W, out_channels of the transpose, in_channels], strides, padding, dilations)
TRANSPOSE_CASES = [
    ((2, 8, 8, 3), (3, 3, 3, 4), 2, "SAME", 1),
    ((1, 9, 11, 2), (3, 3, 2, 5), 2, "SAME", 1),          # odd sizes: asymmetric SAME
    ((1, 10, 9, 3), (4, 3, 3, 2), 3, "VALID", 1),         # stride not dividing: a gap
    ((1, 7, 8, 2), (3, 3, 2, 3), 1, "SAME", 2),           # dilation
    ((1, 6, 7, 4), (2, 2, 4, 1), (2, 3), "SAME", 1),
]


@pytest.mark.parametrize("out_shape,w_shape,strides,padding,dilations", TRANSPOSE_CASES)
def test_conv2d_transpose(out_shape, w_shape, strides, padding, dilations):
    rng = np.random.default_rng(5)
    s = strides if isinstance(strides, tuple) else (strides, strides)
    r = (dilations, dilations)
    pads = pads_for(out_shape[1:3], w_shape[:2], s, r, padding)
    in_size = [(n + b + a - (k - 1) * rr - 1) // ss + 1 for n, (b, a), k, ss, rr
               in zip(out_shape[1:3], pads, w_shape[:2], s, r)]
    x, w = rand(rng, (out_shape[0], *in_size, w_shape[3])), rand(rng, w_shape)

    def fn(a, b):
        # torch's conv_transpose2d with no padding gives the full (padded) extent
        # (in - 1) * s + k_eff; the padded input is that, plus rows no window reached
        # (zeros), and TF's result is the crop [before : before + size].
        full = F.conv_transpose2d(to_nc(a), b.permute(3, 2, 0, 1), stride=s, dilation=r)
        extra = [(0, b_ + n + a_ - m) for (b_, a_), n, m
                 in zip(pads, out_shape[1:3], full.shape[2:])]
        full = torch_pad(full, extra)
        return to_nhwc(full[:, :, pads[0][0]:pads[0][0] + out_shape[1],
                            pads[1][0]:pads[1][0] + out_shape[2]])
    y = run_ref(lambda a, b: ff.conv2d_transpose(a, b, out_shape, strides=strides,
                                                 padding=padding, dilations=dilations),
                x, w)
    check(y, run_torch(fn, x, w), CONV_RTOL, CONV_RTOL * sum_scale(fn, x, w),
          "conv2d_transpose")


# -- conv3d ------------------------------------------------------------------------------
CONV3D_CASES = [
    ((1, 5, 6, 7, 2), (3, 3, 3, 2, 4), 1, "SAME", 1),
    ((2, 6, 7, 5, 3), (2, 3, 2, 3, 2), 2, "SAME", 1),       # asymmetric SAME, stride 2
    ((1, 7, 6, 8, 2), (3, 2, 3, 2, 3), (2, 1, 3), "VALID", 1),
    ((1, 7, 7, 6, 1), (2, 2, 2, 1, 2), 1, "SAME", 2),       # dilation
]


@pytest.mark.parametrize("x_shape,w_shape,strides,padding,dilations", CONV3D_CASES)
def test_conv3d(x_shape, w_shape, strides, padding, dilations):
    rng = np.random.default_rng(6)
    x, w = rand(rng, x_shape), rand(rng, w_shape)
    s = strides if isinstance(strides, tuple) else (strides,) * 3
    r = (dilations,) * 3
    pads = pads_for(x_shape[1:4], w_shape[:3], s, r, padding)

    def fn(a, b):
        return to_nhwc(F.conv3d(torch_pad(to_nc(a), pads), b.permute(4, 3, 0, 1, 2),
                                stride=s, dilation=r))
    want = run_torch(fn, x, w)
    dy = rand(rng, want.shape)
    y, dx, dw = run_ref(lambda a, b: ff.conv3d(a, b, strides=strides, padding=padding,
                                               dilations=dilations), x, w, grads=dy)
    _, tdx, tdw = run_torch(fn, x, w, grads=dy.astype(np.float64))
    check(y, want, CONV_RTOL, CONV_RTOL * sum_scale(fn, x, w), "conv3d")
    _, dx_scale, dw_scale = run_torch(fn, np.abs(x), np.abs(w), grads=np.abs(dy))
    check(dx, tdx, CONV_RTOL, CONV_RTOL * dx_scale, "conv3d_backprop_input")
    check(dw, tdw, CONV_RTOL, CONV_RTOL * dw_scale, "conv3d_backprop_filter")


# -- pooling -------------------------------------------------------------------------------
# (x shape, ksize, strides, padding); 2-D and 3-D
POOL2D_CASES = [
    ((2, 7, 9, 3), 2, 2, "VALID"),
    ((2, 7, 9, 3), 3, 2, "SAME"),              # stride not dividing, asymmetric SAME
    ((1, 8, 8, 2), 3, 3, "SAME"),
    ((1, 10, 7, 4), (3, 2), (2, 3), "SAME"),
    ((1, 10, 7, 4), (4, 1), (1, 2), "VALID"),
    ((1, 6, 6, 2), 4, 1, "SAME"),              # pad 1 before, 2 after
    ((2, 7, 8, 2), 3, 2, [(1, 2), (2, 0)]),    # explicit, asymmetric
    ((1, 3, 3, 1), 5, 1, "SAME"),              # window larger than the image
]
POOL3D_CASES = [
    ((1, 5, 6, 7, 2), 2, 2, "VALID"),
    ((2, 5, 6, 7, 3), 3, 2, "SAME"),
    ((1, 6, 5, 7, 2), (2, 3, 2), (3, 1, 2), "SAME"),
]


def _tuple(v, d):
    return v if isinstance(v, tuple) else (v,) * d


def torch_max_pool(x_shape, ksize, strides, padding):
    d = len(x_shape) - 2
    k, s = _tuple(ksize, d), _tuple(strides, d)
    pads = pads_for(x_shape[1:-1], k, s, (1,) * d, padding)
    pool = F.max_pool2d if d == 2 else F.max_pool3d
    # padding never wins: pad with -inf (torch's own padding is symmetric, <= k / 2)
    return lambda x: to_nhwc(pool(torch_pad(to_nc(x), pads, -float("inf")), k, s))


def torch_avg_pool(x_shape, ksize, strides, padding):
    d = len(x_shape) - 2
    k, s = _tuple(ksize, d), _tuple(strides, d)
    pads = pads_for(x_shape[1:-1], k, s, (1,) * d, padding)
    pool = F.avg_pool2d if d == 2 else F.avg_pool3d
    if all(b == a and 2 * b <= kk for (b, a), kk in zip(pads, k)):
        # symmetric: torch's own padding with count_include_pad=False divides by the
        # number of real elements, as TensorFlow does
        p = tuple(b for b, _ in pads)
        return lambda x: to_nhwc(pool(to_nc(x), k, s, padding=p, count_include_pad=False))

    def fn(x):
        # asymmetric (torch cannot pad so): mean of the zero-padded x over the mean of
        # the zero-padded ones, i.e. the window sum over the real-element count
        xs = to_nc(x)
        ones = torch.ones_like(xs[:, :1])
        return to_nhwc(pool(torch_pad(xs, pads), k, s) / pool(torch_pad(ones, pads), k, s))
    return fn


@pytest.mark.parametrize("x_shape,ksize,strides,padding", POOL2D_CASES + POOL3D_CASES)
def test_max_min_pool(x_shape, ksize, strides, padding):
    rng = np.random.default_rng(7)
    x = rand(rng, x_shape)
    three_d = len(x_shape) == 5
    max_fn = torch_max_pool(x_shape, ksize, strides, padding)
    want = run_torch(max_fn, x)
    dy = rand(rng, want.shape)
    ff_max = ff.max_pool3d if three_d else ff.max_pool
    y, dx = run_ref(lambda a: ff_max(a, ksize, strides, padding), x, grads=dy)
    check_exact(y, want, "max_pool")
    # max_pool_grad: dy to each window's argmax (random floats: no ties)
    _, tdx = run_torch(max_fn, x, grads=dy.astype(np.float64))
    check(dx, tdx, RTOL, RTOL * np.abs(dy).max(), "max_pool_grad")
    if not three_d:     # min_pool (2-D only): torch has none, so -max_pool(-x)
        y = run_ref(lambda a: ff.min_pool(a, ksize, strides, padding), x)
        check_exact(y, run_torch(lambda a: -max_fn(-a), x), "min_pool")


@pytest.mark.parametrize("x_shape,ksize,strides,padding", POOL2D_CASES + POOL3D_CASES)
def test_avg_pool(x_shape, ksize, strides, padding):
    rng = np.random.default_rng(8)
    x = rand(rng, x_shape)
    fn = torch_avg_pool(x_shape, ksize, strides, padding)
    want = run_torch(fn, x)
    dy = rand(rng, want.shape)
    ff_avg = ff.avg_pool3d if len(x_shape) == 5 else ff.avg_pool
    y, dx = run_ref(lambda a: ff_avg(a, ksize, strides, padding), x, grads=dy)
    _, tdx = run_torch(fn, x, grads=dy.astype(np.float64))
    check(y, want, RTOL, RTOL * np.abs(x).max(), "avg_pool")
    check(dx, tdx, RTOL, RTOL * np.abs(dy).max() * 8, "avg_pool_grad")


# -- resize --------------------------------------------------------------------------------
# (input shape, output size): up, down, mixed, to and from size 1
RESIZE_CASES = [
    ((2, 4, 5, 3), (7, 9)),
    ((1, 9, 7, 2), (4, 3)),
    ((1, 5, 6, 1), (10, 4)),
    ((1, 3, 4, 2), (8, 8)),      # exactly 2x along one axis (torch's special case)
    ((1, 1, 5, 2), (3, 1)),
    ((1, 6, 6, 1), (6, 6)),      # identity
    ((1, 3, 5, 2), (5, 3)),      # align_corners nearest: ties (src 0.5, 1.5) both ways
]


def _resize_ref(op, x, size, align_corners, half_pixel_centers, grads=None):
    return run_ref(lambda a: op(a, size, align_corners=align_corners,
                                half_pixel_centers=half_pixel_centers), x, grads=grads)


def tf1_bilinear_grid(in_hw, out_hw):
    """TF1's bilinear without flags samples at src = o * in / out: torch's interpolate
    has no such mode, but grid_sample(align_corners=True) samples at any pixel
    coordinate (border padding clamps past the last row as TF's upper index does)."""
    axes = []
    for n, m in zip(in_hw, out_hw):
        src = np.arange(m, dtype=np.float64) * n / m
        axes.append(2 * src / (n - 1) - 1 if n > 1 else np.zeros(m))
    gy, gx = np.meshgrid(axes[0], axes[1], indexing="ij")
    return torch.tensor(np.stack([gx, gy], axis=-1)[None], dtype=torch.float64)


@pytest.mark.parametrize("x_shape,size", RESIZE_CASES)
def test_resize_bilinear(x_shape, size):
    rng = np.random.default_rng(9)
    x = rand(rng, x_shape)
    dy = rand(rng, (x_shape[0], *size, x_shape[3]))
    atol = RTOL * np.abs(x).max()
    grid = tf1_bilinear_grid(x_shape[1:3], size).expand(x_shape[0], -1, -1, -1)
    variants = {
        # half_pixel_centers: src = (o + 0.5) * in / out - 0.5, torch's align_corners=False
        (False, True): lambda a: to_nhwc(F.interpolate(to_nc(a), size=size, mode="bilinear",
                                                       align_corners=False)),
        # align_corners: src = o * (in - 1) / (out - 1), torch's align_corners=True
        (True, False): lambda a: to_nhwc(F.interpolate(to_nc(a), size=size, mode="bilinear",
                                                       align_corners=True)),
        (False, False): lambda a: to_nhwc(F.grid_sample(to_nc(a), grid, mode="bilinear",
                                                        padding_mode="border",
                                                        align_corners=True)),
    }
    for (ac, hp), fn in variants.items():
        y, dx = _resize_ref(ff.resize_bilinear, x, size, ac, hp, grads=dy)
        _, tdx = run_torch(fn, x, grads=dy.astype(np.float64))
        what = f"resize_bilinear align_corners={ac} half_pixel_centers={hp}"
        check(y, run_torch(fn, x), RTOL, atol, what)
        check(dx, tdx, RTOL, RTOL * np.abs(dy).max() * 16, what + " (gradient)")


def align_corners_nearest_grid(in_hw, out_hw):
    """A grid_sample grid for TF1's nearest with align_corners: index = round(src), src =
    o * (in - 1) / (out - 1), ties away from zero. torch's nearest modes take no
    align_corners; grid_sample(mode="nearest", align_corners=True) rounds the pixel
    coordinate src, but ties to even. src >= 0, so nudging every src up by 1e-6 pixel
    makes each tie round up (away from zero) and moves nothing else."""
    axes = []
    for n, m in zip(in_hw, out_hw):
        o = np.arange(m)
        src = o * (n - 1) / (m - 1) if m > 1 else np.zeros(1)
        ties = (2 * src) % 2 == 1
        # TF computes src in float32: where it does not meet a tie exactly, the nudge
        # could disagree with it, and the case would have to go
        s32 = o.astype(np.float32) * (np.float32(n - 1) / np.float32(max(m - 1, 1)))
        assert (s32[ties] == src[ties]).all(), "a tie float32 misses: pick other sizes"
        axes.append(2 * (src + 1e-6) / (n - 1) - 1 if n > 1 else np.zeros(m))
    gy, gx = np.meshgrid(axes[0], axes[1], indexing="ij")
    return torch.tensor(np.stack([gx, gy], axis=-1)[None], dtype=torch.float64)


@pytest.mark.parametrize("x_shape,size", RESIZE_CASES)
def test_resize_nearest_neighbor(x_shape, size):
    rng = np.random.default_rng(10)
    x = rand(rng, x_shape)
    dy = rand(rng, (x_shape[0], *size, x_shape[3]))
    variants = {
        # no flags: index = floor(o * in / out), torch's mode="nearest"
        (False, False): lambda a: to_nhwc(F.interpolate(to_nc(a), size=size,
                                                        mode="nearest")),
        # half_pixel_centers: floor((o + 0.5) * in / out), torch's "nearest-exact"
        (False, True): lambda a: to_nhwc(F.interpolate(to_nc(a), size=size,
                                                       mode="nearest-exact")),
    }
    grid = align_corners_nearest_grid(x_shape[1:3], size).expand(x_shape[0], -1, -1, -1)
    variants[(True, False)] = lambda a: to_nhwc(F.grid_sample(
        to_nc(a), grid, mode="nearest", padding_mode="border", align_corners=True))
    for (ac, hp), fn in variants.items():
        what = f"resize_nearest_neighbor align_corners={ac} half_pixel_centers={hp}"
        y, dx = _resize_ref(ff.resize_nearest_neighbor, x, size, ac, hp, grads=dy)
        check_exact(y, run_torch(fn, x), what)
        _, tdx = run_torch(fn, x, grads=dy.astype(np.float64))
        check(dx, tdx, RTOL, RTOL * np.abs(dy).max() * 16, what + " (gradient)")
    # int32 images are copied exactly too
    xi = rng.integers(-1000, 1000, size=x_shape).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x_shape, dtype="int32")
        yi = ff.resize_nearest_neighbor(p, size)
    got = ff.Session(g, backend="numpy", passes=[]).run(yi, {p: xi})
    assert got.dtype == np.int32
    want = to_nhwc(F.interpolate(to_nc(torch.tensor(xi, dtype=torch.float64)), size=size,
                                 mode="nearest")).numpy()
    check_exact(got, want, "resize_nearest_neighbor int32")


# -- local response normalization ------------------------------------------------------------
# (x shape, depth_radius, bias, alpha, beta)
LRN_CASES = [
    ((2, 3, 4, 7), 2, 1.0, 1e-1, 0.75),
    ((1, 4, 3, 5), 5, 1.0, 1.0, 0.5),       # TF's defaults; the window exceeds C
    ((1, 2, 2, 9), 1, 2.0, 0.3, 1.0),
    ((2, 2, 3, 4), 0, 0.5, 2.0, 0.25),      # depth_radius 0: each channel alone
]


@pytest.mark.parametrize("x_shape,radius,bias,alpha,beta", LRN_CASES)
def test_local_response_normalization(x_shape, radius, bias, alpha, beta):
    rng = np.random.default_rng(11)
    x = rand(rng, x_shape, -2.0, 2.0)
    dy = rand(rng, x_shape)
    size = 2 * radius + 1

    def fn(a):
        # torch: a / (k + alpha / size * sum over `size` channels centered on c) ** beta
        # (zero padding), so TF's alpha (no division) is torch's alpha * size
        return to_nhwc(F.local_response_norm(to_nc(a), size, alpha=alpha * size, beta=beta,
                                             k=bias))
    y, dx = run_ref(lambda a: ff.local_response_normalization(
        a, depth_radius=radius, bias=bias, alpha=alpha, beta=beta), x, grads=dy)
    _, tdx = run_torch(fn, x, grads=dy.astype(np.float64))
    check(y, run_torch(fn, x), RTOL, RTOL * np.abs(x).max(), "lrn")
    check(dx, tdx, 1e-4, 1e-4 * np.abs(dy).max(), "lrn_grad")


# -- batch normalization ---------------------------------------------------------------------
@pytest.mark.parametrize("x_shape", [(4, 5, 6, 3), (8, 7), (2, 3, 4, 5, 2)])
@pytest.mark.parametrize("affine", [(True, True), (False, True), (True, False),
                                    (False, False)])
def test_batch_normalization(x_shape, affine):
    rng = np.random.default_rng(12)
    c = x_shape[-1]
    x = rand(rng, x_shape, -3.0, 3.0)
    mean, var = rand(rng, (c,)), rand(rng, (c,), 0.05, 2.0)
    offset, scale = rand(rng, (c,)), rand(rng, (c,), -2.0, 2.0)
    use_offset, use_scale = affine
    eps = 1e-3

    def build(a, m, v, o, s):
        return ff.batch_normalization(a, m, v, o if use_offset else None,
                                      s if use_scale else None, eps)

    def fn(a, m, v, o, s):
        # torch normalizes channels on axis 1 with running statistics when not training
        y = F.batch_norm(to_nc(a), m, v, weight=s if use_scale else None,
                         bias=o if use_offset else None, training=False, eps=eps)
        return to_nhwc(y)
    arrays = (x, mean, var, offset, scale)
    y = run_ref(build, *arrays)
    want = run_torch(fn, *arrays)
    # atol: the size of the terms, |x - mean| * |scale| / sqrt(var + eps) + |offset|
    terms = ((np.abs(x) + np.abs(mean)) * (np.abs(scale) if use_scale else 1.0)
             / np.sqrt(var.astype(np.float64) + eps) + (np.abs(offset) if use_offset else 0))
    check(y, want, RTOL, RTOL * terms,
          f"batch_normalization offset={use_offset} scale={use_scale}")


def test_cases_cover_the_geometry():
    """The case lists exercise what the brief asks for: strides that do not divide the
    sizes, dilation > 1, channel multiplier > 1, asymmetric SAME padding."""
    assert any(d != 1 for *_, d in CONV2D_CASES)
    assert any(w[3] > 1 for _, w, *_ in DEPTHWISE_CASES)
    asym = [pads_for(x[1:3], w[:2], _tuple(s, 2), _tuple(r, 2), p)
            for x, w, s, p, r in CONV2D_CASES]
    assert any(b != a for pads in asym for b, a in pads)
    assert any(n % s for x, _, s, *_ in CONV2D_CASES if isinstance(s, int)
               for n in x[1:3])
