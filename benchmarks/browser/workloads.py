"""The browser benchmark's workloads: each a fragflow graph to export, the arrays its
weights and data are made of (the same arrays go to TF.js: `tfjs` names the builder in
bench.js that makes the same computation from them), and its feeds.

Data that stays on the GPU between runs (the matmul's operands, the 4M floats) are
variables on both sides; an image or a batch fed per run is uploaded per run on both."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

import fragflow as ff

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0] + "/examples")
from mobilenet_block import BLOCKS  # noqa: E402  (13 separable blocks: stride, channels)


@dataclass
class Workload:
    name: str
    title: str
    graph: ff.Graph
    fetches: dict            # output name -> tensor (the first is compared with TF.js)
    feeds: dict              # placeholder -> array, fed every run
    arrays: dict             # name -> array, in the order bench.js's builder reads them
    tfjs: str                # bench.js builder
    options: dict = field(default_factory=dict)    # for the builder (strides, rates)


def _he(rng, shape, fan_in):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def mobilenet(alpha=0.25, classes=100) -> Workload:
    """MobileNet-v1 0.25 at 96x96 (batch norm folded: conv + bias + relu6), random
    weights, as examples/mobilenet_block.py builds it; the image is fed per run."""
    rng = np.random.default_rng(12)
    arrays = {}
    channels = int(32 * alpha)
    arrays["stem_w"] = _he(rng, (3, 3, 3, channels), 27)
    arrays["stem_b"] = rng.normal(0, 0.1, channels).astype(np.float32)
    for i, (_, out) in enumerate(BLOCKS):
        out = int(out * alpha)
        arrays[f"dw{i}_w"] = _he(rng, (3, 3, channels, 1), 9)
        arrays[f"dw{i}_b"] = rng.normal(0, 0.1, channels).astype(np.float32)
        arrays[f"pw{i}_w"] = _he(rng, (1, 1, channels, out), channels)
        arrays[f"pw{i}_b"] = rng.normal(0, 0.1, out).astype(np.float32)
        channels = out
    arrays["head_w"] = _he(rng, (channels, classes), channels)
    arrays["head_b"] = np.zeros(classes, np.float32)
    image = rng.uniform(0, 1, (1, 96, 96, 3)).astype(np.float32)
    g = ff.Graph("mobilenet")
    with g.as_default():
        x = ff.placeholder(image.shape, "float32", name="image")
        c = {k: ff.constant(v) for k, v in arrays.items()}
        with ff.name_scope("stem"):
            h = ff.relu6(ff.conv2d(x, c["stem_w"], strides=2, padding="SAME") + c["stem_b"])
        for i, (stride, _) in enumerate(BLOCKS):
            with ff.name_scope(f"block{i + 1}"):
                h = ff.depthwise_conv2d(h, c[f"dw{i}_w"], strides=stride, padding="SAME")
                h = ff.relu6(h + c[f"dw{i}_b"])
                h = ff.relu6(ff.conv2d(h, c[f"pw{i}_w"], padding="SAME") + c[f"pw{i}_b"])
        with ff.name_scope("head"):
            probs = ff.softmax(ff.mean(h, axis=(1, 2)) @ c["head_w"] + c["head_b"])
    return Workload("mobilenet", "MobileNet-v1 0.25, 96x96, one image", g,
                    {"probabilities": probs}, {x: image}, arrays, "mobilenet",
                    {"strides": [s for s, _ in BLOCKS]})


def cnn_training_step() -> Workload:
    """bench.py W13's model: conv(1->8)+relu, max pool, conv(8->16)+relu, dense 256->32
    relu, dense 32->10, mean sparse softmax cross-entropy; SGD 0.05; a batch of 64 8x8
    images and labels fed per step. Fetches the loss (before the step, as TF.js's
    minimize returns it)."""
    rng = np.random.default_rng(13)
    arrays = {"conv1_w": _he(rng, (3, 3, 1, 8), 9), "conv1_b": np.zeros(8, np.float32),
              "conv2_w": _he(rng, (3, 3, 8, 16), 72), "conv2_b": np.zeros(16, np.float32),
              "fc1_w": _he(rng, (256, 32), 256), "fc1_b": np.zeros(32, np.float32),
              "fc2_w": _he(rng, (32, 10), 32), "fc2_b": np.zeros(10, np.float32)}
    xb = rng.uniform(0, 1, (64, 8, 8, 1)).astype(np.float32)
    yb = rng.integers(0, 10, 64).astype(np.int32)
    g = ff.Graph("cnn_training_step")
    with g.as_default():
        x = ff.placeholder(xb.shape, "float32", name="x")
        y = ff.placeholder(yb.shape, "int32", name="y")
        v = {k: ff.Variable(a, name=k) for k, a in arrays.items()}
        h = ff.relu(ff.conv2d(x, v["conv1_w"], padding="SAME") + v["conv1_b"])
        h = ff.max_pool(h, 2, 2)
        h = ff.relu(ff.conv2d(h, v["conv2_w"], padding="SAME") + v["conv2_b"])
        h = ff.relu(ff.reshape(h, (64, 256)) @ v["fc1_w"] + v["fc1_b"])
        logits = h @ v["fc2_w"] + v["fc2_b"]
        loss = ff.reduce_mean(ff.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        step = ff.optim.SGD(0.05).minimize(loss)
    return Workload("cnn_training_step", "small CNN training step (SGD, batch 64 of 8x8)",
                    g, {"loss": loss, "step": step}, {x: xb, y: yb}, arrays, "cnn_train",
                    {"lr": 0.05})


def _resident(name, title, shapes, build, tfjs, seed):
    rng = np.random.default_rng(seed)
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    g = ff.Graph(name)
    with g.as_default():
        v = [ff.Variable(a, name=k) for k, a in arrays.items()]
        out = build(*v)
    return Workload(name, title, g, {"out": out}, {}, arrays, tfjs)


def matmul() -> Workload:
    return _resident("matmul", "matmul 1024x1024 @ 1024x1024",
                     {"a": (1024, 1024), "b": (1024, 1024)}, lambda a, b: a @ b,
                     "matmul", 1)


def softmax() -> Workload:
    return _resident("softmax", "softmax of 1024x1000 rows", {"x": (1024, 1000)},
                     ff.softmax, "softmax", 2)


def sum_4m() -> Workload:
    return _resident("sum", "sum of 4M floats", {"x": (4 << 20,)}, ff.reduce_sum, "sum", 3)


def relu_fma() -> Workload:
    n = 4 << 20
    return _resident("relu_fma", "relu(a * b + c) on 4M floats",
                     {"a": (n,), "b": (n,), "c": (n,)}, lambda a, b, c: ff.relu(a * b + c),
                     "relu_fma", 4)


WORKLOADS = {"mobilenet": mobilenet, "cnn_training_step": cnn_training_step,
             "matmul": matmul, "softmax": softmax, "sum": sum_4m, "relu_fma": relu_fma}
