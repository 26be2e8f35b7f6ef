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


class ResNetStem(nn.Module):
    """ResNet-18's stem and a downsampling basic block: 7x7/2 conv, bn, relu, 3x3/2
    max pool (padded), two 3x3 convs with a 1x1/2 projection on the shortcut."""
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        self.conv1 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
                                   nn.BatchNorm2d(16), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(16))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False),
                                  nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 7)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.conv2(self.conv1(x)) + self.down(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Fire(nn.Module):
    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3,
                                                                    padding=1)

    def forward(self, x):
        s = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], 1)


class SqueezeNetish(nn.Module):
    """SqueezeNet 1.1's pieces: fire modules (a concat of two convs on the channel axis),
    ceil-mode max pools, dropout, a conv classifier and global average pooling."""
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(),
            nn.MaxPool2d(3, stride=2, ceil_mode=True), Fire(16, 4, 8), Fire(16, 4, 8),
            nn.MaxPool2d(3, stride=2, ceil_mode=True), Fire(16, 6, 12))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(24, 5, 1), nn.ReLU(),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


MODELS = {"mlp": (MLP, (4, 20)), "cnn": (SmallCNN, (2, 3, 16, 16)),
          "mobile_block": (MobileBlock, (2, 3, 20, 20)),
          "resnet_stem": (ResNetStem, (2, 3, 32, 32)),
          "squeezenet": (SqueezeNetish, (2, 3, 33, 33))}


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
        np.save(os.path.join(out_dir, f"{name}.sgd.npy"), sgd_losses(model, x))


def sgd_losses(model, x, lr=0.1):
    """Cross-entropy before and after one plain SGD step on every parameter (labels
    0, 1, 2...), in eval mode: what fine-tuning the imported model must reproduce."""
    logits = model(x)
    labels = torch.arange(len(x)) % logits.shape[1]
    loss = nn.functional.cross_entropy(logits, labels)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p -= lr * g
        after = nn.functional.cross_entropy(model(x), labels)
    return np.array([loss.item(), after.item()], np.float32)


if __name__ == "__main__":
    main(sys.argv[1])
