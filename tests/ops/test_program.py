"""User-written GPU programs: forward against numpy, gradients (first and second
order), compile errors mapped to the user's lines, and the errors for bad use."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches

rng = np.random.default_rng(5)

square_add = ff.gpgpu_program(
    name="square_add", inputs=["x"], output=lambda x: (x.shape, x.dtype),
    glsl="""
        float v = getXAtOutCoords();
        setOutput(v * v + v);
    """,
    gradient=lambda x, y, dy: [dy * (2.0 * x + 1.0)],
    reference=lambda x: x * x + x)

affine = ff.gpgpu_program(
    name="affine", inputs=["a", "bias"], output=lambda a, bias: (a.shape, a.dtype),
    uniforms={"scale": "float", "shift": "int"},
    glsl="""
        ivec3 c = getOutputCoords();
        float v = getA(c.x, c.y, c.z) * scale + getBiasAtOutCoords();
        setOutput(v + float(shift) + float(outShape.z - aShape.z));
    """,
    gradient=lambda a, bias, y, dy, scale, shift: [dy * scale, ff.sum(dy, axis=(0, 1))],
    reference=lambda a, bias, scale, shift: a * scale + bias + shift)

row_sums = ff.gpgpu_program(
    name="row_sums", inputs=["m"], output=lambda m: (m.shape[:1], m.dtype),
    glsl="""
        int row = getOutputCoords();
        float total = 0.0;
        for (int j = 0; j < mShape.y; ++j) total += getM(row, j);
        setOutput(total);
    """)


def test_programs_compute_what_their_glsl_says(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((7, 3), name="x")
        a = ff.placeholder((2, 3, 5), name="a")
        bias = ff.placeholder((5,), name="bias")
        y = square_add(x)
        z1 = affine(a, bias, scale=2.0, shift=3)
        z2 = affine(a, bias, scale=-0.5, shift=-1)     # same program, other uniforms
        s = row_sums(x)
    xb = rng.standard_normal((7, 3)).astype(np.float32)
    ab = rng.standard_normal((2, 3, 5)).astype(np.float32)
    bb = rng.standard_normal(5).astype(np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([y, z1, z2, s], feeds=[x, a, bias])
        out = fn(xb, ab, bb)
        assert sum(k.op == "affine" for k in fn.kernels) == 2
    assert_matches(out[0], xb * xb + xb)
    assert_matches(out[1], ab * 2.0 + bb + 3.0)
    assert_matches(out[2], ab * -0.5 + bb - 1.0)
    assert_matches(out[3], xb.sum(axis=1), rtol=1e-5)


def test_numpy_backend_uses_the_reference_or_says_there_is_none():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        y = square_add(x)
        s = row_sums(ff.reshape(x, (2, 2)))
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        assert_matches(sess.run(y, {x: np.arange(4, dtype=np.float32)}),
                       np.array([0, 2, 6, 12], np.float32))
        with pytest.raises(ff.FragflowError, match="program 'row_sums' has no numpy "
                                                   "reference"):
            sess.run(s, {x: np.zeros(4, np.float32)})


def test_program_without_gradient_names_itself():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3), name="x")
        s = row_sums(x)
        with pytest.raises(ff.GradientError, match="program 'row_sums' .*gradient="):
            ff.gradients(ff.sum(s), [x])


def test_compile_error_points_at_the_users_line(gl):
    broken = ff.gpgpu_program(
        name="broken", inputs=["x"], output=lambda x: (x.shape, x.dtype),
        glsl="""
            float v = getXAtOutCoords();
            float w = v * 2.0;
            setOutput(w + not_declared);
        """)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        y = broken(x)
    with ff.Session(g) as sess, pytest.raises(ff.ShaderCompileError) as err:
        sess.run(y, {x: np.zeros(3, np.float32)})
    message = str(err.value)
    assert "program 'broken': its GLSL did not compile" in message
    assert "line 4" in message and "not_declared" in message
    assert "   4 | setOutput(w + not_declared);" in message


@pytest.mark.parametrize("make, error, message", [
    (lambda x: square_add(x, x), ff.AttrError, "takes 1 input"),
    (lambda x: affine(x, x, scale=1.0), ff.AttrError, "uniform 'shift' .*needs a value"),
    (lambda x: affine(x, x, scale="big", shift=1), ff.DTypeError, "'scale' is float"),
    (lambda x: affine(x, x, scale=1.0, shift=1.5), ff.DTypeError, "'shift' is int"),
    (lambda x: affine(x, x, scale=1.0, shift=1, other=2), ff.AttrError, "no uniform"),
    (lambda x: ff.gpgpu_program(name="p", inputs=["x"], output=lambda x: (x.shape,),
                                glsl="")(x), ff.ShapeError, "not \\(shape, dtype\\)"),
    (lambda x: ff.gpgpu_program(name="p", inputs=["x"], output=lambda x: ((-1,), "float32"),
                                glsl="")(x), ff.ShapeError, "not a non-negative int"),
    (lambda x: ff.gpgpu_program(name="p", inputs=["x"],
                                output=lambda x: (x.shape, "float64x"), glsl="")(x),
     ff.DTypeError, "output dtype"),
    (lambda x: ff.gpgpu_program(name="p", inputs=["x"], output=lambda x: (x.shape, x.dtype),
                                glsl="", uniforms={"u": "vec9"}), ff.AttrError, "vec9"),
])
def test_bad_programs_and_calls_are_named(make, error, message):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3), name="x")
        with pytest.raises(error, match=message):
            make(x)


def test_programs_show_in_the_dump_by_name():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        square_add(x)
    line = ff.dump(g).splitlines()[2]
    assert "gpgpu_program(%x) {name=square_add" in line and "glsl=<2 lines>" in line
    assert "# square_add" in line


def test_custom_program_example_runs(gl):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, os.path.join(root, "examples",
                                                          "custom_program.py")],
                            capture_output=True, text=True, timeout=300, cwd=root)
    assert result.returncode == 0, result.stderr
    assert "matches numpy" in result.stdout


def test_a_program_compiles_once_and_is_reused_across_sessions(gl):
    def build():
        g = ff.Graph()
        with g.as_default():
            x = ff.placeholder((5, 2), name="x")
            y = affine(ff.reshape(x, (1, 5, 2)), ff.constant(np.ones(2, np.float32)),
                       scale=1.5, shift=0)
        return g, x, y
    xb = np.ones((5, 2), np.float32)
    g, x, y = build()
    with ff.Session(g) as sess:
        sess.run(y, {x: xb})
    compiles = gl.shaders.compiles
    g2, x2, y2 = build()
    with ff.Session(g2) as sess:
        for _ in range(3):
            out = sess.run(y2, {x2: xb})
    assert gl.shaders.compiles == compiles
    assert_matches(out, np.full((1, 5, 2), 2.5, np.float32))
