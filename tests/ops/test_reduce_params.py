"""The reduce family's kernels are built from frozen dataclasses (codegen/reduce_tree.py
PassParams, FillParams, SoftmaxDirectParams, NormalizeParams; codegen/scan.py
ScanKernelParams; codegen/reduce.py LrnParams; codegen/loss.py LossParams): the kernel
record's params are their fields, in declaration order, and what a template derives
from them is the dataclass's. No GL."""
import dataclasses

import pytest

import fragflow as ff
from fragflow.codegen.loss import LossParams
from fragflow.codegen.lower import lower
from fragflow.codegen.reduce import LrnParams
from fragflow.codegen.reduce_tree import (
    FillParams,
    NormalizeParams,
    PassParams,
    SoftmaxDirectParams,
    template_context,
)
from fragflow.codegen.scan import ScanKernelParams

KINDS = {"pass": PassParams, "fill": FillParams, "softmax_direct": SoftmaxDirectParams,
         "normalize": NormalizeParams, "cumsum": ScanKernelParams, "lrn": LrnParams,
         "direct": LossParams, "stats": LossParams}


def kernels_of(build, shape, dtype="float32"):
    g = ff.Graph()
    with g.as_default():
        build(ff.placeholder(shape, dtype=dtype, name="x"))
    return lower(g).kernels


BUILDS = {
    "sum rows": (lambda x: ff.reduce_sum(x, axis=1), (64, 4096)),
    "mean columns": (lambda x: ff.reduce_mean(x, axis=0), (4096, 64)),
    "argmax": (lambda x: ff.argmax(x, axis=1), (4, 37)),
    "variance": (lambda x: ff.reduce_variance(x, axis=-1), (3, 100)),
    "empty": (lambda x: ff.reduce_sum(x, axis=1), (3, 0)),
    "softmax direct": (lambda x: ff.softmax(x), (4, 10)),
    "softmax tree": (lambda x: ff.log_softmax(x, 0), (1024, 12)),
    "softmax partials": (lambda x: ff.softmax(x), (1024, 1000)),
    "cumsum": (lambda x: ff.cumsum(x, 1, reverse=True), (3, 1000)),
    "lrn": (lambda x: ff.local_response_normalization(x, depth_radius=2), (1, 2, 2, 8)),
    "loss": (lambda x: ff.sparse_softmax_cross_entropy_with_logits(
        labels=ff.placeholder((256,), dtype="int32", name="y"), logits=x), (256, 64)),
}


@pytest.mark.parametrize("label", list(BUILDS))
def test_the_record_is_the_dataclass_in_field_order(label):
    family = [k for k in kernels_of(*BUILDS[label]) if k.template in
              ("reduce_tree.glsl.j2", "reduce.glsl.j2", "loss.glsl.j2")]
    assert family, label
    for kernel in family:
        kind = KINDS[kernel.params["kind"]]
        names = [f.name for f in dataclasses.fields(kind)]
        assert list(kernel.params) == [n for n in names if n in kernel.params], label
        assert "params" not in kernel.params


def test_derived_decisions():
    step = dict(rop="sum", outer=1, length=64, inner=8, window=64, out_length=1,
                out_size=8)
    columns = PassParams(mode="strided4", targets=2, **step)
    assert (columns.main, columns.stepping, columns.step_texels) == ("columns", "texels", 2)
    assert PassParams(mode="strided4", row_run="rows", **step).stepping == "uv"
    assert PassParams(mode="strided", positional=">", **step).arg
    assert PassParams(mode="strided", positional="<", **step).winner == "smallest"
    assert not PassParams(mode="strided", **step).counts
    assert PassParams(mode="strided", finish_glsl="a / float(COUNT)", **step).counts
    assert FillParams(rop="sum", identity="0.0").main == "fill"
    assert (FillParams(rop="sum", identity="0.0").targets, FillParams.layered) == (1, None)
    assert NormalizeParams(rop="softmax", log=False, length=8, inner=1,
                           partials=False).texel_slice
    assert not NormalizeParams(rop="softmax", log=False, length=6, inner=1,
                               partials=False).texel_slice
    assert NormalizeParams(rop="softmax", log=False, length=8, inner=1,
                           partials=True).max4
    scan = dict(contiguous=True, exclusive=False, block=64, blocks=2, offsets=None,
                unroll=1, count=100, stride=1, start_index=None)
    forward, backward = (ScanKernelParams(reverse=r, **scan) for r in (False, True))
    assert (forward.direction, forward.offsets_from, forward.main) == \
        (1, "before", "cumsum_contiguous_main")
    assert (backward.direction, backward.offsets_from) == (-1, "after")


def test_a_context_that_would_show_in_the_header_is_refused():
    lrn = LrnParams(grad=False, depth=8, radius=2, bias="1.0", alpha="1.0", beta=0.5,
                    beta_glsl="0.5", two_alpha_beta="1.0")
    with pytest.raises(TypeError, match="header"):
        template_context(lrn)
    fill = template_context(FillParams(rop="sum", identity="0.0"))
    assert list(fill) == ["kind", "rop", "values", "identity", "params"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fill["params"].rop = "max"
