"""ONNX files exported with torch's defaults: torch.onnx.export(model, args, path), the
dynamo exporter (dynamo=True, optimize=True; opset 20 comes out of torch 2.13, its
weights in a PATH.data file beside it), imported with ff.onnx.load and run on GL and on
the numpy executor: every output within 1e-4 of its largest magnitude of onnxruntime's
on the same file.

The models are those of test_transformers_onnx.py (BERT, ViT, the Whisper encoder,
GPT-2) and test_transformer_zoo.py (their builders, small configs and random weights,
reused as they are), plain torch modules (torch_models.py's, and a LayerNorm/GELU MLP,
nn.MultiheadAttention, F.scaled_dot_product_attention) and transformers' ResNet.
docs/TRANSFORMERS.md ("dynamo=True exports") tables what each exports to.

`make test` runs FAST and two VARIANTS (a few seconds of exports);
FRAGFLOW_TRANSFORMER_ZOO=all (`make test-transformer-zoo`) runs the rest. The import
rules the survey added are tested op by op at the end against onnxruntime: masked.py
(torch's `x[mask] = value` as NonZero, Expand and ScatterND), sequences.py
(SplitToSequence and its kin, from optimize=False) and functions.py (local functions,
from dynamo=False's export_modules_as_functions)."""
import os

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
from onnx import TensorProto, helper  # noqa: E402

import fragflow as ff  # noqa: E402
from tests.onnx.helpers import (  # noqa: E402
    assert_close,
    assert_outputs,
    export_seeded,
    ort_reference,
    ort_run,
    run_imported,
)
from tests.onnx.test_import_ops import make_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("gl")

ALL = os.environ.get("FRAGFLOW_TRANSFORMER_ZOO") == "all"
LATER = pytest.mark.skipif(not ALL, reason="FRAGFLOW_TRANSFORMER_ZOO=all "
                                           "(make test-transformer-zoo)")


def _torch_modules():
    """name -> () -> (torch module taking the feeds in order, {feed name: tensor})."""
    import torch
    import torch.nn.functional as fn
    from torch import nn

    from tests.onnx import torch_models as tm

    class MLPNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.norm, self.l2 = nn.Linear(30, 64), nn.LayerNorm(64), nn.Linear(64, 7)

        def forward(self, x):
            return self.l2(fn.gelu(self.norm(self.l1(x))))

    class Attention(nn.Module):            # 7 queries, 9 keys and values, 4 heads
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, q, kv):
            return self.mha(q, kv, kv, need_weights=False)[0]

    class SDPA(nn.Module):
        def forward(self, q, k, v):
            return fn.scaled_dot_product_attention(q, k, v, is_causal=True)

    x = torch.randn
    qkv = {"q": x(2, 3, 7, 14), "k": x(2, 3, 7, 14), "v": x(2, 3, 7, 14)}
    modules = {
        "mlp_layernorm_gelu": lambda: (MLPNorm(), {"x": x(3, 5, 30)}),
        "multihead_attention": lambda: (Attention(), {"q": x(2, 7, 32), "kv": x(2, 9, 32)}),
        "sdpa_causal": lambda: (SDPA(), qkv),
    }
    # unit gain and batch norms of random statistics (the zoo's _lively): a fresh
    # mobilenet_v2's logits are ~1e-9
    from tests.onnx.test_transformer_zoo import _lively
    for name, (cls, shape) in tm.MODELS.items():
        modules[f"torch_{name}"] = lambda cls=cls, shape=shape: (
            _lively(cls()), {"input": x(*shape)})
    for name, shape in tm.TORCHVISION.items():
        modules[f"torch_{name}"] = lambda name=name, shape=shape: (
            _lively(tm.torchvision_model(name)), {"input": x(*shape)})
    return modules


