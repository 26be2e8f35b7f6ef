"""Every kernel's record says which template rendered it and with which of the
lowering's decisions (Kernel.template, Kernel.params), and the header shows them
without changing the compiled text.

Lowering needs no GL context, so these run anywhere. Re-rendering a template from the
record alone is not possible by design: params keep the decisions (block sizes, passes,
epilogue ops), not the operands, layouts and index maps the template also reads."""
import dataclasses
import os
import re

import numpy as np
import pytest

import fragflow as ff
import fragflow.codegen
from fragflow.codegen import lower
from fragflow.ir.types import TensorType
from fragflow.runtime.driver import optimize

TEMPLATES = os.path.join(os.path.dirname(fragflow.codegen.__file__), "templates")
SCALARS = (bool, int, float, str)


def kernels_of(build, feeds):
    """Every kernel of build()'s fetches, after the default pipeline."""
    g = ff.Graph()
    with g.as_default():
        fetches, placeholders = build()
    types = {p.value: TensorType(shape, "float32")
             for p, shape in zip(placeholders, feeds)}
    compiled = optimize(g, [f.value for f in fetches], types).graph
    return lower(compiled, 16384).kernels


def dense():
    x = ff.placeholder((64, 96), name="x")
    w = ff.constant(np.ones((96, 128), np.float32))
    b = ff.constant(np.ones(128, np.float32))
    return [ff.relu(x @ w + b)], [x]


def elementwise():
    x = ff.placeholder((5, 7), name="x")
    return [ff.exp(x * 2.0 + 1.0)], [x]


def long_sum():
    x = ff.placeholder((8192,), name="x")
    return [ff.reduce_sum(x)], [x]


def convolution():
    img = ff.placeholder((1, 16, 16, 8), name="img")
    f = ff.constant(np.ones((3, 3, 8, 16), np.float32))
    return [ff.relu(ff.conv2d(img, f, strides=1, padding="SAME"))], [img]


GRAPHS = {"dense": (dense, [(64, 96)]), "elementwise": (elementwise, [(5, 7)]),
          "long_sum": (long_sum, [(8192,)]), "conv": (convolution, [(1, 16, 16, 8)])}


@pytest.mark.parametrize("name", GRAPHS)
def test_every_kernel_names_an_existing_template_and_printable_params(name):
    kernels = kernels_of(*GRAPHS[name])
    assert kernels
    for kernel in kernels:
        assert os.path.exists(os.path.join(TEMPLATES, kernel.template)), kernel.template
        assert isinstance(kernel.params, dict)
        for key, value in kernel.params.items():
            items = value.values() if isinstance(value, dict) else \
                value if isinstance(value, tuple) else [value]
            assert all(isinstance(v, SCALARS) for v in items), (kernel.name, key, value)
            assert all(re.fullmatch(r"[A-Za-z0-9_.+-]+", str(v)) for v in items), \
                (kernel.name, key, value)


@pytest.mark.parametrize("name", GRAPHS)
def test_the_header_names_the_template_and_the_compiled_text_does_not_change(name):
    for kernel in kernels_of(*GRAPHS[name]):
        first = kernel.source.splitlines()[1]
        assert first.startswith(f"// fragflow kernel {kernel.name}: ")
        assert f", from {kernel.template}" in first
        bare = dataclasses.replace(kernel, template="", params={})
        assert f"from {kernel.template}" not in bare.source
        # what GL compiles and caches by is the same with or without them
        assert bare.compiled_source == kernel.compiled_source


def test_a_blocked_matmul_records_its_blocking_and_its_stitch_the_epilogue():
    kernels = kernels_of(*GRAPHS["dense"])
    blocked = [k for k in kernels if k.template == "matmul_blocked.glsl.j2"]
    stitch = [k for k in kernels if k.template == "matmul_stitch.glsl.j2"]
    assert len(blocked) == 1 and len(stitch) == 1
    blocking = blocked[0].params["blocking"]
    assert (blocking["m"], blocking["n"], blocked[0].params["k"]) == (64, 128, 96)
    assert blocking["rows"] >= 1 and blocking["cols"] >= 1 and blocked[0].output_layers > 1
    assert stitch[0].params["blocking"] == blocking
    assert stitch[0].params["epilogue"] == ("add", "relu")     # x @ w + b, then relu


def test_a_long_reduction_records_its_passes():
    kernels = kernels_of(*GRAPHS["long_sum"])
    assert {k.template for k in kernels} == {"reduce_tree.glsl.j2"}
    passes = [k.params for k in kernels]
    assert [p["pass_number"] for p in passes] == list(range(1, len(passes) + 1))
    assert all(p["pass_count"] == len(passes) > 1 for p in passes)
    assert all(p["rop"] == "sum" for p in passes)
    # the first pass views the 8192 elements as outer x length x inner (2048 texels x 4
    # lanes: reduce_tree.texel_pass)
    assert passes[0]["outer"] * passes[0]["length"] * passes[0]["inner"] == 8192
    assert passes[-1]["out_length"] == 1
    # each pass reads what the one before it wrote
    assert [p["outer"] * p["length"] * p["inner"] for p in passes[1:]] == \
        [p["out_size"] for p in passes[:-1]]


def test_fused_elementwise_records_its_steps_in_order():
    (kernel,) = kernels_of(*GRAPHS["elementwise"])
    assert kernel.template == "elementwise.glsl.j2"
    assert kernel.params["steps"] == ("mul", "add", "exp")


def test_a_convolution_records_its_template_and_epilogue():
    kernels = kernels_of(*GRAPHS["conv"])
    assert all(k.template.startswith(("conv", "matmul_stitch", "depthwise"))
               for k in kernels)
    # relu is fused: the kernel that writes the result applies it
    assert kernels[-1].params.get("epilogue") == ("relu",)


def test_params_leave_out_glsl_and_user_text():
    from fragflow.codegen.common import decisions
    params = decisions({"init": "uintBitsToFloat(0xff800000u)", "glsl": "a0 * a0;\n",
                        "name": "x; // evil", "rows": 4, "mode": "strided4",
                        "operand": object(), "nothing": None})
    assert params == {"rows": 4, "mode": "strided4"}
