"""Run a PyTorch ResNet through ONNX on fragflow: export, import, compare with
onnxruntime, time both, and write the shaders fragflow runs.

    python examples/onnx_resnet.py [--size 64] [--batch 1] [--runs 5] [--out onnx_resnet_out]

Uses torchvision's resnet18 (random weights) when torchvision imports, else ResNet-18
as torchvision defines it, written here (the same stem, four stages of two basic
blocks of 64, 128, 256 and 512 channels, pool and fc; PyPI's torchvision does not
import beside every torch). Needs torch, onnx and onnxruntime (pip install
'fragflow[test]' torch).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optional import require  # noqa: E402  (what to install; before torch below)

if __name__ == "__main__":
    require("examples/onnx_resnet.py", {"torch": "torch", "onnx": "onnx",
                                        "onnxruntime": "onnxruntime"}, "test")

import torch  # noqa: E402  (before fragflow's first GL context: see docs/ONNX.md)
from torch import nn  # noqa: E402


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """torchvision's resnet18: stem, 4 stages of 2 basic blocks (64-512 channels), pool,
    fc."""
    def __init__(self, classes=1000):
        super().__init__()
        widths = [64, 128, 256, 512]
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for i, w in enumerate(widths):
            blocks += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
            cin = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build_model():
    try:
        import torchvision
        return torchvision.models.resnet18(weights=None).eval(), "torchvision resnet18"
    except Exception:                 # not installed, or built for another torch
        return ResNet18().eval(), "resnet18 (torchvision's architecture; torchvision " \
            "does not import)"


def median_time(fn, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()                  # returns numpy arrays: a readback, so the GPU has finished
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default="onnx_resnet_out")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(0)
    model, what = build_model()
    x = torch.randn(args.batch, 3, args.size, args.size)
    path = os.path.join(args.out, "resnet.onnx")
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"],
                      opset_version=13, dynamo=False)
    print(f"model: {what}, input {tuple(x.shape)}, exported to {path}")

    import onnxruntime as ort

    import fragflow as ff
    image = x.numpy()
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    expected = reference.run(None, {"input": image})[0]

    imported = ff.onnx.load(path, trainable=False)       # inference: weights as constants
    sess = ff.Session(imported.graph)
    fn = sess.compile(imported.outputs, feeds=imported.inputs)
    start = time.perf_counter()
    logits = fn(image)[0]
    first = time.perf_counter() - start
    error = float(np.abs(logits - expected).max() / np.abs(expected).max())
    ops = [k.op for k in fn.kernels]
    print(f"fragflow: {len(ops)} kernels ({ops.count('transpose')} transpose), first run "
          f"(compile included) {first:.2f} s, max |ff - ort| / max |ort| = {error:.2e}")

    ff_time = median_time(lambda: fn(image), args.runs)
    ort_time = median_time(lambda: reference.run(None, {"input": image}), args.runs)
    print(f"time per image: fragflow (GL: {ff.gl_info().get('renderer', '?')}) "
          f"{1000 * ff_time / args.batch:.1f} ms, onnxruntime CPU "
          f"{1000 * ort_time / args.batch:.1f} ms (median of {args.runs})")

    shader_dir = os.path.join(args.out, "shaders")
    written = fn.dump_shaders(shader_dir)
    print(f"shaders: {len(written)} files in {shader_dir}")


if __name__ == "__main__":
    main()
