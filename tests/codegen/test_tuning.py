"""ff.Tuning (codegen/tuning): its profiles, how a device picks one, with_() and
FRAGFLOW_TUNING, the Session's check, the plan cache's key, Kernel.strategy, and small
models lowered with the GPU and WebGL profiles against the reference on this device."""
import dataclasses
import importlib

import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.limits import Limits
from fragflow.codegen.lower import lower
from fragflow.codegen.tuning import PROFILES, SECTIONS, active, tuning_with
from fragflow.runtime import plan_cache
from fragflow.runtime.driver import optimize
from tests.reference import assert_matches, fed_placeholders, normal, run_both


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("FRAGFLOW_TUNING", raising=False)


def _knob(kind) -> tuple:
    """("section.knob", section name, knob name, llvmpipe's value) of the first knob of
    that kind (bool, int): the tests do not depend on which knobs the families have."""
    for section in sorted(SECTIONS):
        for f in dataclasses.fields(getattr(ff.Tuning(), section)):
            value = getattr(getattr(ff.Tuning(), section), f.name)
            if type(value) is kind:
                return f"{section}.{f.name}", section, f.name, value
    return None


INT, BOOL = _knob(int), _knob(bool)
# the cases below that need a bool knob go where no family has one (None: left out)
_WITH_BOOL = BOOL is not None
BOOL = BOOL or ("reduce.no_bool_knob", "reduce", "no_bool_knob", True)


# -- profiles -------------------------------------------------------------------------
def test_each_profile_is_its_sections_defaults():
    for profile in PROFILES:
        t = ff.Tuning.named(profile)
        assert t.profile == profile and t.prefer == () and t.exclude == ()
        for name, module in SECTIONS.items():
            assert getattr(t, name) == module.PROFILES[profile]
    assert ff.Tuning.named("llvmpipe") == ff.Tuning()     # the default is llvmpipe's


def test_an_unknown_profile_is_named_in_the_error():
    with pytest.raises(ff.TuningError, match="'tpu'.*llvmpipe, gpu, webgl"):
        ff.Tuning.named("tpu")
    with pytest.raises(ff.TuningError, match="'tpu'"):
        ff.Tuning(profile="tpu")


@pytest.mark.parametrize("renderer, profile", [
    ("llvmpipe (LLVM 15.0.7, 256 bits)", "llvmpipe"),
    ("zink Vulkan 1.3(llvmpipe (LLVM 15.0.7, 256 bits))", "llvmpipe"),
    ("SwiftShader Device", "llvmpipe"),                  # Google's CPU rasteriser
    ("ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device (Subzero)), SwiftShader driver)",
     "llvmpipe"),
    ("NVIDIA H200/PCIe/SSE2", "gpu"),
    ("ANGLE (NVIDIA, NVIDIA GeForce RTX 3080 Direct3D11 vs_5_0 ps_5_0, D3D11)", "gpu"),
    ("AMD Radeon RX 7900 XTX (radeonsi, navi31, LLVM 17.0.6, DRM 3.54)", "gpu"),
    ("", "gpu"),
])
def test_for_device_picks_the_profile_from_the_renderer(renderer, profile, no_env):
    assert ff.Tuning.for_device({"renderer": renderer}) == ff.Tuning.named(profile)


def _get(tuning, dotted):
    section, _, knob = dotted.partition(".")
    return getattr(getattr(tuning, section), knob)


def test_for_device_applies_fragflow_tuning(monkeypatch):
    monkeypatch.setenv("FRAGFLOW_TUNING", f"gpu,{INT[0]}=1024")
    t = ff.Tuning.for_device({"renderer": "llvmpipe (LLVM 15.0.7, 256 bits)"})
    assert t.profile == "gpu" and _get(t, INT[0]) == 1024
    assert t == ff.Tuning.named("gpu").with_({INT[0]: 1024})


# -- with_() ----------------------------------------------------------------------------
def test_with_changes_knobs_and_keeps_the_rest():
    base = ff.Tuning()
    dotted, section, knob, value = INT
    t = base.with_({dotted: value + 1}, prefer=("conv.direct",))
    assert _get(t, dotted) == value + 1 and t.prefer == ("conv.direct",)
    others = [f.name for f in dataclasses.fields(getattr(base, section)) if f.name != knob]
    assert all(getattr(getattr(t, section), k) == getattr(getattr(base, section), k)
               for k in others)
    assert _get(base, dotted) == value                       # frozen: base unchanged
    same = base.with_(**{section: {knob: value + 1}}, prefer=("conv.direct",))
    assert same == t and hash(same) == hash(t)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.profile = "gpu"