def _builders():
    """name -> () -> (module, feeds): the transformers' wrapped to take their feeds in
    order and return tensors (the two test files' LastHidden and Outputs)."""
    import tests.onnx.test_transformer_zoo as zoo
    import tests.onnx.test_transformers_onnx as four
    T = zoo.T

    def wrapped(build, wrapper):
        model, feeds = build()
        return wrapper(model.eval(), list(feeds)), feeds

    def whisper_without_decoder_mask():
        model, feeds = zoo.MORE["whisper"]()
        del feeds["decoder_attention_mask"]
        return model, feeds

    zoo_models = {
        **zoo.ZOO, **zoo.MORE,
        "resnet": lambda: zoo._image(T.ResNetModel(T.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"))),
        # three that dynamo=False cannot export (docs/TRANSFORMERS.md): Whisper without
        # its decoder's mask (torch.diff), MobileViT V2 (col2im), Mamba
        "whisper_no_decoder_mask": whisper_without_decoder_mask,
        "mobilevitv2": lambda: zoo._image(zoo._lively(T.MobileViTV2Model(
            T.MobileViTV2Config(image_size=64, width_multiplier=0.25),
            expand_output=False)), size=64),
        "mamba": lambda: (T.MambaModel(T.MambaConfig(
            vocab_size=1000, hidden_size=32, state_size=8, num_hidden_layers=2,
            use_cache=False)), {"input_ids": zoo._ids()}),
    }
    out = {name: (lambda b=b: wrapped(b, four.LastHidden)) for name, b in four.MODELS.items()}
    for name, b in zoo_models.items():
        out[name if name not in out else f"{name}_full"] = \
            lambda b=b: wrapped(b, zoo.Outputs)
    return {**out, **{name: (lambda b=b: b()) for name, b in _torch_modules().items()}}


# make test: one of each kind, seconds to export and compile
FAST = ["bert", "llama", "mlp_layernorm_gelu", "multihead_attention", "sdpa_causal",
        "torch_cnn", "wav2vec2_stable_masked"]
# many kernels to compile on GL (tens of seconds on 2 cores): numpy executor only in make test
SLOW_ON_GL = {"wav2vec2_stable_masked"}
REST = ["vit", "whisper", "gpt2", "distilbert", "roberta", "albert", "electra", "xlm_roberta",
        "mobilebert", "qwen2", "mistral_sdpa", "t5_encoder", "bart_encoder",
        "marian_encoder", "clip_text", "clip_vision", "deit", "swin", "convnext", "mobilevit",
        "wav2vec2", "levit", "resnet", "bert_token_types_sdpa", "deberta_v2", "mpnet",
        "modernbert", "gemma2", "phi", "gpt_neox", "falcon", "opt", "bloom", "gpt_bigcode",
        "gpt2_lm_head", "rwkv", "t5", "bart", "whisper_full", "vit_mae", "beit", "dinov2",
        "segformer", "swinv2", "hubert", "wavlm", "ast", "torch_mlp", "torch_mobile_block",
        "torch_resnet_stem", "torch_squeezenet", "torch_resnet18", "torch_mobilenet_v2",
        "torch_squeezenet1_1", "whisper_no_decoder_mask", "mobilevitv2", "mamba"]
NAMES = FAST + [pytest.param(name, marks=LATER) for name in REST]
GL_NAMES = [pytest.param(name, marks=LATER) if name in SLOW_ON_GL else name for name in FAST] \
    + [pytest.param(name, marks=LATER) for name in REST]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(name, **export_args) -> (the .onnx path, the feeds, onnxruntime's outputs),
    exported with torch's defaults (only the input names given) and export_args."""
    pytest.importorskip("torch", reason="torch (the test extra) is not installed")
    pytest.importorskip("transformers", reason="transformers (the test extra) is not "
                                               "installed")
    pytest.importorskip("onnxscript", reason="onnxscript (the test extra: torch's default "
                                             "exporter needs it) is not installed")
    builders, cache = _builders(), {}

    def export(name, **export_args):
        key = (name, *sorted(export_args.items()))
        if key not in cache:
            path, inputs = export_seeded(tmp_path_factory, name, builders[name],
                                         **export_args)
            feeds, want = ort_reference(path, inputs)
            cache[key] = path, feeds, want
        return cache[key]
    return export




def test_the_default_export_is_opset_20_with_its_weights_beside_it(exported):
    import onnx
    path, _, _ = exported("bert")
    model = onnx.load(str(path), load_external_data=False)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 20)]
    assert os.path.exists(str(path) + ".data") and not model.functions
    assert ff.onnx.load(str(path)).opset == 20


@pytest.mark.parametrize("name", GL_NAMES)
def test_matches_onnxruntime_on_gl(name, exported):
    path, feeds, want = exported(name)
    assert_outputs(run_imported(path, feeds, "gl"), want)


@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime_on_the_numpy_executor(name, exported):
    """The numpy executor's pipeline, the weights imported as constants."""
    path, feeds, want = exported(name)
    assert_outputs(run_imported(path, feeds, "numpy", trainable=False), want)


# other choices a user may make: the opset (23: sdpa as Attention, RMSNorm as
# RMSNormalization; 18: GELU as Erf), optimize=False (torch.split as SplitToSequence)
VARIANTS = [("multihead_attention", {"optimize": False}, "SplitToSequence"),
            ("sdpa_causal", {"opset_version": 23}, "Attention")] + [
    pytest.param(*row, marks=LATER) for row in [
        ("bert", {"optimize": False}, "Range"), ("llama", {"optimize": False}, "Cos"),
        ("t5_encoder", {"optimize": False}, "Log"), ("swin", {"optimize": False}, "Max"),
        ("llama", {"opset_version": 23}, "RMSNormalization"),
        ("mistral_sdpa", {"opset_version": 23}, "Attention"),
        ("t5_encoder", {"opset_version": 23}, "RMSNormalization"),
        ("multihead_attention", {"opset_version": 23}, "Attention"),
        ("swin", {"opset_version": 18}, "Erf"),
        ("wav2vec2_stable_masked", {"opset_version": 18}, "NonZero")]]


@pytest.mark.parametrize("name,export_args,emitted", VARIANTS,
                         ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items())
                         if isinstance(v, dict) else v)
