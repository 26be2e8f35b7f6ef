"""Writes tests/onnx/data/torch_small_cnn.onnx (python make_torch_small_cnn.py PATH): a small
CNN exported by torch.onnx.export, the seed torch model of test_untrusted_onnx.py."""
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return torch.softmax(self.fc(y.flatten(1)), dim=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.onnx.export(Net().eval(), torch.randn(1, 3, 8, 8), sys.argv[1], opset_version=17,
                      input_names=["input"], output_names=["probs"], dynamo=False)