@pytest.mark.parametrize("changes, match", [
    ({"convv.split_rows": False}, "no section or field 'convv'"),
    ({"matmul.blocked_min_mac": 1}, "Tuning.matmul has no knob 'blocked_min_mac'"),
    ({"reduce.nope": 1}, "Tuning.reduce has no knob 'nope'"),
    ({INT[0]: True}, f"{INT[0]} is a int knob"),
    ({INT[0]: 1.5}, f"{INT[0]} is a int knob"),
    *([({BOOL[0]: 1}, f"{BOOL[0]} is a bool knob")] if _WITH_BOOL else []),
    ({"max_loop_trips": 0}, "max_loop_trips must be a positive int"),
    ({"prefer": "conv.direct"}, "prefer must be a tuple of strategy names"),
])
def test_with_names_what_does_not_exist_or_fit(changes, match):
    with pytest.raises(ff.TuningError, match=match):
        ff.Tuning().with_(changes)


def test_a_section_given_whole_and_by_field_is_an_error():
    section = INT[1]
    with pytest.raises(ff.TuningError, match=f"{section} given both"):
        ff.Tuning().with_({section: getattr(ff.Tuning(), section), INT[0]: 1})


# -- FRAGFLOW_TUNING --------------------------------------------------------------------
@pytest.mark.skipif(not _WITH_BOOL, reason="no family has a bool knob")
def test_fragflow_tuning_items():
    t = ff.Tuning().from_env(f" webgl , {INT[0]}=1024,{BOOL[0]}={str(not BOOL[3]).lower()},"
                             "max_loop_trips=100,prefer=conv.direct+matmul.lanes,"
                             "exclude=matmul.packed")
    assert t.profile == "webgl" and _get(t, INT[0]) == 1024
    assert _get(t, BOOL[0]) is (not BOOL[3]) and t.max_loop_trips == 100
    assert t.prefer == ("conv.direct", "matmul.lanes") and t.exclude == ("matmul.packed",)
    assert ff.Tuning().from_env("") == ff.Tuning()
    # a profile name starts again from its defaults
    assert ff.Tuning().from_env(f"{INT[0]}=1024,gpu") == ff.Tuning.named("gpu")


def test_fragflow_tuning_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("FRAGFLOW_TUNING", f"{INT[0]}=4096")
    assert _get(ff.Tuning().from_env(), INT[0]) == 4096


@pytest.mark.parametrize("text, match", [
    ("tpu", "unknown tuning profile 'tpu'"),
    (f"{INT[0]}=lots", f"{INT[2]}='lots' is not a number or true/false"),
    (f"{INT[0]}=yes", "is not a number or true/false"),
    (f"{INT[0]}=1.5", f"{INT[0]} is a int knob"),
    *([(f"{BOOL[0]}=1", f"{BOOL[0]} is a bool knob")] if _WITH_BOOL else []),
    ("matmul.nope=1", "Tuning.matmul has no knob 'nope'"),
    ("gpus.x=1", "no section or field 'gpus'"),
])
def test_fragflow_tuning_errors_name_the_item(text, match):
    with pytest.raises(ff.TuningError, match=match):
        ff.Tuning().from_env(text)


# -- the Session, the active tuning, the plan cache's key ------------------------------
@pytest.mark.parametrize("wrong", ["gpu", {"matmul.blocked_min_macs": 1}, 3])
def test_session_takes_only_a_tuning(wrong):
    g = ff.Graph()
    with g.as_default():
        ff.placeholder((2,), name="x")
    with pytest.raises(ff.TuningError, match="takes an ff.Tuning, not"):
        ff.Session(g, backend="numpy", tuning=wrong)


def test_the_active_tuning_is_set_for_a_block_only():
    gpu = ff.Tuning.named("gpu")
    assert active() == ff.Tuning()
    with tuning_with(gpu):
        assert active() is gpu
    assert active() == ff.Tuning()


def _small_graph():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 6), name="x")
        w = ff.constant(np.ones((6, 3), np.float32))
        y = ff.relu(ff.matmul(x, w))
    return g, x, y


def test_the_plan_cache_key_holds_the_tuning():
    g, x, y = _small_graph()

    def key(tuning):
        return plan_cache.plan_key(g, [y.value], {x.value: x.value.type}, Limits(), tuning)

    assert key(ff.Tuning()) == key(ff.Tuning.named("llvmpipe"))
    assert key(ff.Tuning.named("gpu")) == key(ff.Tuning.named("gpu"))
    assert key(ff.Tuning()) != key(ff.Tuning.named("gpu"))
    assert key(ff.Tuning()) != key(ff.Tuning().with_({INT[0]: INT[3] + 1}))
    assert key(ff.Tuning()) != key(ff.Tuning().with_(prefer=("matmul.lanes",)))