def test_export_variants_match_onnxruntime(name, export_args, emitted, exported):
    """On the numpy executor (GL where the variant brings a rule of its own); each
    variant's file holds the op it is here for."""
    import onnx
    path, feeds, want = exported(name, **export_args)
    ops = {n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node}
    assert emitted in ops, sorted(ops)
    assert_outputs(run_imported(path, feeds, "numpy", trainable=False), want)
    if name in ("multihead_attention", "sdpa_causal"):
        assert_outputs(run_imported(path, feeds, "gl"), want)


# -- x[mask] = value: NonZero, Expand and ScatterND (frontend/onnx/masked.py) -------------
rng = np.random.default_rng(11)
I64 = TensorProto.INT64


def _values(*shape):
    """Random values with zeros, a negative zero, NaN and infinities among them."""
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:5] = [0.0, -0.0, np.nan, np.inf, -np.inf]
    x.reshape(-1)[7::3] = 0.0
    return x


def _masked_write(mask_rank, data_shape, reduction="none", value=-2.5):
    """The dynamo exporter's data[mask] = value, mask = x != 0 of x's leading dims:
    NonZero, its Transpose, one value Expanded to [count, *rest] where count is the
    mask's sum, ScatterND."""
    rest = list(data_shape[mask_rank:])
    nodes = [
        helper.make_node("Cast", ["x"], ["mask"], to=TensorProto.BOOL),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
        helper.make_node("Cast", ["mask"], ["ones"], to=I64),
        helper.make_node("Reshape", ["ones", "flat"], ["ones_flat"]),
        helper.make_node("ReduceSum", ["ones_flat"], ["count"], keepdims=1),
        helper.make_node("Concat", ["count", "rest"], ["target"], axis=0),
        helper.make_node("Expand", ["value", "target"], ["filled"]),
        helper.make_node("Reshape", ["filled", "flat_rest"], ["updates"]),
        helper.make_node("ScatterND", ["data", "idx", "updates"], ["y"],
                         **({} if reduction == "none" else {"reduction": reduction})),
    ]
    constants = {"flat": np.array([-1], np.int64), "rest": np.array(rest, np.int64),
                 "flat_rest": np.array([-1] + rest, np.int64),
                 "value": np.array(value, np.float32)}
    feeds = {"data": _values(*data_shape), "x": _values(*data_shape[:mask_rank])}
    return make_model(nodes, feeds, ["y"], constants, opset=20), feeds


