"""Hugging Face transformers models (small configs, random weights, no downloads)
exported by torch.onnx.export(dynamo=False, opset 17) and imported with ff.onnx.load:
they match onnxruntime on GL and on the numpy executor, every LayerNorm runs as one
fused_layer_norm kernel and GELU (BERT's and Whisper's erf form, GPT-2's tanh form) as
the epilogue of the matmul before it; kernels are counted per layer."""
import collections
import re

import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
torch = pytest.importorskip("torch", reason="torch (the test extra) is not installed")
transformers = pytest.importorskip("transformers",
                                   reason="transformers (the test extra) is not installed")

import fragflow as ff  # noqa: E402
from tests.onnx.helpers import assert_close, export_seeded, ort_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("gl")

# a layer's kernels: those whose scope is under encoder/layer.N (BERT, ViT),
# layers.N (Whisper) or h.N (GPT-2)
LAYER = re.compile(r"/(?:layer|layers|h)\.(\d+)/")


class LastHidden(torch.nn.Module):
    """The model's last hidden state, its inputs passed by name."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), return_dict=False)[0]


def _bert():
    config = transformers.BertConfig(hidden_size=128, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=512,
                                     attn_implementation="eager")
    ids = torch.randint(0, config.vocab_size, (1, 32))
    mask = torch.ones(1, 32, dtype=torch.long)
    mask[0, 27:] = 0                               # padded
    return transformers.BertModel(config), {"input_ids": ids, "attention_mask": mask}


def _vit():
    config = transformers.ViTConfig(image_size=64, patch_size=8, hidden_size=128,
                                    num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=512, attn_implementation="eager")
    return transformers.ViTModel(config), {"pixel_values": torch.randn(1, 3, 64, 64)}


def _whisper():
    config = transformers.WhisperConfig(
        d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=512, decoder_ffn_dim=512,
        num_mel_bins=80, max_source_positions=100, attn_implementation="eager")
    encoder = transformers.WhisperModel(config).get_encoder()
    return encoder, {"input_features": torch.randn(1, 80, 200)}


def _gpt2():
    config = transformers.GPT2Config(n_embd=128, n_layer=2, n_head=2, n_positions=64,
                                     vocab_size=1000, attn_implementation="eager",
                                     use_cache=False)
    ids = torch.randint(0, 1000, (1, 32))
    return transformers.GPT2Model(config), {"input_ids": ids,
                                            "attention_mask": torch.ones(1, 32,
                                                                         dtype=torch.long)}


MODELS = {"bert": _bert, "vit": _vit, "whisper": _whisper, "gpt2": _gpt2}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    cache = {}

    def export(name):
        if name not in cache:
            path, inputs = export_seeded(tmp_path_factory, name, MODELS[name], LastHidden,
                                         dynamo=False, opset_version=17,
                                         output_names=["hidden"])
            cache[name] = path, {k: v.numpy() for k, v in inputs.items()}
        return cache[name]
    return export


def _run(path, feeds, backend="gl", tuning=None):
    model = ff.onnx.load(str(path))
    sess = ff.Session(model.graph, backend=backend, tuning=tuning)
    fn = sess.compile(model.outputs, feeds=model.inputs)
    by_name = {v.name.split(":")[0]: v for v in model.inputs}
    out = fn(*[feeds[name] for name in by_name])[0]
    return out, fn


def kernels_per_layer(kernels) -> dict:
    """{layer index: [Kernel, ...]} from the kernels' scopes."""
    layers = collections.defaultdict(list)
    for k in kernels:
        found = LAYER.search("/" + k.scope + "/")
        if found:
            layers[int(found.group(1))].append(k)
    return dict(layers)


def drawn_and_hoisted(fn, layer) -> tuple:
    """([the layer's kernels a run draws], [those drawn once per plan: hoisted, their
    inputs constants and variables no run assigns, runtime/memory_plan.py])."""
    hoisted = fn._last.plan.hoisted
    kernels = kernels_per_layer(fn.kernels)[layer]
    return ([k for k in kernels if k.output.value not in hoisted],
            [k for k in kernels if k.output.value in hoisted])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_onnxruntime_with_one_kernel_per_norm(name, exported):
    path, feeds = exported(name)
    want = ort_run(str(path), feeds)[0]
    out, fn = _run(path, feeds)
    assert_close(out, want, rtol=1e-4)
    ops = [k.op for k in fn.kernels]
    # every LayerNorm is one kernel: no mean, sub or square kernels are left of them
    assert "mean" not in ops and "square" not in ops, fn.fusion_report
    layers = kernels_per_layer(fn.kernels)
    assert sorted(layers) == [0, 1]
    for layer in layers.values():
        ops = [k.op for k in layer]
        norms = {k.nodes for k in layer if k.op == "fused_layer_norm"}
        # two LayerNorms, each one kernel or two (norm.stats: its statistics first)
        assert len(norms) == 2 and ops.count("fused_layer_norm") <= 4, ops
        # GELU joined the matmul before it: no elementwise kernel of its own in a layer
        # (ViT and Whisper keep their unfused attention's scale and softmax)
        assert "fused" not in ops and "erf" not in ops and "tanh" not in ops, ops


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_onnxruntime_on_the_numpy_executor(name, exported):
    """The numpy executor's pipeline (merge_matmuls, fuse_attention with the column
    views, ...: their references) against onnxruntime."""
    path, feeds = exported(name)
    want = ort_run(str(path), feeds)[0]
    out, _ = _run(path, feeds, backend="numpy")
    assert_close(out, want, rtol=1e-4)


