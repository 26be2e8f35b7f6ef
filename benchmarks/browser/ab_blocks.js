// ab_blocks.py's page: per shape of blocks.json, every variant's export (./<shape>/<label>)
// and TF.js 4.22's WebGL backend computing the same ops from the same arrays, timed in the
// same interleaved rounds (order rotated each round); then each side's profile summed per
// role (expand, dw, project), medians of 5 profiled runs.
/* global tf */
import {interleave, median, runPage} from './pagelib.js';

const ROLES = ['expand', 'dw', 'project', 'other'];
const roleOf = (text) => ROLES.find((r) => text.includes(r)) || 'other';

async function runGroup(gl, group, rounds) {
  const bytes = await (await fetch(`./${group.name}/arrays.bin`)).arrayBuffer();
  const arr = {};
  for (const e of group.index) arr[e.name] = {shape: e.shape, data: new Float32Array(bytes, e.offset, e.count)};
  const x = arr.x.data;
  const models = {};
  const first = {};
  for (const v of group.variants) {
    const t0 = performance.now();
    const {load} = await import(`./${group.name}/${v}/model.js`);
    models[v] = await load({gl, timeoutMs: 600000});
    await models[v].run({x});
    first[v] = performance.now() - t0;
  }
  const T = {};
  for (const [k, e] of Object.entries(arr)) if (k !== 'x') T[k] = tf.tensor(e.data, e.shape);
  const tfOut = () => {
    let y = tf.tensor(x, arr.x.shape);
    for (let i = 0; i < group.blocks; i++) {
      y = tf.fused.conv2d({x: y, filter: T[`e${i}`], strides: 1, pad: 'valid', bias: T[`eb${i}`], activation: 'relu6'});
      y = tf.fused.depthwiseConv2d({x: y, filter: T[`d${i}`], strides: group.dwStride, pad: 'same', bias: T[`db${i}`], activation: 'relu6'});
      if (group.dwStride === 2) break;
      y = tf.fused.conv2d({x: y, filter: T[`p${i}`], strides: 1, pad: 'valid', bias: T[`pb${i}`]});
    }
    return y;
  };
  const tfRun = async () => { const out = tf.tidy(tfOut); out.dataSync(); out.dispose(); };
  const ref = tf.tidy(tfOut);
  const want = ref.dataSync();
  ref.dispose();
  const runners = {tfjs: tfRun};
  for (const [v, m] of Object.entries(models)) runners[v] = () => m.run({x});
  const result = await interleave(runners, rounds, 1e9, true);
  let scale = 0;
  for (const w of want) scale = Math.max(scale, Math.abs(w));
  for (const [v, m] of Object.entries(models)) {
    const got = Object.values(await m.run({x}))[0];
    let diff = 0;
    for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i] - want[i]));
    Object.assign(result[v], {diff: diff / (scale || 1), first: first[v]});
  }
  const sums = {tfjs: []};
  for (const v of Object.keys(models)) sums[v] = [];
  for (let rep = 0; rep < 5; rep++) {
    for (const [v, m] of Object.entries(models)) {
      const s = Object.fromEntries(ROLES.map((r) => [r, 0]));
      for (const k of (await m.profile({x})).kernels) s[roleOf(`${k.scope} ${k.name}`)] += k.ms || 0;
      sums[v].push(s);
    }
    const s = Object.fromEntries(ROLES.map((r) => [r, 0]));
    for (const k of (await tf.profile(() => tfRun())).kernels) {
      const ms = typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : 0;
      if (k.name.includes('Depthwise')) s.dw += ms;
      else if (k.name.includes('Conv2D')) s[k.inputShapes[1][2] === group.c ? 'expand' : 'project'] += ms;
      else s.other += ms;
    }
    sums.tfjs.push(s);
  }
  for (const [side, list] of Object.entries(sums)) {
    for (const r of ROLES) result[side][r] = median(list.map((s) => s[r]));
  }
  result.variants = group.variants;
  for (const m of Object.values(models)) m.dispose();
  for (const t of Object.values(T)) t.dispose();
  return result;
}

runPage(async () => {
  const spec = await (await fetch('./blocks.json')).json();
  await tf.setBackend('webgl');
  await tf.ready();
  return {items: spec.groups, key: 'name', run: (gl, group) => runGroup(gl, group, spec.rounds)};
});
