"""The transformer architectures people export (issue 34, breadth): Hugging Face
`transformers` models built from small configs (2 layers or stages, 16-128 wide, random
weights seeded, no downloads), exported with torch.onnx.export(dynamo=False, opset 17),
imported with ff.onnx.load and run on GL and on the numpy executor: every output within
1e-4 of its largest magnitude of onnxruntime's on the same file.

Text models get two rows of 11 tokens (not a multiple of 4), the first padded: at its
end for encoders, at its start for decoders (as generation pads); attention is the
models' "eager" form, whose pattern the attention pass fuses, except where `sdpa` says
torch's scaled_dot_product_attention (transformers' default) is exported.
docs/TRANSFORMERS.md ("Architectures checked") lists them and what differs.

`make test` runs the survey's first list (ZOO; four of them, SLOW_ON_GL, on the numpy
executor only); FRAGFLOW_TRANSFORMER_ZOO=all (`make test-transformer-zoo`) adds those on
GL, the rest (MORE: other decoders, encoders, seq2seq, vision and audio models) and five
of them exported with ff.webgl.export and run in Chromium (SwiftShader and Mesa)."""
import os

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
torch = pytest.importorskip("torch", reason="torch (the test extra) is not installed")
T = pytest.importorskip("transformers", reason="transformers (the test extra) is not installed")

import fragflow as ff  # noqa: E402
from tests.onnx.helpers import (  # noqa: E402
    assert_close,
    assert_outputs,
    export_seeded,
    ort_reference,
    run_imported,
)

pytestmark = pytest.mark.usefixtures("gl")

BATCH, TOKENS, PAD = 2, 11, 3


def _ids(tokens=TOKENS):
    return torch.randint(3, 1000, (BATCH, tokens))


def _mask(left=False):
    mask = torch.ones(BATCH, TOKENS, dtype=torch.long)
    if left:
        mask[0, :PAD] = 0
    else:
        mask[0, TOKENS - PAD:] = 0
    return mask


def _text(model, left=False, **more):
    return model, {"input_ids": _ids(), "attention_mask": _mask(left), **more}


def _decoder(model):
    return _text(model, left=True)


def _image(model, size=32):
    return model, {"pixel_values": torch.randn(BATCH, 3, size, size)}


def _audio(model, samples=1600, mask=False):
    feeds = {"input_values": torch.randn(BATCH, samples)}
    if mask:                                 # the first row's last 397 samples padded
        feeds["attention_mask"] = torch.ones(BATCH, samples, dtype=torch.long)
        feeds["attention_mask"][0, 1203:] = 0
    return model, feeds


