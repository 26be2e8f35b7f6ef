// make bench-transformers' page (bench_transformers.py): each ONNX model of
// onnx_models.json run by fragflow's export (./<name>/ff/model.js) and by
// onnxruntime-web 1.30 on the same .onnx file (./<name>/model.onnx) in this page, on the
// same seeded feeds: its wasm backend with one thread (ort.wasm.min.mjs) and, where
// spec.webgpu and the browser has an adapter, its WebGPU backend (ort.webgpu.min.mjs).
// Per side: the first run (fragflow: import + load(), which fetches model.bin and
// compiles, + run; ort: InferenceSession.create, which fetches the model and
// initialises the backend, + run), the outputs (posted back as raw bytes), then -- with
// rounds > 0 -- interleaved steady-state runs each synced by reading every output back
// to the CPU, and fragflow's per-kernel profile. A GPT-2 (c.generate) is a generation:
// fragflow's one run makes every token; ort runs the greedy loop here (argmax of the
// last logits, the token and the present key/values fed back; the prefill feeds a
// cache of length 0), and each side posts its tokens.
import {feedsOf, interleave, post, runPage} from './pagelib.js';

const ORT = {wasm: './ort/ort.wasm.min.mjs', webgpu: './ort/ort.webgpu.min.mjs'};
const ORT_ARRAYS = {int64: (a) => BigInt64Array.from(a, BigInt), int32: (a) => a,
  float32: (a) => a};

async function ortSide(ep, c, feeds) {
  const ort = await import(ORT[ep]);
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  const t = performance.now();
  const session = await ort.InferenceSession.create(`./${c.name}/model.onnx`,
    {executionProviders: [ep], graphOptimizationLevel: 'all'});
  const inputs = feeds.map((f) => [f.onnx, f.onnxDtype, ORT_ARRAYS[f.onnxDtype](f.data), f.shape]);
  const run = async () => {
    const fed = {};
    for (const [name, dtype, data, shape] of inputs) fed[name] = new ort.Tensor(dtype, data, shape);
    const out = await session.run(fed);
    return c.onnxOutputs.map((name) => out[name].data);   // on the CPU: read back
  };
  const generate = async () => {     // GPT-2 (c.generate): greedy, the cache fed back
    const g = c.generate;
    let fed = {};
    for (const [name, dtype, data, shape] of inputs) fed[name] = new ort.Tensor(dtype, data, shape);
    for (const name of g.past) fed[name] = new ort.Tensor('float32', new Float32Array(0), g.pastShape);
    const tokens = new Float32Array(g.newTokens);
    for (let t = 0; t < g.newTokens; t++) {
      const out = await session.run(fed);
      const logits = out.logits.data;
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
      tokens[t] = best;
      fed = {input_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(best)), [1, 1])};
      g.past.forEach((name, i) => { fed[name] = out[g.present[i]]; });
    }
    return [tokens];
  };
  if (c.generate) return {session, run: generate, firstOut: await generate(),
    first: performance.now() - t, version: ort.env.versions};
  const firstOut = await run();
  return {session, run, firstOut, first: performance.now() - t, version: ort.env.versions};
}

async function ffSide(gl, c, feeds) {
  const ffFeeds = {};
  for (const f of feeds) ffFeeds[f.ff] = f.data;
  const t = performance.now();
  const {load} = await import(`./${c.name}/ff/model.js`);
  const model = await load({gl});
  const out = await model.run(ffFeeds);
  // posted as float32 (GPT-2's int32 tokens too)
  return {model, ffFeeds, run: () => model.run(ffFeeds),
    firstOut: c.outputs.map((n) => Float32Array.from(out[n])),
    first: performance.now() - t};
}

async function runModel(gl, c, spec, webgpu) {
  const feeds = await feedsOf(c);
  const sides = {fragflow: await ffSide(gl, c, feeds)};
  const result = {name: c.name, errors: {}};
  for (const ep of webgpu ? ['wasm', 'webgpu'] : ['wasm']) {
    try {
      sides[ep] = await ortSide(ep, c, feeds);
    } catch (err) {
      result.errors[ep] = String(err && err.stack || err);
    }
  }
  for (const [side, s] of Object.entries(sides)) {
    for (let i = 0; i < s.firstOut.length; i++) {
      await post({kind: 'out', name: c.name, side, index: i}, s.firstOut[i]);
    }
    result[side] = {first: s.first};
  }
  const ff = sides.fragflow;
  Object.assign(result.fragflow, {compile: ff.model.timings.compile,
    kernels: ff.model.kernels.length});
  if (spec.rounds > 0) {
    const runners = Object.fromEntries(Object.entries(sides).map(([k, s]) => [k, s.run]));
    const timed = await interleave(runners, spec.rounds, spec.budgetMs);
    for (const side of Object.keys(sides)) Object.assign(result[side], timed[side]);
    if (spec.profile) {
      try {
        const profile = await ff.model.profile(ff.ffFeeds);
        result.fragflow.method = profile.method;
        result.fragflow.profile = profile.kernels.map((k) => [k.op, k.ms]);
      } catch (err) {
        result.errors.profile = String(err && err.stack || err);
      }
    }
  }
  ff.model.dispose();
  for (const ep of ['wasm', 'webgpu']) if (sides[ep]) await sides[ep].session.release();
  return result;
}

runPage(async () => {
  const spec = await (await fetch('./onnx_models.json')).json();
  let adapter = null;
  if (spec.webgpu && navigator.gpu) adapter = await navigator.gpu.requestAdapter();
  return {items: spec.models, key: 'name',
    run: (gl, c) => runModel(gl, c, spec, adapter !== null),
    info: {webgpu: adapter ? `${adapter.info.vendor} ${adapter.info.architecture}`.trim() :
      (spec.webgpu ? 'no adapter' : 'not asked')}};
});