@pytest.mark.parametrize("backend", ["gl", "numpy"])
@pytest.mark.parametrize("mask_rank,data_shape,reduction", [
    (3, (2, 5, 3), "none"),                 # the mask as large as the data
    (2, (2, 5, 3), "none"),                 # over the leading dims: rows written
    (1, (7, 3), "add"), (2, (3, 5, 2), "mul"), (1, (6, 2), "max"), (1, (6, 2), "min")])
def test_a_write_at_a_computed_mask_matches_onnxruntime(backend, mask_rank, data_shape,
                                                        reduction):
    model, feeds = _masked_write(mask_rank, data_shape, reduction)
    want = ort_run(model, feeds)[0]
    imported = ff.onnx.load(model)
    fn = ff.Session(imported.graph, backend=backend).compile(imported.outputs,
                                                             feeds=imported.inputs)
    got = fn(*[feeds[k] for k in imported.inputs_by_onnx_name])[0]
    # one operation per element (infinities among the data): exactly onnxruntime's
    np.testing.assert_array_equal(got, want)
    assert "tensor_scatter_nd_update" not in [n.op for n in imported.graph.nodes]


def test_a_write_of_an_empty_or_full_mask_matches_onnxruntime():
    model, feeds = _masked_write(2, (2, 5, 3))
    imported = ff.onnx.load(model)
    sess = ff.Session(imported.graph)
    for x in (np.zeros((2, 5), np.float32), np.ones((2, 5), np.float32)):
        feeds["x"] = x
        np.testing.assert_array_equal(sess.run(imported.outputs[0], feeds),
                                      ort_run(model, feeds)[0])


def test_nonzero_of_a_constant_is_its_value_at_import():
    x = np.array([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]], np.float32)
    model = make_model([helper.make_node("NonZero", ["c"], ["nz"]),
                        helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT),
                        helper.make_node("Add", ["a", "nzf"], ["y"])],
                       {"a": np.ones((2, 3), np.float32)}, ["y"], {"c": x}, opset=20)
    feeds = {"a": np.ones((2, 3), np.float32)}
    imported = ff.onnx.load(model, trainable=False)
    got = ff.Session(imported.graph).run(imported.outputs[0], feeds)
    assert_close(got, ort_run(model, feeds)[0])


def test_nonzero_read_otherwise_names_why():
    """A gather at a mask's positions (x[mask]) has a size the data decides."""
    model = make_model([helper.make_node("NonZero", ["x"], ["nz"]),
                        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
                        helper.make_node("GatherND", ["x", "idx"], ["y"])],
                       {"x": _values(3, 4)}, ["y"], opset=20)
    with pytest.raises(ff.onnx.OnnxImportError, match=r"GatherND.*NonZero of a value the "
                       r"graph computes.*only as ScatterND's indices"):
        ff.onnx.load(model)


def test_a_masked_write_of_many_values_names_why():
    """data[mask] = updates with one value per position: the updates' size is the data's."""
    model, feeds = _masked_write(1, (6, 2))
    model.graph.node[-1].input[2] = "u"
    model.graph.input.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [4, 2]))
    with pytest.raises(ff.onnx.OnnxImportError, match=r"ScatterND.*updates of shape "
                       r"\[4, 2\]: only one value written at every position"):
        ff.onnx.load(model)


def test_expand_to_a_computed_shape_read_otherwise_keeps_its_error():
    model = make_model([helper.make_node("Shape", ["x"], ["s"]),
                        helper.make_node("Cast", ["x"], ["xi"], to=I64),
                        helper.make_node("Add", ["s", "xi"], ["target"]),
                        helper.make_node("Expand", ["one"], ["e"]),
                        helper.make_node("Relu", ["e"], ["y"])],
                       {"x": np.ones(2, np.float32)}, ["y"],
                       {"one": np.ones((1, 1), np.float32)}, opset=20)
    model.graph.node[3].input.append("target")
    with pytest.raises(ff.onnx.OnnxImportError, match=r"Expand node .*shape must be known "
                       r"at import time"):
        ff.onnx.load(model)


