// make bench-browser's page: each workload of bench.json run by fragflow's export
// (./<name>/model.js) and by TensorFlow.js's WebGL backend (tf.min.js, 4.22.0) with the
// same weights, in this page. Per side: the first run (fragflow: load() of the export,
// textures, shader compile and link, one run; TF.js: tensors from the same arrays and
// its first run, which compiles its shaders) and the steady state (runs after warm-up,
// interleaved fragflow / TF.js, each synced by reading its output back). Results are
// POSTed back to the Python driver (bench.py).
/* global tf */

const post = (query, body) => fetch(`/post?${new URLSearchParams(query)}`, {method: 'POST', body});
const ARRAYS = {float32: Float32Array, int32: Int32Array};

async function arraysOf(dir, list) {
  const bytes = await (await fetch(`./${dir}/arrays.bin`)).arrayBuffer();
  const out = {};
  for (const a of list) out[a.name] = {data: new ARRAYS[a.dtype](bytes, a.offset, a.count), ...a};
  return out;
}

// TF.js builders: (weights {name: tf.Tensor}, options) -> (feeds) -> output tf.Tensor
const BUILDERS = {
  mobilenet(w, o) {
    const forward = (x) => tf.tidy(() => {
      let h = tf.fused.conv2d({x, filter: w.stem_w, strides: 2, pad: 'same', bias: w.stem_b,
        activation: 'relu6'});
      o.strides.forEach((s, i) => {
        h = tf.fused.depthwiseConv2d({x: h, filter: w[`dw${i}_w`], strides: s, pad: 'same',
          bias: w[`dw${i}_b`], activation: 'relu6'});
        h = tf.fused.conv2d({x: h, filter: w[`pw${i}_w`], strides: 1, pad: 'same',
          bias: w[`pw${i}_b`], activation: 'relu6'});
      });
      return tf.softmax(tf.fused.matMul({a: tf.mean(h, [1, 2]), b: w.head_w, bias: w.head_b}));
    });
    return (feeds) => {
      const x = tf.tensor(feeds.image.data, feeds.image.shape);
      const y = forward(x);
      x.dispose();
      return y;
    };
  },
  cnn_train(w, o) {
    const v = {};
    for (const [k, t] of Object.entries(w)) v[k] = tf.variable(t);
    const optimizer = tf.train.sgd(o.lr);
    return (feeds) => tf.tidy(() => {
      const x = tf.tensor(feeds.x.data, feeds.x.shape);
      const onehot = tf.oneHot(tf.tensor1d(feeds.y.data, 'int32'), 10);
      return optimizer.minimize(() => {
        let h = tf.relu(tf.add(tf.conv2d(x, v.conv1_w, 1, 'same'), v.conv1_b));
        h = tf.maxPool(h, 2, 2, 'valid');
        h = tf.relu(tf.add(tf.conv2d(h, v.conv2_w, 1, 'same'), v.conv2_b));
        h = tf.relu(tf.add(tf.matMul(tf.reshape(h, [64, 256]), v.fc1_w), v.fc1_b));
        const logits = tf.add(tf.matMul(h, v.fc2_w), v.fc2_b);
        return tf.losses.softmaxCrossEntropy(onehot, logits);    // the batch's mean
      }, true);
    });
  },
  matmul: (w) => () => tf.matMul(w.a, w.b),
  softmax: (w) => () => tf.softmax(w.x),
  sum: (w) => () => tf.sum(w.x),
  relu_fma: (w) => () => tf.tidy(() => tf.relu(tf.add(tf.mul(w.a, w.b), w.c))),
};

function maxDiff(a, b) {
  let diff = 0, scale = 0;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return {diff, scale};
}

const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];

