"""fragflow in one screen: build a small graph, run it on OpenGL, show what ran.

Prints the graph's text dump, one generated GLSL shader, and the GL result beside
the numpy reference executor's."""
import numpy as np

import fragflow as ff

g = ff.Graph("demo")
with g.as_default():
    x = ff.placeholder((None, 4), "float32", name="x")
    w = ff.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")
    b = ff.constant(np.array([0.1, -0.2, 0.3], np.float32), name="b")
    with ff.name_scope("dense"):
        y = ff.relu(x @ w + b)
    loss = ff.mean(ff.square(y))

xb = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)

print("== graph ==")
print(ff.dump(g))

with ff.Session(g) as sess:
    fn = sess.compile([y, loss], feeds=[x])
    gl_y, gl_loss = fn(xb)
    kernels = fn.kernels
    print(f"\n== {len(kernels)} kernels: {', '.join(k.name for k in kernels)} ==")
    print(f"\n== shader of {kernels[0].name} ==")
    print(kernels[0].source)
    info = ff.gl_info()

with ff.Session(g, backend="numpy") as ref:
    np_y, np_loss = ref.run([y, loss], {x: xb})

print("== result ==")
print(f"backend: {info['backend']} ({info['renderer']}, OpenGL {info['version']})")
print(f"loss on GL:    {gl_loss:.7f}")
print(f"loss on numpy: {np_loss:.7f}")
error = float(np.max(np.abs(gl_y - np_y)))
print(f"max |GL - numpy| over y{list(gl_y.shape)}: {error:.3g}")
assert np.allclose(gl_y, np_y, rtol=1e-5, atol=1e-6), "GL and numpy disagree"
print("GL matches numpy.")
