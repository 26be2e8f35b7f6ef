"""A BERT-style self-attention block (torch's eager attention: matmul, / sqrt(d), +
an additive padding mask, softmax, matmul; then the output projection, the residual
and LayerNorm) exported by torch.onnx.export and imported with ff.onnx.load: its
attention becomes one fused_attention kernel and the block matches onnxruntime."""
import math

import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
torch = pytest.importorskip("torch", reason="torch (the test extra) is not installed")

import fragflow as ff  # noqa: E402
from tests.onnx.helpers import assert_close, ort_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("gl")


class SelfAttention(torch.nn.Module):
    """BertSelfAttention + BertSelfOutput, as transformers' eager path writes them."""

    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads, self.head_width = heads, width // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(width, width) for _ in range(4))
        self.norm = torch.nn.LayerNorm(width)

    def _heads(self, x):
        b, length, _ = x.shape
        return x.view(b, length, self.heads, self.head_width).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_width)
        scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.permute(0, 2, 1, 3).reshape(x.shape)
        return self.norm(self.o(context) + x)


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    torch.manual_seed(34)
    path = tmp_path_factory.mktemp("attention") / "bert_attention.onnx"
    x = torch.randn(2, 13, 64)                      # 13 tokens: not a multiple of 4
    mask = torch.ones(2, 13)
    mask[1, 9:] = 0                                 # the second sequence is padded
    torch.onnx.export(SelfAttention().eval(), (x, mask), str(path), dynamo=False,
                      opset_version=17, input_names=["x", "mask"])
    return path, {"x": x.numpy(), "mask": mask.numpy()}


def _kernels(model, feeds, fuse, merge=True):
    sess = ff.Session(model.graph,
                      tuning=ff.Tuning().with_({"matmul.attention_fuse": fuse,
                                                "matmul.merge_siblings": merge}))
    fn = sess.compile(model.outputs, feeds=model.inputs)
    out = fn(feeds["x"], feeds["mask"])[0]
    return out, fn


def test_imported_bert_attention_fuses_and_matches_onnxruntime(block):
    path, feeds = block
    model = ff.onnx.load(str(path))
    want = ort_run(str(path), feeds)[0]
    out, fn = _kernels(model, feeds, fuse=True)
    assert_close(out, want, rtol=2e-6)
    ops = [k.op for k in fn.kernels]
    assert ops.count("fused_attention") == 1 and "softmax" not in ops, ops
    assert any("fused attention" in line for line in fn.fusion_report)


def test_attention_runs_in_two_kernels_and_keeps_the_results(block):
    path, feeds = block
    model = ff.onnx.load(str(path))
    # q, k and v as three products on both sides (merge_matmuls: test_merge_matmuls.py)
    fused, fused_fn = _kernels(model, feeds, fuse=True, merge=False)
    plain, plain_fn = _kernels(model, feeds, fuse=False, merge=False)
    attention = [k for k in fused_fn.kernels if k.strategy.startswith("attention.")]
    assert len(attention) == 2, [k.strategy for k in fused_fn.kernels]  # q kᵀ, the walk
    # scores, softmax, p v -> q kᵀ and the walk; the four head transposes (q, k, v and
    # the result's) are the attention's
    assert len(plain_fn.kernels) - len(fused_fn.kernels) == 5
    assert "transpose" not in [k.op for k in fused_fn.kernels]
    assert_close(fused, plain, rtol=2e-6)
    # without folding them (Tuning matmul.attention_heads), the transposes are kernels
    sess = ff.Session(model.graph, tuning=ff.Tuning().with_({"matmul.attention_heads": False,
                                                            "matmul.merge_siblings": False}))
    fn = sess.compile(model.outputs, feeds=model.inputs)
    assert_close(fn(feeds["x"], feeds["mask"])[0], plain, rtol=2e-6)
    assert len(fn.kernels) == len(fused_fn.kernels) + 4
