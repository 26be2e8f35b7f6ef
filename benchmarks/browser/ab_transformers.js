// ab_transformers.py's page: per model of ab.json, every variant's export
// (./<model>~<label>/ff/model.js) on the same seeded feeds, timed in the same
// interleaved rounds (the order rotated each round, so load changes hit all alike); the
// variants' outputs compared with the first's (max |difference|).
import {feedsOf, interleave, runPage} from './pagelib.js';

async function runGroup(gl, group, spec) {
  const feeds = await feedsOf(group.variants[0]);
  const ffFeeds = {};
  for (const f of feeds) ffFeeds[f.ff] = f.data;
  const models = {};
  const outs = {};
  for (const c of group.variants) {
    const {load} = await import(`./${c.name}/ff/model.js`);
    models[c.name] = await load({gl, timeoutMs: 600000});
    outs[c.name] = await models[c.name].run(ffFeeds);
  }
  const runners = {};
  for (const [name, m] of Object.entries(models)) runners[name] = () => m.run(ffFeeds);
  const result = await interleave(runners, spec.rounds, spec.budgetMs, true);
  const first = outs[group.variants[0].name];
  for (const c of group.variants) {
    let diff = 0;
    for (const key of Object.keys(first)) {
      const a = first[key];
      const b = outs[c.name][key];
      for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(a[i] - b[i]));
    }
    result[c.name].diff = diff;
  }
  if (spec.profile) {
    for (const [name, m] of Object.entries(models)) {
      const profile = await m.profile(ffFeeds);
      result[name].profile = profile.kernels.map((k) => [k.op, k.ms, k.name]);
    }
  }
  for (const m of Object.values(models)) m.dispose();
  return result;
}

runPage(async () => {
  const spec = await (await fetch('./ab.json')).json();
  return {items: spec.groups, key: 'model', run: (gl, group) => runGroup(gl, group, spec)};
});
