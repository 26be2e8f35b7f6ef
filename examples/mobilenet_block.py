"""Inference of a MobileNet-v1-style network at 96x96 with fused depthwise kernels.

Every depthwise-separable block is depthwise 3x3 + batch norm + relu6, then 1x1 conv +
batch norm + relu6. With fusion each of those is one kernel (batch norm folded into
the weights); the script prints the kernel count and the time per image against the
same graph with the fusion passes turned off, and checks that both agree.

    python examples/mobilenet_block.py [--alpha 0.25] [--runs 5]
"""
import argparse
import collections
import re
import statistics
import time

import numpy as np

import fragflow as ff

# (stride, output channels at alpha = 1) of MobileNet v1's 13 separable blocks
BLOCKS = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512), (1, 512),
          (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]


def batch_norm(x, channels, rng):
    mean = rng.normal(0, 0.1, channels).astype(np.float32)
    variance = rng.uniform(0.5, 1.5, channels).astype(np.float32)
    offset = rng.normal(0, 0.1, channels).astype(np.float32)
    scale = rng.uniform(0.8, 1.2, channels).astype(np.float32)
    return ff.batch_normalization(x, mean, variance, offset, scale, 1e-3)


def he(shape, fan_in, rng):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def mobilenet(x, alpha, classes, rng):
    channels = int(32 * alpha)
    with ff.name_scope("stem"):
        h = ff.conv2d(x, he((3, 3, 3, channels), 27, rng), strides=2, padding="SAME")
        h = ff.relu6(batch_norm(h, channels, rng))
    for i, (stride, out) in enumerate(BLOCKS):
        out = int(out * alpha)
        with ff.name_scope(f"block{i + 1}"):
            h = ff.depthwise_conv2d(h, he((3, 3, channels, 1), 9, rng), strides=stride,
                                    padding="SAME")
            h = ff.relu6(batch_norm(h, channels, rng))
            h = ff.conv2d(h, he((1, 1, channels, out), channels, rng), padding="SAME")
            h = ff.relu6(batch_norm(h, out, rng))
        channels = out
    with ff.name_scope("head"):
        h = ff.mean(h, axis=(1, 2))
        logits = h @ ff.constant(he((channels, classes), channels, rng)) + \
            ff.constant(np.zeros(classes, np.float32))
        return ff.softmax(logits)


def glsl_code(source):
    """A kernel's GLSL without its header and comments (which name graph values): two
    kernels with the same code could share one linked shader."""
    return re.sub(r"//[^\n]*", "", source.split("// -- end of header --", 1)[-1])


def timed(fn, image, runs):
    fn(image)                                   # first run: shader compiles
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        (out,) = fn(image)
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--alpha", type=float, default=0.25, help="width multiplier")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    g = ff.Graph("mobilenet")
    with g.as_default():
        x = ff.placeholder((1, 96, 96, 3), name="image")
        probs = mobilenet(x, args.alpha, 100, rng)
    image = rng.uniform(0, 1, (1, 96, 96, 3)).astype(np.float32)
    unfused_passes = ["fold_constants", "cse", "simplify", "verify"]
    with ff.Session(g) as sess:
        fused = sess.compile([probs], feeds=[x])
        plain = sess.compile([probs], feeds=[x], passes=unfused_passes)
        out_fused, t_fused = timed(fused, image, args.runs)
        out_plain, t_plain = timed(plain, image, args.runs)
        depthwise = [k for k in fused.kernels if k.op == "fused_depthwise_conv2d"]
    info = ff.gl_info()
    print(f"MobileNet-v1 (alpha {args.alpha}) at 96x96 on {info['renderer']}")
    print(f"  fused:   {len(fused.kernels):3d} kernels ({len(depthwise)} fused depthwise), "
          f"{t_fused * 1e3:8.2f} ms per image")
    by_op = collections.Counter(k.op for k in fused.kernels)
    print("  fused kernels by op: " + ", ".join(f"{op} {n}" for op, n in by_op.most_common()))
    print(f"  distinct shader sources {len({k.source for k in fused.kernels})}, distinct "
          f"code without comments {len({glsl_code(k.source) for k in fused.kernels})}")
    print(f"  unfused: {len(plain.kernels):3d} kernels, {t_plain * 1e3:8.2f} ms per image")
    print(f"  speed-up from fusion: {t_plain / t_fused:.2f}x")
    assert np.allclose(out_fused, out_plain, rtol=1e-4, atol=1e-6), "fused != unfused"
    print(f"  fused and unfused outputs agree (max |diff| "
          f"{float(np.max(np.abs(out_fused - out_plain))):.2g}); top class "
          f"{int(np.argmax(out_fused))}")


if __name__ == "__main__":
    main()
