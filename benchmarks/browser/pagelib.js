// What the benchmark pages share (models.js, onnx_models.js, ab_*.js): posting to the
// driver (tools/webgl/chromium.py serve_and_open collects POST /post?kind=...), the
// page's course (runPage), seeded feeds read from the served folder, the renderer's
// name, and interleaved steady-state timing.

export const post = (query, body) =>
  fetch(`/post?${new URLSearchParams(query)}`, {method: 'POST', body});
export const ARRAYS = {float32: Float32Array, int32: Int32Array};
export const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];

/** c.feeds ({file, dtype, ...}) with data: the typed array read from ./<c.name>/<file>. */
export async function feedsOf(c) {
  const out = [];
  for (const f of c.feeds) {
    const bytes = await (await fetch(`./${c.name}/${f.file}`)).arrayBuffer();
    out.push({...f, data: new ARRAYS[f.dtype](bytes)});
  }
  return out;
}

/** The WebGL2 context's unmasked renderer string. */
export function rendererOf(gl) {
  const info = gl.getExtension('WEBGL_debug_renderer_info');
  return info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
}

/** runners: {side: async () => void}, each run synced by reading its outputs back. Two
 * warm-up runs each, then rounds of one run per side in turn (interleaved, so load
 * changes hit every side alike; with `rotate` the order rotated each round, so no side
 * always runs first after the others) until `rounds` or, past 3 rounds, budgetMs.
 * {side: {steady (median ms), fastest, runs}}. */
export async function interleave(runners, rounds, budgetMs, rotate = false) {
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
      const s = sides[rotate ? (j + n) % sides.length : j];
      times[s].push(await timed(s));
    }
  }
  return Object.fromEntries(sides.map((s) => [s, {steady: median(times[s]),
    fastest: Math.min(...times[s]), runs: times[s].length}]));
}

/** A benchmark page's course: a WebGL2 context; `setup(gl)` resolves to {items, run,
 * key, info}; info ({} by default) is posted with the renderer's name, then each item's
 * `await run(gl, item)` as its result (or what it threw as its error) under item[key],
 * then done. Anything thrown outside an item is posted as fatal. */
export function runPage(setup) {
  const page = async () => {
    const gl = new OffscreenCanvas(1, 1).getContext('webgl2', {antialias: false, depth: false});
    const {items, run, key, info = {}} = await setup(gl);
    await post({kind: 'info'}, JSON.stringify({renderer: rendererOf(gl), ...info}));
    for (const item of items) {
      try {
        await post({kind: 'result', name: item[key]}, JSON.stringify(await run(gl, item)));
      } catch (err) {
        await post({kind: 'error', name: item[key]}, String(err && err.stack || err));
      }
    }
    await post({kind: 'done'}, '');
  };
  page().catch((err) => post({kind: 'fatal'}, String(err && err.stack || err)));
}