def _lively(model):
    """Convolution and linear weights of unit gain, batch norms with random statistics:
    a random MobileViT's or LeViT's activations (initializer_range 0.02, a zero running
    mean) otherwise fall to exact zeros through its stages."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.kaiming_normal_(m.weight)
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return model


EAGER = {"attn_implementation": "eager"}
BERTLIKE = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=128, **EAGER)
# grouped-query attention (4 heads, 2 key/value heads), rotary embeddings, RMSNorm and a
# SiLU-gated MLP; intermediate 176: not a multiple of 64
DECODER = dict(vocab_size=1000, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               use_cache=False, **EAGER)
SEQ2SEQ = dict(vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
               decoder_ffn_dim=128, max_position_embeddings=64, pad_token_id=1,
               decoder_start_token_id=2, **EAGER)
VISION = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=128, image_size=32, patch_size=8, **EAGER)
AUDIO = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
             conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **EAGER)

# the survey's first list: BERT's family, Llama-style decoders, T5, BART, Marian, CLIP,
# vision and audio
ZOO = {
    "distilbert": lambda: _text(T.DistilBertModel(T.DistilBertConfig(
        vocab_size=1000, dim=64, n_layers=2, n_heads=2, hidden_dim=256, **EAGER))),
    "roberta": lambda: _text(T.RobertaModel(T.RobertaConfig(**BERTLIKE))),
    "albert": lambda: _text(T.AlbertModel(T.AlbertConfig(embedding_size=32, **BERTLIKE))),
    "electra": lambda: _text(T.ElectraModel(T.ElectraConfig(embedding_size=32, **BERTLIKE))),
    "xlm_roberta": lambda: _text(T.XLMRobertaModel(T.XLMRobertaConfig(**BERTLIKE))),
    "mobilebert": lambda: _text(T.MobileBertModel(T.MobileBertConfig(
        **{**BERTLIKE, "intermediate_size": 64}, embedding_size=32, intra_bottleneck_size=32,
        true_hidden_size=32, num_feedforward_networks=2))),
    "llama": lambda: _decoder(T.LlamaModel(T.LlamaConfig(**DECODER))),
    "qwen2": lambda: _decoder(T.Qwen2Model(T.Qwen2Config(**DECODER))),
    "mistral_sdpa": lambda: _decoder(T.MistralModel(T.MistralConfig(
        **{**DECODER, "attn_implementation": "sdpa"}))),
    "t5_encoder": lambda: _text(T.T5EncoderModel(T.T5Config(
        vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, **EAGER))),
    "bart_encoder": lambda: _text(T.BartModel(T.BartConfig(**SEQ2SEQ)).get_encoder()),
    "marian_encoder": lambda: _text(T.MarianModel(T.MarianConfig(**SEQ2SEQ)).get_encoder()),
    "clip_text": lambda: _text(T.CLIPTextModel(T.CLIPTextConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, max_position_embeddings=32, bos_token_id=1, eos_token_id=2,
        **EAGER))),
    "clip_vision": lambda: _image(T.CLIPVisionModel(T.CLIPVisionConfig(**VISION))),
    "deit": lambda: _image(T.DeiTModel(T.DeiTConfig(**VISION))),
    "swin": lambda: _image(T.SwinModel(T.SwinConfig(
        image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, **EAGER))),
    "convnext": lambda: _image(T.ConvNextModel(T.ConvNextConfig(
        num_stages=2, hidden_sizes=[16, 32], depths=[1, 1]))),
    "mobilevit": lambda: _image(_lively(T.MobileViTModel(T.MobileViTConfig(
        image_size=64, hidden_sizes=[32, 48, 64],
        neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 128], num_attention_heads=2, **EAGER),
        expand_output=False)), size=64),
    "wav2vec2": lambda: _audio(T.Wav2Vec2Model(T.Wav2Vec2Config(**AUDIO))),
    # what the survey fixed: BatchNormalization after Linear (its zero running mean an
    # Identity of a bias in the export), ScatterND at indices the mask gives
    "levit": lambda: _image(_lively(T.LevitModel(T.LevitConfig(
        image_size=64, hidden_sizes=[32, 48], num_attention_heads=[2, 3], depths=[1, 1],
        key_dim=[8, 8], mlp_ratio=[2, 2], attention_ratio=[2, 2],
        down_ops=[["Subsample", 8, 4, 4, 2, 2]]))), size=64),
    "wav2vec2_stable_masked": lambda: _audio(T.Wav2Vec2Model(T.Wav2Vec2Config(
        **AUDIO, feat_extract_norm="layer", do_stable_layer_norm=True)), mask=True),
}

# FRAGFLOW_TRANSFORMER_ZOO=all
MORE = {
    "bert_token_types_sdpa": lambda: _text(T.BertModel(T.BertConfig(
        **{**BERTLIKE, "attn_implementation": "sdpa"})),
        token_type_ids=torch.randint(0, 2, (BATCH, TOKENS))),
    "deberta_v2": lambda: _text(T.DebertaV2Model(T.DebertaV2Config(
        **BERTLIKE, max_position_embeddings=64, relative_attention=True,
        position_buckets=32, pos_att_type=["p2c", "c2p"]))),
    "mpnet": lambda: _text(T.MPNetModel(T.MPNetConfig(**BERTLIKE))),
    "modernbert": lambda: _text(T.ModernBertModel(T.ModernBertConfig(
        **BERTLIKE, local_attention=8, global_attn_every_n_layers=2, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2))),
    "gemma2": lambda: _decoder(T.Gemma2Model(T.Gemma2Config(
        **DECODER, head_dim=16, sliding_window=8))),
    "phi": lambda: _decoder(T.PhiModel(T.PhiConfig(**DECODER, partial_rotary_factor=0.5))),
    "gpt_neox": lambda: _decoder(T.GPTNeoXModel(T.GPTNeoXConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, rotary_pct=0.25,
        use_cache=False, **EAGER))),
    "falcon": lambda: _decoder(T.FalconModel(T.FalconConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        use_cache=False, **EAGER))),
    "opt": lambda: _decoder(T.OPTModel(T.OPTConfig(
        vocab_size=1000, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=64,
        use_cache=False, **EAGER))),
    "bloom": lambda: _decoder(T.BloomModel(T.BloomConfig(
        vocab_size=1000, hidden_size=64, n_layer=2, n_head=4, use_cache=False, **EAGER))),
    "gpt_bigcode": lambda: _decoder(T.GPTBigCodeModel(T.GPTBigCodeConfig(
        vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64, multi_query=True,
        use_cache=False, **EAGER))),
    "gpt2_lm_head": lambda: _decoder(T.GPT2LMHeadModel(T.GPT2Config(
        vocab_size=1000, n_embd=64, n_layer=2, n_head=2, n_positions=64, use_cache=False,
        **EAGER))),
    # the WKV recurrence unrolled over the tokens; the time shift a Pad of -1 at the end
    "rwkv": lambda: (T.RwkvModel(T.RwkvConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, attention_hidden_size=64,
        intermediate_size=128, context_length=64, use_cache=False)), {"input_ids": _ids()}),
    "t5": lambda: _text(T.T5Model(T.T5Config(
        vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        use_cache=False, **EAGER)), decoder_input_ids=_ids(7)),
    "bart": lambda: _text(T.BartModel(T.BartConfig(**SEQ2SEQ, use_cache=False)),
                          decoder_input_ids=_ids(7)),
    # the decoder's mask fed: without it transformers 5 looks for packed sequences with
    # torch.diff, which torch.onnx.export (opset 17) cannot export
    "whisper": lambda: (T.WhisperModel(T.WhisperConfig(
        d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
        num_mel_bins=80, max_source_positions=50, vocab_size=1000, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, use_cache=False,
        **EAGER)), {"input_features": torch.randn(BATCH, 80, 100),
                    "decoder_input_ids": _ids(7),
                    "decoder_attention_mask": torch.ones(BATCH, 7, dtype=torch.long)}),
    # the masking's noise fed (else a RandomUniformLike, which has no rule, draws it)
    "vit_mae": lambda: (T.ViTMAEModel(T.ViTMAEConfig(**VISION, mask_ratio=0.75)),
                        {"pixel_values": torch.randn(BATCH, 3, 32, 32),
                         "noise": torch.rand(BATCH, 16)}),
    "beit": lambda: _image(T.BeitModel(T.BeitConfig(**VISION,
                                                    use_relative_position_bias=True))),
    "dinov2": lambda: _image(T.Dinov2Model(T.Dinov2Config(
        **{**VISION, "intermediate_size": None}, mlp_ratio=2)), size=40),
    "segformer": lambda: _image(T.SegformerModel(T.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
        num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]))),
    "swinv2": lambda: _image(T.Swinv2Model(T.Swinv2Config(
        image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, **EAGER))),
    "hubert": lambda: _audio(T.HubertModel(T.HubertConfig(**AUDIO))),
    "wavlm": lambda: _audio(T.WavLMModel(T.WavLMConfig(
        **{k: v for k, v in AUDIO.items() if k != "attn_implementation"}))),
    "ast": lambda: (T.ASTModel(T.ASTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_length=64, num_mel_bins=32, frequency_stride=10, time_stride=10, **EAGER)),
        {"input_values": torch.randn(BATCH, 64, 32)}),
}

# GL compiles of many kernels (MobileViT 174, wav2vec2's 93 and Swin's 58: tens of
# seconds on 2 cores): on GL only with FRAGFLOW_TRANSFORMER_ZOO=all; their numpy
# executor test runs in make test
SLOW_ON_GL = {"swin", "mobilevit", "wav2vec2", "levit"}
ALL = os.environ.get("FRAGFLOW_TRANSFORMER_ZOO") == "all"
LATER = pytest.mark.skipif(not ALL, reason="FRAGFLOW_TRANSFORMER_ZOO=all "
                                           "(make test-transformer-zoo)")
NAMES = list(ZOO) + [pytest.param(name, marks=LATER) for name in MORE]
GL_NAMES = [pytest.param(name, marks=LATER) if name in SLOW_ON_GL else name
            for name in ZOO] + [pytest.param(name, marks=LATER) for name in MORE]


class Outputs(torch.nn.Module):
    """The model's tensor outputs, flattened, its inputs passed by name."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        out, flat = self.model(**dict(zip(self.names, args)), return_dict=False), []

        def walk(value):
            if isinstance(value, torch.Tensor):
                flat.append(value)
            elif isinstance(value, (tuple, list)):
                for v in value:
                    walk(v)
        walk(out)
        return tuple(flat)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> (the .onnx path, the feeds, onnxruntime's outputs)."""
    cache = {}

    def export(name):
        if name not in cache:
            path, inputs = export_seeded(tmp_path_factory, name, {**ZOO, **MORE}[name],
                                         Outputs, dynamo=False, opset_version=17)
            feeds, want = ort_reference(path, inputs)
            cache[name] = path, feeds, want
        return cache[name]
    return export




@pytest.mark.parametrize("name", GL_NAMES)
def test_matches_onnxruntime_on_gl(name, exported):
    path, feeds, want = exported(name)
    assert_outputs(run_imported(path, feeds, "gl"), want)


@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime_on_the_numpy_executor(name, exported):
    """The numpy executor's pipeline (the passes' references), the weights imported as
    constants (trainable=False: what folding and merge_matmuls then see)."""
    path, feeds, want = exported(name)
    assert_outputs(run_imported(path, feeds, "numpy", trainable=False), want)


# one of each new piece: rotary embeddings and grouped heads, relative position buckets,
# shifted windows (Roll), BatchNorm of computed statistics, ScatterND at computed indices
IN_CHROMIUM = ["llama", "t5_encoder", "swin", "levit", "wav2vec2_stable_masked"]


@LATER
@pytest.mark.parametrize("config", ["swiftshader", "mesa"])
def test_exports_match_onnxruntime_in_chromium(config, exported, tmp_path):
    """ff.webgl.export of each (the page's runtime, the "webgl" profile), run in one
    Chromium launch per rasteriser, against onnxruntime."""
    from tests.webgl.browser import chromium, run_cases
    if chromium() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    cases, wants = [], {}
    for name in IN_CHROMIUM:
        path, feeds, want = exported(name)
        model = ff.onnx.load(str(path))
        fetches = {f"out{i}": t for i, t in enumerate(model.outputs)}
        ff.webgl.export(fetches, model.inputs, str(tmp_path / name), page=False)
        by_name = model.inputs_by_onnx_name
        cases.append({"id": name, "dir": name, "runs": 1,
                      "feeds": {by_name[k].name.split(":")[0]: (
                          v, "float32" if v.dtype == np.float32 else "int32")
                          for k, v in feeds.items()},
                      "outputs": {k: (w.shape, "float32") for k, w in zip(fetches, want)}})
        wants[name] = dict(zip(fetches, want))
    results = run_cases(str(tmp_path), cases, config)
    for name in IN_CHROMIUM:
        got = results[name]
        assert got["error"] is None, (name, got["error"])
        for k, w in wants[name].items():
            assert_close(got["outputs"][0][k], w, rtol=1e-4)


@LATER
def test_vit_mae_draws_its_masking_noise(tmp_path):
    """ViT-MAE exported without its noise: a RandomUniformLike draws it (Philox, not
    onnxruntime's generator, so the patches kept differ from its): each row keeps 4 of
    its 16 patches (the mask holds 12 ones), ids_restore is a permutation, and the
    kept patches' states are finite."""
    torch.manual_seed(34)
    model = T.ViTMAEModel(T.ViTMAEConfig(**VISION, mask_ratio=0.75)).eval()
    pixels = torch.randn(BATCH, 3, 32, 32)
    path = tmp_path / "vit_mae.onnx"
    torch.onnx.export(Outputs(model, ["pixel_values"]), (pixels,), str(path), dynamo=False,
                      opset_version=17, input_names=["pixel_values"])
    hidden, mask, restore = run_imported(path, {"pixel_values": pixels.numpy()}, "gl")
    assert hidden.shape == (BATCH, 5, 64) and np.isfinite(hidden).all()
    np.testing.assert_array_equal(mask.sum(axis=1), [12] * BATCH)
    for row in restore:
        assert sorted(row.tolist()) == list(range(16))