# what a BERT layer's kernels are now: q, k and v as one matmul over their weights
# side by side (merge_matmuls: one blocked kernel applying the bias and leaving the
# product in its render targets, 1, where fused_attention reads q, k and v:
# matmul.attention_reads_blocks; the weights' and biases' concats, 2, hoisted: drawn
# once per plan, not every run); attention as q kᵀ's blocked kernel and the walk
# reading its render targets (2, attention.scores_blocks; the four head transposes
# fused_attention's); the output projection and the second feed-forward matmul a
# blocked kernel each, whose LayerNorm's kernels read its render targets and apply its
# epilogue (2); the first feed-forward matmul a blocked kernel applying its GELU
# epilogue, whose targets the second reads (1) (matmul.plan_blocks); two LayerNorms (2
# each: norm.stats at 128 wide, in every profile): 12, of which a run draws 10
BERT_LAYER_KERNELS = 12
BERT_LAYER_DRAWN = 10


def test_bert_layer_kernels(exported):
    path, feeds = exported("bert")
    _, fn = _run(path, feeds)
    for layer in kernels_per_layer(fn.kernels):
        drawn, hoisted = drawn_and_hoisted(fn, layer)
        assert len(drawn) <= BERT_LAYER_DRAWN, [k.op for k in drawn]
        assert [k.op for k in hoisted] == ["concat"] * 2, [k.op for k in hoisted]
        assert len(drawn) + len(hoisted) <= BERT_LAYER_KERNELS


def test_an_inference_import_folds_the_merged_weights(exported):
    """ff.onnx.load(trainable=False): the initializers are constants, so q's, k's and
    v's weights side by side are one constant (no concat kernel), and the layer is the
    kernels a run draws."""
    path, feeds = exported("bert")
    model = ff.onnx.load(str(path), trainable=False)
    fn = ff.Session(model.graph).compile(model.outputs, feeds=model.inputs)
    by_name = [v.name.split(":")[0] for v in model.inputs]
    assert_close(fn(*[feeds[n] for n in by_name])[0], ort_run(str(path), feeds)[0],
                 rtol=1e-4)
    for layer in kernels_per_layer(fn.kernels).values():
        ops = [k.op for k in layer]
        assert "concat" not in ops and len(layer) <= BERT_LAYER_KERNELS - 2, ops


def test_bert_projections_are_one_product_read_in_place(exported):
    """q, k and v: one matmul (merge_matmuls), no slice kernels (fused_attention reads
    their columns), no stitch (its kernels read them from the product's render
    targets), the weights' concat hoisted out of the run."""
    path, feeds = exported("bert")
    _, fn = _run(path, feeds)
    for layer in kernels_per_layer(fn.kernels).values():
        ops = [k.op for k in layer]
        assert ops.count("fused_matmul") == 4 and "strided_slice" not in ops, ops
        assert "fused_matmul_stitch" not in ops, ops
        reads = {b.value for k in layer if k.strategy == "attention.scores_blocks"
                 for b in k.inputs}
        assert any("/merged" in v and v.endswith("#blocks") for v in reads), reads
    attention = next(n for n in fn.graph.nodes if n.op == "fused_attention")
    assert attention.attrs["q_columns"] == (0, 2, 64), attention.attrs
    assert attention.attrs["v_columns"] == (256, 2, 64), attention.attrs


def test_gpt2_attention_reads_c_attn_through_its_reshapes_from_its_targets(exported):
    """GPT-2's c_attn (one Gemm of q, k and v, reshaped back to [B, L, 3E]) has no
    stitch: the attention's kernels read it from its render targets through the view
    (matmul.attention_reads_blocks); the model still matches onnxruntime (above)."""
    path, feeds = exported("gpt2")
    _, fn = _run(path, feeds)
    for layer in kernels_per_layer(fn.kernels).values():
        reads = {b.value for k in layer if k.strategy == "attention.scores_blocks"
                 for b in k.inputs}
        products = [k.op for k in layer if k.op.startswith(("matmul", "fused_matmul"))
                    and not k.strategy.startswith("attention.")]
        # c_attn, c_proj (its stitch: read by the residual add), the feed-forward pair
        assert products.count("fused_matmul_stitch") == 2, products
        assert any("/c_attn/" in v and v.endswith("#blocks") for v in reads), reads


def test_bert_attention_runs_in_two_kernels(exported):
    """q kᵀ, the scale, the mask, softmax and the product with v: the blocked product
    and the walk reading its render targets, no stitch in between."""
    path, feeds = exported("bert")
    _, fn = _run(path, feeds)
    for layer in kernels_per_layer(fn.kernels).values():
        attention = [k for k in layer if (k.strategy or "").startswith("attention.")]
        assert [k.strategy for k in attention] == ["attention.scores_blocks"] * 2, \
            [(k.op, k.strategy) for k in layer]


