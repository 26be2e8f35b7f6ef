// ab_tuning.py's page: per model of ab.json, every variant's export (./<model>~<label>/ff)
// and TF.js 4.22's WebGL backend on the model's files, timed in the same interleaved rounds
// (one run of each in turn, the order rotated each round, so load changes hit all alike); then,
// with profile, each side's per-kernel profile.
/* global tf */
import {feedsOf, median, post, rendererOf} from './pagelib.js';

/** runners: {side: async () => void}. Two warm-up runs each, then rounds of one run per
 * side, the order rotated each round (no side always first after the others' runs),
 * until `rounds` or, past 3 rounds, budgetMs. {side: {steady (median ms), runs}}. */
async function rotated(runners, rounds, budgetMs) {
  const sides = Object.keys(runners);
  const times = Object.fromEntries(sides.map((s) => [s, []]));
  const timed = async (s) => {
    const t = performance.now();
    await runners[s]();
    return performance.now() - t;
  };
  for (let i = 0; i < 2; i++) for (const s of sides) await timed(s);
  const start = performance.now();
  for (let n = 0; n < rounds && (n < 3 || performance.now() - start < budgetMs); n++) {
    for (let j = 0; j < sides.length; j++) {
      const s = sides[(j + n) % sides.length];
      times[s].push(await timed(s));
    }
  }
  return Object.fromEntries(sides.map((s) => [s, {steady: median(times[s]),
    runs: times[s]}]));
}

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
  const result = await rotated(runners, spec.rounds, spec.budgetMs);
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

async function main() {
  const spec = await (await fetch('./ab.json')).json();
  await tf.setBackend('webgl');
  await tf.ready();
  const canvas = new OffscreenCanvas(1, 1);
  const gl = canvas.getContext('webgl2', {antialias: false, depth: false});
  await post({kind: 'info'}, JSON.stringify({renderer: rendererOf(gl)}));
  for (const group of spec.groups) {
    try {
      await post({kind: 'result', name: group.model}, JSON.stringify(await runGroup(gl, group, spec)));
    } catch (err) {
      await post({kind: 'error', name: group.model}, String(err && err.stack || err));
    }
  }
  await post({kind: 'done'}, '');
}
main().catch((err) => post({kind: 'fatal'}, String(err && err.stack || err)));
