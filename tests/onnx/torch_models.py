"""Writes PyTorch models as ONNX files, with an input and torch's output for each: run
in a subprocess by conftest.py, so the suite needs torch only for these files.

Besides small models of one feature each, torchvision's resnet18, mobilenet_v2 and
squeezenet1_1 with random weights: torchvision's own when it imports, else the same
architectures written here from torchvision's definitions (same layers, blocks, channel
counts and initialisation; PyPI's torchvision does not import beside the pinned CPU
torch).

    python tests/onnx/torch_models.py OUT_DIR [NAME ...]
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


# -- torchvision's architectures (torchvision/models/{resnet,mobilenetv2,squeezenet}.py) --
class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convs with batch norm, a 1x1 projection (and batch
    norm) on the shortcut where the stride or width changes."""
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision's resnet18: 7x7/2 conv (64), bn, relu, 3x3/2 max pool, four stages of
    two basic blocks (64, 128, 256, 512; stride 2 from the second), global average pool,
    fc 512 -> 1000."""
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], 64
        for i, width in enumerate((64, 128, 256, 512)):
            stages.append(nn.Sequential(BasicBlock(cin, width, 1 if i == 0 else 2),
                                        BasicBlock(width, width, 1)))
            cin = width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def conv_bn_relu6(cin, cout, kernel=3, stride=1, groups=1):
    """torchvision's Conv2dNormActivation as MobileNet v2 uses it."""
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2,
                                   groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    """1x1 expand (when t > 1), 3x3 depthwise, 1x1 linear projection; residual add where
    the stride is 1 and the width unchanged."""
    def __init__(self, cin, cout, stride, expand_ratio):
        super().__init__()
        hidden = int(round(cin * expand_ratio))
        self.use_res_connect = stride == 1 and cin == cout
        layers = [conv_bn_relu6(cin, hidden, 1)] if expand_ratio != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, 1, 0, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's mobilenet_v2 (width 1.0): a 3x3/2 stem (32), 17 inverted residuals
    (t, c, n, s below), a 1x1 conv to 1280, global average pool, dropout, fc -> 1000."""
    SETTING = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes=1000):
        super().__init__()
        features, cin = [conv_bn_relu6(3, 32, stride=2)], 32
        for t, c, n, s in self.SETTING:
            for i in range(n):
                features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        features.append(conv_bn_relu6(cin, 1280, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class FireModule(nn.Module):
    def __init__(self, cin, squeeze, expand1x1, expand3x3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)

    def forward(self, x):
        s = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1x1(s)), torch.relu(self.expand3x3(s))], 1)


class SqueezeNet11(nn.Module):
    """torchvision's squeezenet1_1: 3x3/2 conv (64), three ceil-mode 3x3/2 max pools
    between eight fire modules, dropout, a 1x1 conv classifier (1000), relu, global
    average pool."""
    def __init__(self, num_classes=1000):
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)                # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2), nn.ReLU(), pool(),
            FireModule(64, 16, 64, 64), FireModule(128, 16, 64, 64), pool(),
            FireModule(128, 32, 128, 128), FireModule(256, 32, 128, 128), pool(),
            FireModule(256, 48, 192, 192), FireModule(384, 48, 192, 192),
            FireModule(384, 64, 256, 256), FireModule(512, 64, 256, 256))
        final_conv = nn.Conv2d(512, num_classes, 1)
        self.classifier = nn.Sequential(nn.Dropout(0.5), final_conv, nn.ReLU(),
                                        nn.AdaptiveAvgPool2d((1, 1)))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    nn.init.normal_(m.weight, 0.0, 0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def torchvision_model(name):
    """torchvision's model (random weights) when torchvision imports, else ours."""
    try:
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    except Exception:                 # not installed, or built for another torch
        return {"resnet18": ResNet18, "mobilenet_v2": MobileNetV2,
                "squeezenet1_1": SqueezeNet11}[name]()


# torchvision's three at 64x64 (the smallest size where every stage keeps a pixel):
# small enough for the suite, the same layers as at 224x224.
TORCHVISION = {"resnet18": (2, 3, 64, 64), "mobilenet_v2": (1, 3, 64, 64),
               "squeezenet1_1": (2, 3, 64, 64)}

MODELS = {"mlp": (MLP, (4, 20)), "cnn": (SmallCNN, (2, 3, 16, 16)),
          "mobile_block": (MobileBlock, (2, 3, 20, 20)),
          "resnet_stem": (ResNetStem, (2, 3, 32, 32)),
          "squeezenet": (SqueezeNetish, (2, 3, 33, 33))}


def main(out_dir, names=()):
    torch.manual_seed(0)
    models = {**MODELS, **{name: (lambda name=name: torchvision_model(name), shape)
                           for name, shape in TORCHVISION.items()}}
    for name, (cls, shape) in models.items():
        if names and name not in names:
            continue
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
        if name in MODELS:                     # the fine-tuning tests use the small ones
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
    main(sys.argv[1], sys.argv[2:])