def _drawn_per_layer(exported, profile, changes=None) -> list:
    """[(drawn, hoisted) kernels of each layer], in a Session under the profile's
    Tuning ("webgl": what the browser export runs), with `changes` to its knobs."""
    path, feeds = exported("bert")
    _, fn = _run(path, feeds, tuning=ff.Tuning.named(profile).with_(changes))
    return [drawn_and_hoisted(fn, layer) for layer in sorted(kernels_per_layer(fn.kernels))]


@pytest.mark.parametrize("profile", ["llvmpipe", "webgl"])
def test_bert_layer_runs_in_at_most_eight_kernels(profile, exported):
    """The kernels a run draws of each layer whose output the next layer reads; the
    hoisted ones (the weights' concats, drawn once per plan) are listed in the message,
    not counted. Both LayerNorms are one kernel each (norm.rows: the next products and
    residual adds read their render targets)."""
    layers = _drawn_per_layer(exported, profile)
    assert len(layers) == 2
    for drawn, hoisted in layers[:-1]:
        assert len(drawn) <= 8, ([k.op for k in drawn], "hoisted", [k.op for k in hoisted])
        norms = [k.strategy for k in drawn if k.op == "fused_layer_norm"]
        assert norms == ["norm.rows"] * 2, [(k.op, k.strategy) for k in drawn]


@pytest.mark.parametrize("profile", ["llvmpipe", "webgl"])
def test_bert_last_layer_runs_in_at_most_eight_kernels(profile, exported):
    """The last layer's second LayerNorm writes the model's output, which the fetch
    reads back from its render targets (norm.rows, Tuning reduce.norm_rows_fetched: on
    in the llvmpipe profile; off in the webgl profile, where each layer's readback
    measured slower than the kernel it saves, docs/PERFORMANCE.md, so on here): one
    kernel, as the other layers' norms."""
    drawn, hoisted = _drawn_per_layer(exported, profile, {"reduce.norm_rows_fetched": True})[-1]
    assert len(drawn) <= 8, ([k.op for k in drawn], "hoisted", [k.op for k in hoisted])
    norms = [k.strategy for k in drawn if k.op == "fused_layer_norm"]
    assert norms == ["norm.rows"] * 2, [(k.op, k.strategy) for k in drawn]


@pytest.mark.parametrize("profile", ["llvmpipe", "webgl"])
def test_bert_output_read_back_from_render_targets_matches_onnxruntime(profile, exported):
    """The model's output, left in its LayerNorm's 8 render targets (a row of 32 texels:
    4 a target), put in order by the readback; and with reduce.norm_rows_fetched off,
    norm.stats' texture: both as onnxruntime."""
    path, feeds = exported("bert")
    want = ort_run(str(path), feeds)[0]
    tuning = ff.Tuning.named(profile).with_({"reduce.norm_rows_fetched": True})
    out, fn = _run(path, feeds, tuning=tuning)
    assert_close(out, want, rtol=1e-4)
    last = [k for k in fn.kernels if k.op == "fused_layer_norm"][-1]
    assert (last.strategy, last.output_layers) == ("norm.rows", 8)
    off, fn_off = _run(path, feeds, tuning=tuning.with_({"reduce.norm_rows_fetched": False}))
    assert_close(off, want, rtol=1e-4)
    assert len(fn_off.kernels) == len(fn.kernels) + 1
    assert [k for k in fn_off.kernels if k.op == "fused_layer_norm"][-1].strategy == \
        "norm.stats"


def _norm_modules():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    from transformers.models.t5.modeling_t5 import T5LayerNorm
    return {
        # torch's LayerNorm below opset 17: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
        # Div, Mul, Add
        "layer_norm_opset16": (torch.nn.LayerNorm(30), 16),
        "layer_norm_opset17": (torch.nn.LayerNorm(30), 17),
        "t5_rms_norm": (T5LayerNorm(30, eps=1e-6), 17),
        "llama_rms_norm": (LlamaRMSNorm(30, eps=1e-5), 17),
    }


@pytest.mark.parametrize("name", ["layer_norm_opset16", "layer_norm_opset17",
                                  "t5_rms_norm", "llama_rms_norm"])
def test_exported_norm_modules_are_one_kernel(name, tmp_path):
    torch.manual_seed(34)
    module, opset = _norm_modules()[name]
    with torch.no_grad():                    # weights not 1, biases not 0
        for p in module.parameters():
            p.uniform_(0.5, 1.5)
    x = torch.randn(2, 5, 30) * 4 + 1        # 30: not a multiple of 4
    x[1, 2] = 0.0                            # a zero row
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(module.eval(), (x,), str(path), dynamo=False, opset_version=opset,
                      input_names=["x"])
    out, fn = _run(path, {"x": x.numpy()})
    assert {k.op for k in fn.kernels} == {"fused_layer_norm"}, fn.fusion_report
    assert_close(out, ort_run(str(path), {"x": x.numpy()})[0], rtol=1e-5)