# -- sequences (optimize=False's torch.split): frontend/onnx/sequences.py ------------------
def _run_both(model, feeds):
    """The imported model on GL and on the numpy executor as built, each against
    onnxruntime."""
    want = ort_run(model, feeds)
    imported = ff.onnx.load(model)
    for sess in (ff.Session(imported.graph), ff.Session(imported.graph, backend="numpy",
                                                        passes=[])):
        got = sess.run(imported.outputs, imported.feed_dict(feeds))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.astype(g.dtype))   # copies: exact


@pytest.mark.parametrize("attrs,split", [
    ({"axis": 1}, None),                            # pieces of one, kept
    ({"axis": -2, "keepdims": 0}, None),            # pieces of one, squeezed
    ({"axis": 1}, np.array(3, np.int64)),           # 3, 3 and the 1 left
    ({"axis": 2}, np.array([1, 2], np.int64)),      # given sizes
])
def test_split_to_sequence_read_at_positions_matches_onnxruntime(attrs, split):
    inputs = ["x"] + (["split"] if split is not None else [])
    nodes = [helper.make_node("SplitToSequence", inputs, ["seq"], **attrs),
             helper.make_node("SequenceAt", ["seq", "first"], ["y0"]),
             helper.make_node("SequenceAt", ["seq", "last"], ["y1"]),
             helper.make_node("SequenceLength", ["seq"], ["n"])]
    if split is None:                               # equal pieces: stacked back
        nodes.append(helper.make_node("ConcatFromSequence", ["seq"], ["y2"], axis=-1,
                                      new_axis=1))
    constants = {"first": np.array(0, np.int64), "last": np.array(-1, np.int64),
                 **({"split": split} if split is not None else {})}
    outputs = ["y0", "y1", "n"] + (["y2"] if split is None else [])
    model = make_model(nodes, {"x": _values(2, 7, 3)}, outputs, constants, opset=20)
    _run_both(model, {"x": _values(2, 7, 3)})


def test_sequence_construct_insert_erase_and_concat_match_onnxruntime():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
             helper.make_node("SequenceInsert", ["s0", "c", "one"], ["s1"]),   # a c b
             helper.make_node("SequenceErase", ["s1", "zero"], ["s2"]),        # c b
             helper.make_node("SequenceInsert", ["s2", "a"], ["s3"]),          # c b a
             helper.make_node("ConcatFromSequence", ["s3"], ["y"], axis=0),
             helper.make_node("SequenceLength", ["s3"], ["n"])]
    feeds = {"a": _values(2, 5), "b": _values(3, 5), "c": _values(1, 5)}
    model = make_model(nodes, feeds, ["y", "n"], {"one": np.array(1, np.int64),
                                                  "zero": np.array(0, np.int64)}, opset=20)
    _run_both(model, feeds)


def test_a_sequence_read_as_a_tensor_names_why():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0),
             helper.make_node("Relu", ["seq"], ["y"])]
    model = make_model(nodes, {"x": _values(3, 4)}, ["y"], opset=20)
    with pytest.raises(ff.onnx.OnnxImportError, match=r"Relu.*reads the result of "
                       r"SplitToSequence.*a sequence of tensors: fragflow reads one only "
                       r"through SequenceAt"):
        ff.onnx.load(model)


def test_a_sequence_position_out_of_range_names_it():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0),
             helper.make_node("SequenceAt", ["seq", "p"], ["y"])]
    model = make_model(nodes, {"x": _values(3, 4)}, ["y"], {"p": np.array(-4, np.int64)},
                       opset=20)
    with pytest.raises(ff.onnx.OnnxImportError, match=r"SequenceAt.*position -4 is out "
                       r"of range for a sequence of 3"):
        ff.onnx.load(model)


# -- local functions (export_modules_as_functions): frontend/onnx/functions.py -------------
def _with_functions(functions, graph_nodes, inputs, outputs=("y",)):
    model = make_model(graph_nodes, inputs, list(outputs), opset=20)
    model.functions.extend(functions)
    model.opset_import.append(helper.make_opsetid("local", 1))
    return model


