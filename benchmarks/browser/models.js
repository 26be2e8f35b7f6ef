// make bench-models' page (bench_models.py) and tests/tfjs/test_tfjs_browser.py's: each
// TF.js model of models.json run by fragflow's export (./<name>/ff/model.js) and by
// TF.js 4.22's WebGL backend (tf.loadGraphModel on the same model.json and shards,
// ./<name>/tfjs/; tf.loadLayersModel and predict for a layers model), in this page, on
// the same seeded feeds. Per side: the first run
// (fragflow: load(), which fetches model.bin and compiles; TF.js: loadGraphModel, which
// fetches the files, and its first execute, which compiles), the outputs (posted back
// as raw bytes), then -- with rounds > 0 -- interleaved steady-state runs each synced by
// reading every output back, and a per-kernel profile of each side.
/* global tf */
import {feedsOf, interleave, post, runPage} from './pagelib.js';

function tfjsRunner(model, feeds, layers) {
  let sync = true;
  return async () => {
    const inputs = {};
    for (const f of feeds) inputs[f.name] = tf.tensor(f.data, f.shape, f.dtype);
    let outs;
    if (layers) {       // a layers model: predict, its inputs in the model's order
      outs = model.predict(feeds.map((f) => inputs[f.name]));
    } else if (sync) {
      try {
        outs = model.execute(inputs);
      } catch (err) {     // control flow or dynamic shapes: executeAsync only
        sync = false;
      }
    }
    if (!layers && !sync) outs = await model.executeAsync(inputs);
    outs = Array.isArray(outs) ? outs : [outs];
    const arrays = outs.map((t) => t.dataSync());
    for (const t of [...outs, ...Object.values(inputs)]) t.dispose();
    return arrays;
  };
}

function programCount() {
  const backend = tf.backend();
  return backend && backend.binaryCache ? Object.keys(backend.binaryCache).length : null;
}

async function runModel(gl, c, spec) {
  const feeds = await feedsOf(c);
  const ffFeeds = {};
  for (const f of feeds) ffFeeds[f.ff] = f.data;

  let t = performance.now();
  const {load} = await import(`./${c.name}/ff/model.js`);
  // no 30 s limit: efficientpose's first run on SwiftShader takes longer on a loaded machine
  const model = await load({gl, timeoutMs: 600000});
  const ffFirstOut = await model.run(ffFeeds);
  const ffFirst = performance.now() - t;
  // an export with a variant for 8 targets switches to it after the first run, drawing
  // each new kernel once in the background: wait for that before TF.js's side runs
  const variantTargets = model.variantReady ? await model.variantReady : null;

  const programsBefore = programCount();
  t = performance.now();
  const url = `./${c.name}/tfjs/${c.json}`;
  const tm = c.layers ? await tf.loadLayersModel(url) : await tf.loadGraphModel(url);
  const tfRun = tfjsRunner(tm, feeds, c.layers);
  const tfFirstOut = await tfRun();
  const tfFirst = performance.now() - t;
  const programs = programCount() === null ? null : programCount() - programsBefore;

  for (let i = 0; i < c.outputs.length; i++) {
    await post({kind: 'out', name: c.name, side: 'fragflow', index: i}, ffFirstOut[c.outputs[i]]);
    await post({kind: 'out', name: c.name, side: 'tfjs', index: i}, tfFirstOut[i]);
  }
  const result = {name: c.name, fragflow: {first: ffFirst, compile: model.timings.compile,
    // kernels a steady run draws: `once` kernels (a constant filter's panel) draw at
    // the first run only
    kernels: model.spec.kernels.filter((k) => !k.once).length,
    programs: model.timings.programs - (model.timings.programsReused || 0),
    variant: variantTargets && {targets: variantTargets, ms: model.timings.variant}},
  tfjs: {first: tfFirst, programs}};
  if (spec.rounds > 0) {
    const timed = await interleave({fragflow: () => model.run(ffFeeds), tfjs: tfRun},
                                   spec.rounds, spec.budgetMs);
    Object.assign(result.fragflow, timed.fragflow);
    Object.assign(result.tfjs, timed.tfjs);
    if (spec.profile) {
      const profile = await model.profile(ffFeeds);
      result.fragflow.method = profile.method;
      result.fragflow.profile = profile.kernels.map((k) => [k.op, k.ms, k.name]);
      try {
        const info = await tf.profile(() => tfRun());
        result.tfjs.kernelCount = info.kernels.length;
        result.tfjs.profile = info.kernels.map((k) => [k.name,
          typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : null,
          JSON.stringify([k.inputShapes, k.outputShapes])]);
      } catch (err) {
        result.tfjs.profile = [[`tf.profile failed: ${err}`, null]];
      }
    }
  }
  model.dispose();
  tm.dispose();
  return result;
}

runPage(async () => {
  const spec = await (await fetch('./models.json')).json();
  await tf.setBackend('webgl');
  await tf.ready();
  tf.tidy(() => tf.add(tf.ones([64, 64]), tf.ones([64, 64])).dataSync());    // warm-up
  return {items: spec.models, key: 'name', run: (gl, c) => runModel(gl, c, spec),
    info: {tfjs: tf.version.tfjs, backend: tf.getBackend()}};
});