async function workload(gl, c, rounds, budgetMs) {
  const arrays = await arraysOf(c.name, c.arrays);
  const feeds = await arraysOf(c.name, c.feeds);
  const ffFeeds = {};
  for (const [name, f] of Object.entries(feeds)) ffFeeds[name] = f.data;
  const bin = await (await fetch(`./${c.name}/model.bin`)).arrayBuffer();
  const {load} = await import(`./${c.name}/model.js`);

  // first runs: fragflow, then TF.js (both after warmUp)
  let t = performance.now();
  const model = await load({gl, bin});
  const ffOut = (await model.run(ffFeeds))[c.compare];
  const ffFirst = performance.now() - t;
  t = performance.now();
  const weights = {};
  for (const [name, a] of Object.entries(arrays)) weights[name] = tf.tensor(a.data, a.shape, a.dtype);
  const step = BUILDERS[c.tfjs](weights, c.options);
  const y = step(feeds);
  const tfOut = y.dataSync();
  y.dispose();
  const tfFirst = performance.now() - t;
  const agreement = maxDiff(ffOut, tfOut);

  const ffRun = async () => {
    const s = performance.now();
    await model.run(ffFeeds);
    return performance.now() - s;
  };
  const tfRun = () => {
    const s = performance.now();
    const out = step(feeds);
    out.dataSync();
    out.dispose();
    return performance.now() - s;
  };
  for (let i = 0; i < 2; i++) { await ffRun(); tfRun(); }    // warm-up
  const ffTimes = [], tfTimes = [];
  const start = performance.now();
  while (ffTimes.length < rounds && (ffTimes.length < 5 || performance.now() - start < budgetMs)) {
    ffTimes.push(await ffRun());
    tfTimes.push(tfRun());
  }
  const profile = await model.profile(ffFeeds);
  let tfKernels = null;
  try {
    const info = await tf.profile(() => { const out = step(feeds); out.dataSync(); return out; });
    tfKernels = [];
    for (const k of info.kernels) {
      tfKernels.push({name: k.name, ms: typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : null});
    }
  } catch (err) {
    tfKernels = [{name: `tf.profile failed: ${err}`, ms: null}];
  }
  model.dispose();
  for (const t2 of Object.values(weights)) t2.dispose();
  return {
    name: c.name, agreement,
    fragflow: {first: ffFirst, compile: model.timings.compile, steady: median(ffTimes),
      fastest: Math.min(...ffTimes), runs: ffTimes.length, kernels: model.kernels.length,
      method: profile.method,
      profile: profile.kernels.map((k) => ({name: k.name, op: k.op, ms: k.ms}))},
    tfjs: {first: tfFirst, steady: median(tfTimes), fastest: Math.min(...tfTimes),
      runs: tfTimes.length, kernels: tfKernels ? tfKernels.length : null, profile: tfKernels},
  };
}

// What the GPU process does once, for whoever compiles and draws first (ANGLE's shader
// translator, the rasteriser's JIT): done here for both sides, before any first run.
function warmUp(gl) {
  tf.tidy(() => tf.add(tf.ones([64, 64]), tf.ones([64, 64])).dataSync());
  const shader = (type, text) => {
    const s = gl.createShader(type);
    gl.shaderSource(s, text);
    gl.compileShader(s);
    return s;
  };
  const program = gl.createProgram();
  gl.attachShader(program, shader(gl.VERTEX_SHADER, '#version 300 es\n' +
    'void main() { gl_Position = vec4(vec2(gl_VertexID & 1, gl_VertexID >> 1) * 4.0 - 1.0, 0, 1); }'));
  gl.attachShader(program, shader(gl.FRAGMENT_SHADER, '#version 300 es\nprecision highp float;\n' +
    'out vec4 color; void main() { color = vec4(1); }'));
  gl.linkProgram(program);
  gl.useProgram(program);
  gl.drawArrays(gl.TRIANGLES, 0, 3);
  gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, new Uint8Array(4));
  gl.deleteProgram(program);
}

async function main() {
  const spec = await (await fetch('./bench.json')).json();
  await tf.setBackend('webgl');
  await tf.ready();
  const canvas = new OffscreenCanvas(1, 1);
  const gl = canvas.getContext('webgl2', {antialias: false, depth: false});
  warmUp(gl);
  const info = gl.getExtension('WEBGL_debug_renderer_info');
  await post({kind: 'info'}, JSON.stringify({
    renderer: info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER),
    tfjs: tf.version.tfjs, backend: tf.getBackend(),
    timer: !!gl.getExtension('EXT_disjoint_timer_query_webgl2'),
    parallel: !!gl.getExtension('KHR_parallel_shader_compile'),
  }));
  for (const c of spec.workloads) {
    try {
      const result = await workload(gl, c, spec.rounds, spec.budgetMs);
      await post({kind: 'result', name: c.name}, JSON.stringify(result));
    } catch (err) {
      await post({kind: 'error', name: c.name}, String(err && err.stack || err));
    }
  }
  await post({kind: 'done'}, '');
}
main().catch((err) => post({kind: 'fatal'}, String(err && err.stack || err)));