def _function(name, inputs, outputs, nodes):
    return helper.make_function("local", name, inputs, outputs, nodes,
                                [helper.make_opsetid("", 20), helper.make_opsetid("local", 1)])


def test_local_functions_are_inlined_and_match_onnxruntime():
    """A function calling another twice, called twice from the graph and once from an
    If's branch."""
    inner = _function("Inner", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["r"]),
                                              helper.make_node("Mul", ["r", "a"], ["b"])])
    outer = _function("Outer", ["a"], ["b"], [
        helper.make_node("Inner", ["a"], ["t"], domain="local"),
        helper.make_node("Sub", ["t", "a"], ["u"]),
        helper.make_node("Inner", ["u"], ["b"], domain="local")])
    branch = helper.make_graph([helper.make_node("Outer", ["x"], ["z"], domain="local")],
                               "then", [], [helper.make_empty_tensor_value_info("z")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["w"])], "else", [],
                              [helper.make_empty_tensor_value_info("w")])
    nodes = [helper.make_node("Outer", ["x"], ["o1"], domain="local"),
             helper.make_node("Outer", ["o1"], ["o2"], domain="local"),
             helper.make_node("If", ["flag"], ["o3"], then_branch=branch, else_branch=other),
             helper.make_node("Add", ["o2", "o3"], ["y"])]
    feeds = {"x": _values(3, 5), "flag": np.array(True)}
    feeds["x"][~np.isfinite(feeds["x"])] = 1.5
    model = _with_functions([inner, outer], nodes, feeds)
    want = ort_run(model, feeds)[0]
    imported = ff.onnx.load(model)
    for backend in ("gl", "numpy"):
        got = ff.Session(imported.graph, backend=backend).run(imported.outputs[0],
                                                              imported.feed_dict(feeds))
        assert_close(got, want)


def test_torch_modules_exported_as_functions_match_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch", reason="torch (the test extra) is not installed")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear, self.norm = torch.nn.Linear(10, 10), torch.nn.LayerNorm(10)

        def forward(self, x):
            return self.norm(torch.relu(self.linear(x)))

    module = torch.nn.Sequential(Block(), Block()).eval()
    x = torch.randn(3, 10)
    path = tmp_path / "functions.onnx"
    torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=17,
                      export_modules_as_functions={Block}, input_names=["x"])
    import onnx
    assert len(onnx.load(str(path)).functions) == 1
    imported = ff.onnx.load(str(path))
    got = ff.Session(imported.graph).run(imported.outputs[0], {"x": x.numpy()})
    assert_close(got, ort_run(str(path), {"x": x.numpy()})[0])


def test_a_function_that_calls_itself_is_refused():
    loop = _function("Loop1", ["a"], ["b"], [helper.make_node("Loop1", ["a"], ["b"],
                                                              domain="local")])
    call = helper.make_node("Loop1", ["x"], ["y"], domain="local")
    model = _with_functions([loop], [call], {"x": np.ones(2, np.float32)})
    with pytest.raises(ff.onnx.OnnxImportError, match="local function 'Loop1' .* calls "
                       "itself"):
        ff.onnx.load(model)


def test_functions_that_would_inline_past_the_node_limit_are_refused():
    """F0 is one node, each F(k+1) calls F(k) twice: F20 is 2**20 nodes, counted
    without inlining them."""
    fns = [_function("F0", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])])]
    for k in range(1, 21):
        fns.append(_function(f"F{k}", ["a"], ["b"], [
            helper.make_node(f"F{k - 1}", ["a"], ["t"], domain="local"),
            helper.make_node(f"F{k - 1}", ["t"], ["b"], domain="local")]))
    model = _with_functions(fns, [helper.make_node("F20", ["x"], ["y"], domain="local")],
                            {"x": np.ones(2, np.float32)})
    with pytest.raises(ff.onnx.OnnxImportError, match=r"would make 1048576 nodes, more "
                       r"than 1000000"):
        ff.onnx.load(model)