# -- Kernel.strategy ------------------------------------------------------------------
def _lowered(build, shapes, tuning=None):
    g = ff.Graph()
    with g.as_default():
        feeds = [ff.placeholder(s, name=f"in{i}") for i, s in enumerate(shapes)]
        out = build(*feeds)
    optimized = optimize(g, [out.value], {f.value: f.value.type for f in feeds})
    return lower(optimized.graph, Limits(), tuning=tuning)


def test_kernels_of_a_lowered_graph_name_their_strategy():
    lowered = _lowered(lambda x, w: ff.reduce_sum(ff.nn.softmax(ff.matmul(x, w)), axis=0),
                       [(8, 16), (16, 12)])
    kernels = lowered.kernels
    assert kernels
    assert [k.strategy for k in kernels] == [
        "matmul.plain", "softmax.direct", "reduce.texel_passes"], \
        [(k.name, k.strategy) for k in kernels]


def test_a_family_of_one_kernel_kind_names_it_after_its_template():
    """Families without a table (one kind of kernel) name theirs '<family>.<template>'."""
    kernels = _lowered(lambda x: ff.concat([ff.sin(x), ff.transpose(x)], 0),
                       [(5, 5)]).kernels
    assert all(k.strategy.count(".") == 1 for k in kernels), kernels
    assert [k.strategy for k in kernels] == [
        "elementwise.elementwise", "shape.shape", "structure.structure"], \
        [(k.name, k.strategy) for k in kernels]


# -- the other profiles' kernel choices, computed on this device -----------------------
def _cnn(x):
    rng = np.random.default_rng(7)
    w1 = ff.constant(rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.3)
    h = ff.nn.relu(ff.nn.conv2d(x, w1, strides=1, padding="SAME"))
    h = ff.nn.max_pool2d(h, 2, 2, "VALID")
    w2 = ff.constant(rng.standard_normal((3, 3, 8, 8)).astype(np.float32) * 0.2)
    h = ff.nn.conv2d(h, w2, strides=1, padding="VALID")
    h = ff.nn.avg_pool2d(h, 2, 2, "VALID")
    flat = ff.reshape(h, (-1, 3 * 3 * 8))
    w3 = ff.constant(rng.standard_normal((72, 10)).astype(np.float32) * 0.1)
    return ff.nn.softmax(ff.matmul(flat, w3) + 0.5)


MODELS = {
    "cnn": (_cnn, [(2, 16, 16, 3)], 1e-4),
    "softmax": (lambda x: ff.nn.softmax(x * 3.0), [(5, 300)], 1e-5),
    "reductions": (lambda x: ff.reduce_sum(x, axis=0) + ff.reduce_max(x, axis=1)[:1]
                   + ff.reduce_mean(ff.square(x)), [(700, 33)], 1e-4),
}


@pytest.mark.parametrize("profile", ["gpu", "webgl"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_models_with_the_gpu_and_webgl_profiles_match_the_reference(gl, model, profile):
    build, shapes, rtol = MODELS[model]
    rng = np.random.default_rng(3)
    g = ff.Graph()
    with g.as_default():
        holders, feeds = fed_placeholders([normal(rng, *s) for s in shapes])
        y = build(*holders)
    got, want = run_both(g, y, feeds, tuning=ff.Tuning.named(profile))
    assert_matches(got, want, rtol=rtol, atol=1e-5, what=f"{model} ({profile})")


# -- the WebGL export's profile -------------------------------------------------------
def test_webgl_export_lowers_with_the_webgl_profile_by_default(tmp_path, monkeypatch):
    webgl_export = importlib.import_module("fragflow.tools.webgl.export")   # the module
    seen = []
    real = webgl_export.lower

    def spy(graph, limits, tuning=None):
        seen.append(tuning)
        return real(graph, limits, tuning=tuning)
    monkeypatch.setattr(webgl_export, "lower", spy)
    g, x, y = _small_graph()
    ff.webgl.export(y, [x], tmp_path / "a", page=False)
    llvmpipe = ff.Tuning.named("llvmpipe")
    ff.webgl.export(y, [x], tmp_path / "b", page=False, tuning=llvmpipe)
    # each export lowers twice: for 4 render targets and for its variant's 8
    assert seen == [ff.Tuning.named("webgl")] * 2 + [llvmpipe] * 2
    with pytest.raises(ff.TuningError, match="takes an ff.Tuning, not str"):
        ff.webgl.export(y, [x], tmp_path / "c", tuning="webgl")
