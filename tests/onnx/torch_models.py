"""Writes small PyTorch models as ONNX files, with an input and torch's output for
each: run in a subprocess by conftest.py, so torch never shares a process with a GL
context (issue 17), and the suite needs torch only for these files.

    python tests/onnx/torch_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(20, 32), nn.Linear(32, 16), nn.Linear(16, 5)

    def forward(self, x):
        return self.l3(torch.tanh(self.l2(torch.relu(self.l1(x)))))


class SmallCNN(nn.Module):
    """conv, relu, maxpool, batch norm (after a pool: not folded into the conv by the
    exporter), avgpool, flatten, gemm."""
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 12, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(12, 12, 1)
        self.fc = nn.Linear(12 * 2 * 2, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.relu(self.c2(self.bn(x)))
        x = nn.functional.avg_pool2d(torch.relu(self.c3(x)), 2)
        return self.fc(torch.flatten(x, 1))


class MobileBlock(nn.Module):
    """MobileNet v2's inverted residual: 1x1 expand, depthwise 3x3 (groups), relu6 (a
    Clip), 1x1 project, residual add; then global average pool and a classifier."""
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                                  nn.ReLU6())
        self.expand = nn.Sequential(nn.Conv2d(8, 24, 1), nn.BatchNorm2d(24), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(24, 24, 3, padding=1, groups=24),
                                       nn.BatchNorm2d(24), nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(24, 8, 1), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 6)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.depthwise(self.expand(x)))
        return self.head(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


MODELS = {"mlp": (MLP, (4, 20)), "cnn": (SmallCNN, (2, 3, 16, 16)),
          "mobile_block": (MobileBlock, (2, 3, 20, 20))}


def main(out_dir):
    torch.manual_seed(0)
    for name, (cls, shape) in MODELS.items():
        model = cls().eval()
        with torch.no_grad():
            for m in model.modules():          # batch norm statistics that do something
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
        x = torch.randn(*shape)
        path = os.path.join(out_dir, f"{name}.onnx")
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}}, opset_version=13,
                          dynamo=False)
        np.save(os.path.join(out_dir, f"{name}.input.npy"), x.numpy())
        with torch.no_grad():
            np.save(os.path.join(out_dir, f"{name}.torch.npy"), model(x).numpy())


if __name__ == "__main__":
    main(sys.argv[1])
