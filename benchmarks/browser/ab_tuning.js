// ab_tuning.py's page: per model of ab.json, every variant's export (./<model>~<label>/ff)
// and TF.js 4.22's WebGL backend on the model's files, timed in the same interleaved rounds
// (one run of each in turn, the order rotated each round, so load changes hit all alike); then,
// with profile, each side's per-kernel profile.
/* global tf */
import {feedsOf, interleave, runPage} from './pagelib.js';

async function runGroup(gl, group, spec) {
  const first = group.variants[0];
  const feeds = await feedsOf(first);
  const ffFeeds = {};
  for (const f of feeds) ffFeeds[f.ff] = f.data;
  const models = {};
  for (const c of group.variants) {
    const {load} = await import(`./${c.name}/ff/model.js`);
    models[c.name] = await load({gl, timeoutMs: 600000});
    await models[c.name].run(ffFeeds);
    if (models[c.name].variantReady) await models[c.name].variantReady;
  }
  const tm = await tf.loadGraphModel(`./${first.name}/tfjs/${first.json}`);
  const tfRun = async () => {
    const inputs = {};
    for (const f of feeds) inputs[f.name] = tf.tensor(f.data, f.shape, f.dtype);
    let outs = tm.execute(inputs);
    outs = Array.isArray(outs) ? outs : [outs];
    outs.map((t) => t.dataSync());
    for (const t of [...outs, ...Object.values(inputs)]) t.dispose();
  };
  await tfRun();
  const runners = {tfjs: tfRun};
  for (const [name, m] of Object.entries(models)) runners[name] = () => m.run(ffFeeds);
  const result = await interleave(runners, spec.rounds, spec.budgetMs, true);
  if (spec.profile) {
    for (const [name, m] of Object.entries(models)) {
      const profile = await m.profile(ffFeeds);
      result[name].profile = profile.kernels.map((k) => [k.op, k.ms, k.name]);
    }
    const info = await tf.profile(() => tfRun());
    result.tfjs.profile = info.kernels.map((k) => [k.name,
      typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : null,
      JSON.stringify([k.inputShapes, k.outputShapes])]);
  }
  for (const m of Object.values(models)) m.dispose();
  tm.dispose();
  return result;
}

runPage(async () => {
  const spec = await (await fetch('./ab.json')).json();
  await tf.setBackend('webgl');
  await tf.ready();
  return {items: spec.groups, key: 'model', run: (gl, group) => runGroup(gl, group, spec)};
});
