"""Your own GLSL as a graph op: ff.gpgpu_program.

A program with its gradient (square_add), and a two-input program with a uniform
(scaled_add). Both run on GL and are checked against numpy, values and gradients."""
import numpy as np

import fragflow as ff

square_add = ff.gpgpu_program(
    name="square_add",
    inputs=["x"],
    output=lambda x: (x.shape, x.dtype),
    glsl="""
        float v = getXAtOutCoords();
        setOutput(v * v + v);
    """,
    gradient=lambda x, y, dy: [dy * (2.0 * x + 1.0)],
)

scaled_add = ff.gpgpu_program(
    name="scaled_add",
    inputs=["a", "b"],
    output=lambda a, b: (a.shape, a.dtype),
    uniforms={"scale": "float"},
    glsl="""
        ivec2 c = getOutputCoords();                 // (row, column)
        setOutput(scale * getA(c.x, c.y) + getBAtOutCoords());
    """,
    # uniforms come as keywords; b was broadcast along rows, so its gradient sums them
    gradient=lambda a, b, y, dy, scale: [dy * scale, ff.sum(dy, axis=0)],
)

g = ff.Graph("custom")
with g.as_default():
    x = ff.placeholder((4, 3), name="x")
    bias = ff.constant(np.array([1.0, -1.0, 0.5], np.float32), name="bias")
    y = square_add(x)
    z = scaled_add(y, bias, scale=0.5)
    loss = ff.sum(z)
    (dx,) = ff.gradients(loss, [x])

xb = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
with ff.Session(g) as sess:
    fn = sess.compile([z, dx], feeds=[x])
    z_gl, dx_gl = fn(xb)
    print(ff.dump(g))
    print(f"\n{len(fn.kernels)} kernels: {', '.join(k.name for k in fn.kernels)}")
    print(next(k for k in fn.kernels if k.op == "square_add").source)

z_np = 0.5 * (xb * xb + xb) + np.array([1.0, -1.0, 0.5])
dx_np = 0.5 * (2 * xb + 1)
assert np.allclose(z_gl, z_np, rtol=1e-5, atol=1e-6)
assert np.allclose(dx_gl, dx_np, rtol=1e-5, atol=1e-6)
print("square_add and scaled_add on GL: matches numpy (values and gradient)")
