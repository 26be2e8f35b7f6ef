// fragflow's WebGL2 runtime: runs a model that ff.webgl.export compiled in Python.
//
// This file is the whole runtime; the exporter copies it to model.js with the model's
// schedule (one JSON literal: programs, kernels, feeds, fetches, assigns) in place of
// MODEL below; the weights are in model.bin. Nothing is imported or evaluated.
//
//   const model = await (await import('./model.js')).load();
//   model.inputs, model.outputs      [{name, shape, dtype}] in feed and fetch order
//   await model.run({x: Float32Array}) -> {name: Float32Array | Int32Array | Uint8Array}
//                                    or a FragflowError (context lost, past timeoutMs)
//   await model.profile(feeds)       per-kernel times (GPU timer queries where offered)
//   model.dispose()
//
// How a run works (as runtime/gl_plan.py): every value lives in a texture "slot"
// (RGBA32F, RGBA32I; RGBA16F: float16 weights nothing writes), 4 row-major elements a
// texel. A kernel draws one triangle over its output's texels. Assigned variables swap
// textures after the readbacks; `once` kernels draw at the first run only. A first run
// polls fences, so a lost context or a run past `timeoutMs` rejects, never freezes.
// See docs/WEBGL.md.

const MODEL = /*@fragflow-model@*/null;
// The export writes each program as its lines' indices in `lines` (shared text once)
if (MODEL && MODEL.lines) {
  MODEL.programs = MODEL.programs.map((p) => p.map((i) => MODEL.lines[i]).join('\n'));
  delete MODEL.lines;
}

// The copy shader of loops (float and int): elements [lo, hi) of the target are those
// [lo + delta, hi + delta) of src, in the target's texels [tlo, thi); elements of a
// drawn texel outside [lo, hi) are 0 (color masks keep a shared texel's others).
const copyShader = (p, v) => `#version 300 es
precision highp float;
precision highp int;
uniform highp ${p}sampler2D src;
uniform int sw, dw, lo, hi, delta, tlo, thi;
out ${v} result;
${v} at(int t) { return texelFetch(src, ivec2(t % sw, t / sw), 0); }
void main() {
  int t = int(gl_FragCoord.y) * dw + int(gl_FragCoord.x);
  if (t < tlo || t >= thi) discard;
  int o = 4 * t;
  if (o >= lo && o + 4 <= hi && ((o + delta) & 3) == 0) { result = at((o + delta) >> 2); return; }
  ${v} r = ${v}(0);
  for (int c = 0; c < 4; c++) {
    int s = o + c + delta;
    if (o + c >= lo && o + c < hi) r[c] = at(s >> 2)[s & 3];
  }
  result = r;
}
`;
const COPY_UNIFORMS = ['sw', 'dw', 'lo', 'hi', 'delta', 'tlo', 'thi'];

const VERTEX_SHADER = `#version 300 es
// One triangle that covers the viewport; no vertex data (gl_VertexID only).
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
`;

const LOST = 'the WebGL context was lost';
const AGAIN = 'load() the model again (on a new context, or after restoreContext())';

/** Every error the runtime raises on purpose. */
export class FragflowError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FragflowError';
  }
}

/**
 * Load the model: fetch model.bin, make the WebGL2 context's textures, compile and
 * link every shader. options (all optional):
 *   canvas          an HTMLCanvasElement or OffscreenCanvas to take a context from
 *   gl              a WebGL2RenderingContext to use (shared: state is set each run)
 *   url             where model.bin is (default: next to model.js)
 *   bin             model.bin's bytes (an ArrayBuffer) instead of fetching it
 *   maxDrawBuffers  a lower ceiling on render targets than the context's
 *   variantLater    false: a variant for 8 targets from the first run (by default the
 *                   first runs take the 4-target schedule; model.variantReady, made by
 *                   the first run, resolves to the targets used once it switched)
 *   timeoutMs       a run not finished after this long rejects (default 30000)
 *   programCache    idle linked programs the context keeps for later models (2048)
 *   halfTextures    float16 weights in RGBA16F textures (default: unless the renderer
 *                   is SwiftShader or llvmpipe, which sample RGBA32F faster)
 */
export async function load(options = {}) {
  const gl = options.gl || context(options.canvas);
  if (gl.isContextLost()) throw new FragflowError(LOST + ' before load(): ' + AGAIN);
  // a variant for more targets than 4 (export's max_draw_buffers=(4, 8)): the first runs
  // take the 4-target schedule (fewer pipelines' code to compile), the variant follows
  const ceiling = ceilingOf(gl, options);
  const later = options.variantLater !== false && !(MODEL.assigns || []).length &&
    (MODEL.variants || []).some((v) => v.drawBuffers <= ceiling);
  const model = new Model(gl, MODEL, later ? {...options, maxDrawBuffers: 4} : options);
  const bin = options.bin || await fetchBin(options.url || new URL('model.bin', import.meta.url));
  model.upload(bin);
  await model.compile();
  if (later) model._later = {bin, options: {...options, variantLater: false}};
  return model;
}

/** The schedule this file carries (a copy-free view: do not change it). */
export const schedule = MODEL;

/** The render targets a kernel may write on this context (options.maxDrawBuffers lower). */
function ceilingOf(gl, options) {
  const have = gl.getParameter(gl.MAX_DRAW_BUFFERS);
  return Math.min(have, options.maxDrawBuffers || have);
}

/** The schedule to run: the variant for the most render targets the context allows
 * (export.py `schedule_variant`: the same kernels and slots, some patched), with only
 * the programs its kernels use. */
function variantFor(spec, ceiling) {
  if (!spec.variants) return spec;
  const v = spec.variants.filter((x) => x.drawBuffers <= ceiling).pop();
  const patched = (list, changes) => {
    const out = list.slice();
    for (const [i, c] of changes) {
      out[i] = Object.assign({}, list[i], c);
      if (Array.isArray(c.header)) {                  // [line, text] pairs
        const lines = list[i].header.split('\n');
        for (const [j, text] of c.header) lines[j] = text;
        out[i].header = lines.join('\n');
      }
    }
    return out;
  };
  const kernels = v ? patched(spec.kernels, v.kernels) : spec.kernels;
  const used = [...new Set(kernels.map((k) => k.program))];
  const index = new Map(used.map((p, i) => [p, i]));
  return Object.assign({}, spec, {
    slots: v ? patched(spec.slots, v.slots) : spec.slots,
    kernels: kernels.map((k) => Object.assign({}, k, {program: index.get(k.program)})),
    programs: used.map((p) => spec.programs[p]),
    drawBuffers: v ? v.drawBuffers : spec.drawBuffers, variants: undefined});
}

/** What _draw has bound: nothing yet. */
function unbound() {
  return {program: null, fbo: null, width: -1, height: -1, units: [], kernel: new Map()};
}

/** The programs linked on a context, shared by its models (docs/WEBGL.md): taken at
 * load, given back at dispose; at most `keep` idle ones stay, the oldest deleted. */
const CACHE_KEY = Symbol.for('fragflow.webgl.programs.v1');

function programCache(gl, keep) {
  let c = gl[CACHE_KEY];
  if (!c || c.lost) {     // entries: program -> {source, count}; index: source -> program
    c = {entries: new Map(), index: new Map(), idle: new Map(), lost: false};
    Object.defineProperty(gl, CACHE_KEY, {value: c, configurable: true});
    if (gl.canvas && gl.canvas.addEventListener) {
      gl.canvas.addEventListener('webglcontextlost', () => { c.lost = true; }, {once: true});
    }
  }
  const limit = keep === undefined ? 2048 : Math.max(0, keep | 0);
  const usable = () => !c.lost && !gl.isContextLost();
  const drop = (p) => { c.entries.delete(p); gl.deleteProgram(p); };
  return {
    take(source) {
      const p = usable() ? c.index.get(source) : undefined;
      if (!p) return null;
      c.idle.delete(p);
      c.entries.get(p).count += 1;
      return p;
    },
    hold(source, p) {
      if (!usable()) return;
      c.entries.set(p, {source, count: 1});
      if (!c.index.has(source)) c.index.set(source, p);
    },
    give(p) {
      const e = c.entries.get(p);
      if (!e || !usable()) return gl.deleteProgram(p);
      if (--e.count > 0) return;
      if (c.index.get(e.source) !== p) return drop(p);    // linked twice at once
      c.idle.set(p, true);
      for (const q of c.idle.keys()) {
        if (c.idle.size <= limit) break;
        c.idle.delete(q);
        c.index.delete(c.entries.get(q).source);
        drop(q);
      }
    },
  };
}

function context(canvas) {
  if (!canvas) {
    canvas = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(1, 1)
      : document.createElement('canvas');
  }
  const gl = canvas.getContext('webgl2', {
    alpha: true, antialias: false, depth: false, stencil: false,
    premultipliedAlpha: false, preserveDrawingBuffer: false,
    powerPreference: 'high-performance',
  });
  if (!gl) throw new FragflowError('this browser gives no WebGL2 context');
  return gl;
}

async function fetchBin(url) {
  const response = await fetch(url);
  if (!response.ok) {
    throw new FragflowError(`cannot fetch ${url}: HTTP ${response.status}`);
  }
  return response.arrayBuffer();
}

class Model {
  constructor(gl, spec, options) {
    if (!spec || spec.format !== 'fragflow.webgl' || !(spec.version === 1 ||
        (spec.version === 2 && spec.program))) {
      throw new FragflowError('model.js holds no fragflow.webgl version 1 or 2 schedule');
    }
    this.gl = gl;
    this.spec = spec = variantFor(spec, ceilingOf(gl, options));
    this.options = options;
    this.inputs = spec.inputs.map(({name, shape, dtype}) => ({name, shape, dtype}));
    this.outputs = spec.outputs.map(({name, shape, dtype}) => ({name, shape, dtype}));
    this.variables = spec.variables.map(({name, shape, dtype}) => ({name, shape, dtype}));
    this.kernels = spec.kernels.map(({name, op, scope, node, program, header}) =>
      ({name, op, scope, node, source: withHeader(spec.programs[program], header)}));
    this.runs = 0;                  // the run counter random ops draw from
    this.predicateReads = 0;        // readbacks of loop and cond predicates, last run
    this.timings = {};              // load phases, in milliseconds
    this._disposed = false;
    this.timeoutMs = options.timeoutMs === undefined ? 30000 : options.timeoutMs;
    this.pending = [];              // [fence, kernel] not yet known done, in order
    this.lost = false;
    this._onLost = () => { this.lost = true; };
    if (gl.canvas && gl.canvas.addEventListener) {
      gl.canvas.addEventListener('webglcontextlost', this._onLost);
    }
    this._checkContext(options);
    const info = gl.getExtension('WEBGL_debug_renderer_info');
    this.halfTextures = options.halfTextures ?? !/SwiftShader|llvmpipe/.test(
      gl.getParameter(info ? info.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
    this.timerExt = gl.getExtension('EXT_disjoint_timer_query_webgl2');
    this.parallelExt = gl.getExtension('KHR_parallel_shader_compile');
  }

  _checkContext(options) {
    const gl = this.gl;
    if (!gl.getExtension('EXT_color_buffer_float')) {
      throw new FragflowError('this WebGL2 context cannot render into float textures ' +
        '(EXT_color_buffer_float is missing): fragflow models need RGBA32F targets');
    }
    const have = gl.getParameter(gl.MAX_DRAW_BUFFERS);
    const ceiling = ceilingOf(gl, options);
    if (this.spec.drawBuffers > ceiling) {
      throw new FragflowError(`a kernel of this model writes ${this.spec.drawBuffers} ` +
        `render targets; the context allows ${ceiling} (MAX_DRAW_BUFFERS ${have}): ` +
        'export it again with max_draw_buffers=4');
    }
    const units = gl.getParameter(gl.MAX_TEXTURE_IMAGE_UNITS);
    const size = gl.getParameter(gl.MAX_TEXTURE_SIZE);
    for (const k of this.spec.kernels) {
      if (k.inputs.length > units) {
        throw new FragflowError(`kernel ${k.name} reads ${k.inputs.length} textures; ` +
          `this context binds ${units}`);
      }
    }
    for (const s of this.spec.slots) {
      if (s.width > size || s.height > size) {
        throw new FragflowError(`a ${s.width}x${s.height} texture is larger than this ` +
          `context's MAX_TEXTURE_SIZE ${size}`);
      }
    }
  }

  // -- textures
  /** Make every slot's texture; constants and variables take their values from bin. */
  upload(bin) {
    const t0 = performance.now();
    if (bin.byteLength !== this.spec.binBytes) {
      throw new FragflowError(`model.bin has ${bin.byteLength} bytes, the model expects ` +
        `${this.spec.binBytes}: model.js and model.bin come from different exports`);
    }
    this.slots = this.spec.slots.map((s) => {     // a cond's results: its branch's
      const slot = {spec: s, texture: s.kind === 'alias' ? null : this._texture(s)};
      if (s.data) this._write(slot, dataOf(bin, s));
      return slot;
    });
    // feeds: a staging array each, padded to the texture's size
    this.feedSlots = this.spec.inputs.map((input) => {
      const slot = this.slots[input.slot];
      return {input, slot, staging: staging(slot.spec)};
    });
    if (this.spec.counter >= 0) {
      this.counter = {slot: this.slots[this.spec.counter],
        staging: staging(this.spec.slots[this.spec.counter])};
    }
    this.timings.upload = performance.now() - t0;
  }

  _texture(s) {
    const gl = this.gl;
    const texture = {id: gl.createTexture(), fbo: null, spec: s};
    const target = s.layers ? gl.TEXTURE_2D_ARRAY : gl.TEXTURE_2D;
    gl.bindTexture(target, texture.id);
    // s.half: a float16 weight nothing writes, RGBA16F (sampled as the same numbers)
    // where halfTextures (load's option)
    const format = s.format === 'i' ? gl.RGBA32I
      : s.half && this.halfTextures ? gl.RGBA16F : gl.RGBA32F;
    if (s.layers) gl.texStorage3D(target, 1, format, s.width, s.height, s.layers);
    else gl.texStorage2D(target, 1, format, s.width, s.height);
    // integer textures are incomplete without NEAREST; the shaders read texel centres
    gl.texParameteri(target, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(target, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    gl.texParameteri(target, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
    gl.texParameteri(target, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
    texture.target = target;
    return texture;
  }

  /** flat: width*height*4 elements, Float32Array or Int32Array as the slot's format. */
  _write(slot, flat) {
    const gl = this.gl;
    const s = slot.texture.spec;
    gl.bindTexture(gl.TEXTURE_2D, slot.texture.id);
    if (s.format === 'i') {
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, s.width, s.height, gl.RGBA_INTEGER, gl.INT, flat);
    } else {
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, s.width, s.height, gl.RGBA, gl.FLOAT, flat);
    }
  }

  /** The framebuffer rendering into one texture (made on first use, kept); or reading
   * layer `layer` of an array texture. */
  _framebuffer(texture, layer = -1) {
    const fbos = texture.fbos = texture.fbos || [];
    if (layer >= 0 && !fbos[layer]) {
      const gl = this.gl;
      gl.bindFramebuffer(gl.FRAMEBUFFER, fbos[layer] = gl.createFramebuffer());
      gl.framebufferTextureLayer(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, texture.id, 0, layer);
    }
    if (layer >= 0) return fbos[layer];
    if (!texture.fbo) {
      const gl = this.gl;
      texture.fbo = gl.createFramebuffer();
      gl.bindFramebuffer(gl.FRAMEBUFFER, texture.fbo);
      gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D,
        texture.id, 0);
      this._check(`a ${texture.spec.width}x${texture.spec.height} texture`);
    }
    return texture.fbo;
  }

  /** The framebuffer of a kernel writing several textures or an array's layers: one
   * per set of textures its slots hold (assigns swap them), made once and kept. */
  _targets(launch) {
    const gl = this.gl;
    if (launch.layers) {
      if (!launch.fbo) {
        const array = launch.outputs[0].texture;
        launch.fbo = gl.createFramebuffer();
        gl.bindFramebuffer(gl.FRAMEBUFFER, launch.fbo);
        const attachments = [];
        for (let j = 0; j < launch.layers; j++) {
          gl.framebufferTextureLayer(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + j, array.id, 0, j);
          attachments.push(gl.COLOR_ATTACHMENT0 + j);
        }
        gl.drawBuffers(attachments);
        this._check(`${launch.layers} layers of an array texture`);
      }
      return launch.fbo;
    }
    if (launch.outputs.length === 1) return this._framebuffer(launch.outputs[0].texture);
    const textures = launch.outputs.map((slot) => slot.texture);
    let key = '';
    for (const t of textures) key += `${this._id(t)},`;
    let fbo = launch.fbos.get(key);
    if (!fbo) {
      fbo = gl.createFramebuffer();
      gl.bindFramebuffer(gl.FRAMEBUFFER, fbo);
      textures.forEach((t, j) => gl.framebufferTexture2D(gl.FRAMEBUFFER,
        gl.COLOR_ATTACHMENT0 + j, gl.TEXTURE_2D, t.id, 0));
      gl.drawBuffers(textures.map((_, j) => gl.COLOR_ATTACHMENT0 + j));
      this._check(`${textures.length} textures at once`);
      launch.fbos.set(key, fbo);
    }
    return fbo;
  }

  /** Framebuffers are checked only as load() makes them (the check waits for the GPU). */
  _check(what) {
    if (!this.ready) checkFramebuffer(this.gl, what);
  }

  _id(texture) {        // a small number per texture, for framebuffer keys
    if (texture.key === undefined) texture.key = this._nextKey = (this._nextKey || 0) + 1;
    return texture.key;
  }

  // -- shaders
  /** Compile every shader, then link every program, then wait for them all: with
   * KHR_parallel_shader_compile the driver works on them at once while we poll.
   * Programs another model on this context linked are taken from programCache. */
  async compile() {
    const gl = this.gl;
    const t0 = performance.now();
    const cache = programCache(gl, this.options.programCache);
    const vertex = gl.createShader(gl.VERTEX_SHADER);
    gl.shaderSource(vertex, VERTEX_SHADER);
    gl.compileShader(vertex);
    // each distinct program once: kernels equal but for their textures share one
    const programs = new Map();                  // program index -> program being built
    this.spec.programs.forEach((text, i) => {
      const source = VERTEX_SHADER + '\u0000' + text;      // the cache's key: both shaders
      const cached = cache.take(source);
      if (cached) {
        programs.set(i, {fragment: null, program: cached, source});
        return;
      }
      const fragment = gl.createShader(gl.FRAGMENT_SHADER);
      gl.shaderSource(fragment, text);
      gl.compileShader(fragment);
      programs.set(i, {fragment, program: null, source});
    });
    const fresh = [...programs.values()].filter((p) => p.fragment);
    for (const p of fresh) {
      p.program = gl.createProgram();
      gl.attachShader(p.program, vertex);
      gl.attachShader(p.program, p.fragment);
      gl.linkProgram(p.program);
    }
    if (this.parallelExt) {
      const done = this.parallelExt.COMPLETION_STATUS_KHR;
      while (!fresh.every((p) => gl.getProgramParameter(p.program, done))) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }
    if (gl.isContextLost()) throw new FragflowError(`${LOST} while load() compiled: ${AGAIN}`);
    for (const [i, p] of programs) {
      if (!p.fragment) continue;
      if (!gl.getProgramParameter(p.program, gl.LINK_STATUS)) {
        const k = this.spec.kernels.find((kernel) => kernel.program === i);
        const log = gl.getShaderInfoLog(p.fragment) || gl.getProgramInfoLog(p.program);
        for (const q of programs.values()) {         // give back what this load took
          if (!q.fragment) cache.give(q.program);
          else { gl.deleteShader(q.fragment); gl.deleteProgram(q.program); }
        }
        gl.deleteShader(vertex);
        throw new FragflowError(`kernel ${k.name} did not compile:\n${log}\nsource:\n` +
          numbered(this.spec.programs[i]));
      }
    }
    for (const p of fresh) {
      gl.detachShader(p.program, p.fragment);
      gl.deleteShader(p.fragment);
      cache.hold(p.source, p.program);
    }
    this.timings.programs = programs.size;
    this.timings.programsReused = programs.size - fresh.length;
    this.programSources = [...programs.values()].map((p) => p.program);
    this.programs = [];                          // the copy shaders: this model's own
    if (this.spec.program) this._copiers(vertex);
    gl.deleteShader(vertex);
    this._launches(programs);
    for (const launch of this.launches) this._targets(launch);   // checked here, once
    for (const o of this.spec.outputs) {
      if (this.slots[o.slot].texture && !o.blocks) this._framebuffer(this.slots[o.slot].texture);
    }
    this.ready = true;
    this.timings.compile = performance.now() - t0;
  }

  /** What each draw needs, resolved once: program, sampler units, uniform setters. */
  _launches(programs) {
    const gl = this.gl;
    const setters = {float: 'uniform1f', int: 'uniform1i', bool: 'uniform1i', uint: 'uniform1ui'};
    this.launches = this.spec.kernels.map((k, index) => {
      const program = programs.get(k.program).program;
      gl.useProgram(program);
      const uniforms = [];
      // sampler units: set with the uniforms when the program last drew another kernel
      k.samplers.forEach((name, unit) => {
        const location = gl.getUniformLocation(program, name);
        if (location !== null) uniforms.push(['uniform1i', location, unit]);
      });
      for (const [name, type, value] of k.uniforms) {
        const location = gl.getUniformLocation(program, name);
        // the compiler drops uniforms the code never reads
        if (location !== null) uniforms.push([setters[type], location, Number(value)]);
      }
      return {
        kernel: k, index, program, uniforms, layers: k.layers, fbo: null, fbos: new Map(),
        inputs: k.inputs.map((i) => this.slots[i]),
        outputs: k.outputs.map((i) => this.slots[i]),
        width: k.width, height: k.height, once: !!k.once, done: false,
      };
    });
  }

  /** Whether a launch draws now: a `once` kernel only at its first run. */
  _due(launch) {
    if (!launch.once) return true;
    if (launch.done) return false;
    launch.done = true;
    return true;
  }

  // -- running
  /** One run: upload the feeds, draw every kernel, read the fetches back, then apply
   * the assigns (variables stay on the GPU). Resolves to {output name: typed array}. */
  async run(feeds) {
    try {
      this._begin(feeds);
      const draw = (launch) => { if (this._due(launch)) this._draw(launch); };
      if (this.spec.program) await this._exec(this.spec.program, draw);
      else for (const launch of this.launches) draw(launch);
      const results = await this._end();
      // a run well inside the bound: the next reads back directly (see _begin)
      this.direct = performance.now() - this.started <= this.timeoutMs / 4;
      if (this._later) this.variantReady = this._upgrade(this._later);
      return results;
    } catch (err) {
      this.direct = false;
      throw err;
    } finally {
      this.busy = false;
    }
  }

  /** After the first run: load the variant for the context's targets beside this model,
   * draw each of its kernels once, one at a time while no run is under way (a first
   * draw compiles the pipeline: SwiftShader, Mesa), then take over its textures and
   * launches. Resolves to the render targets now used. `variantReady` is its promise. */
  async _upgrade({bin, options}) {
    this._later = null;
    const t0 = performance.now();
    const gl = this.gl;
    const next = new Model(gl, MODEL, options);
    const idle = async () => {
      do await new Promise((resolve) => setTimeout(resolve, 1));
      while (this.busy && !this._disposed);
      if (this._disposed || this.lost || gl.isContextLost()) throw new FragflowError(LOST);
    };
    try {
      await idle();
      next.upload(bin);
      await next.compile();
      await idle();
      next._begin(Object.fromEntries(next.feedSlots.map(({input}) =>
        [input.name, new Float32Array(input.size)])));
      for (const launch of next.launches) {
        await idle();
        next._fresh();                   // a run of this model may have drawn since
        if (next._due(launch)) next._draw(launch);
        const fence = gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0);
        gl.flush();
        while (gl.clientWaitSync(fence, 0, 0) === gl.TIMEOUT_EXPIRED) await idle();
        gl.deleteSync(fence);
      }
      await idle();
    } catch (err) {
      next._onLost = () => {};
      next.dispose();
      return this.spec.drawBuffers;      // this model stays as it is
    }
    // this object takes next's state; a shell with this one's disposes it
    const old = Object.assign(Object.create(Model.prototype), this, {_onLost: () => {}});
    const keep = {runs: this.runs, timings: this.timings, _onLost: this._onLost,
      options: this.options, variantReady: this.variantReady};
    if (gl.canvas && gl.canvas.removeEventListener) {
      gl.canvas.removeEventListener('webglcontextlost', next._onLost);
    }
    Object.assign(this, next, keep, {direct: false, busy: false, bound: unbound(),
      packs: next.packs || null, copy: next.copy, _nextKey: next._nextKey});  // made lazily
    this.timings.variant = performance.now() - t0;
    old.dispose();
    return this.spec.drawBuffers;
  }

  _begin(feeds) {
    if (this._disposed) throw new FragflowError('the model was disposed');
    this.busy = true;
    const gl = this.gl;
    this._forget();
    if (this.lost || gl.isContextLost()) {
      throw new FragflowError(`${LOST} before this run: ${AGAIN}`);
    }
    feeds = feeds || {};
    for (const name of Object.keys(feeds)) {
      if (!this.inputs.some((input) => input.name === name)) {
        throw new FragflowError(`no input named '${name}'; the model's inputs are ` +
          this.inputs.map((input) => `'${input.name}'`).join(', '));
      }
    }
    for (const {input, slot, staging} of this.feedSlots) {
      const data = feeds[input.name];
      if (data === undefined) throw new FragflowError(`input '${input.name}' is not fed`);
      if (data.length !== input.size) {
        throw new FragflowError(`input '${input.name}' has ${data.length} elements; its ` +
          `shape [${input.shape}] has ${input.size}`);
      }
      staging.set(data);           // converts (and pads): float32, or int32 for int/bool
      this._write(slot, staging);
    }
    if (this.counter) {
      this.counter.staging[0] = this.runs;
      this._write(this.counter.slot, this.counter.staging);
    }
    this.runs += 1;
    this.predicateReads = 0;
    this.started = performance.now();
    // The first run, or one after a rejected or slow one: fences polled (SwiftShader
    // compiles pipelines at first draw); after a quick run, direct readbacks (a fence
    // reaches the page 0.4-5 ms late: a small model's whole run; docs/WEBGL.md).
    this.directRun = !!this.direct;
    this._fresh();
  }

  /** State a shared context may have changed: nothing blends, tests or culls; nothing
   * is bound as far as _draw knows. */
  _fresh() {
    const gl = this.gl;
    for (const cap of [gl.BLEND, gl.DEPTH_TEST, gl.STENCIL_TEST, gl.SCISSOR_TEST,
      gl.CULL_FACE, gl.DITHER, gl.RASTERIZER_DISCARD]) gl.disable(cap);
    gl.bindVertexArray(null);
    this.bound = unbound();
  }

  /** One launch, making only the GL calls that change state. */
  _draw(launch) {
    const gl = this.gl;
    const bound = this.bound;
    if (bound.program !== launch.program) {
      gl.useProgram(launch.program);
      bound.program = launch.program;
    }
    if (bound.kernel.get(launch.program) !== launch) {   // programs shared by kernels
      for (const [setter, location, value] of launch.uniforms) gl[setter](location, value);
      bound.kernel.set(launch.program, launch);
    }
    const inputs = launch.inputs;
    for (let unit = 0; unit < inputs.length; unit++) {
      const texture = inputs[unit].texture;
      if (bound.units[unit] !== texture) {
        gl.activeTexture(gl.TEXTURE0 + unit);
        gl.bindTexture(texture.target, texture.id);
        bound.units[unit] = texture;
      }
    }
    const fbo = this._targets(launch);
    if (bound.fbo !== fbo) {
      gl.bindFramebuffer(gl.FRAMEBUFFER, fbo);
      bound.fbo = fbo;
    }
    if (bound.width !== launch.width || bound.height !== launch.height) {
      gl.viewport(0, 0, launch.width, launch.height);
      bound.width = launch.width;
      bound.height = launch.height;
    }
    gl.drawArrays(gl.TRIANGLES, 0, 3);
    if (!this.directRun) {
      this.pending.push([gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0), launch.kernel]);
    }
  }

  // -- waiting for the GPU without blocking the page
  /** Resolve once every fence so far has signalled, polled from the event loop; reject
   * on a lost context or past timeoutMs, naming the first kernel not known done. */
  async _wait() {
    const gl = this.gl;
    gl.flush();
    const t0 = performance.now();
    while (this.pending.length) {
      if (!this.lost && !gl.isContextLost()) {
        const status = gl.clientWaitSync(this.pending[0][0], 0, 0);
        if (status === gl.ALREADY_SIGNALED || status === gl.CONDITION_SATISFIED) {
          gl.deleteSync(this.pending.shift()[0]);
          continue;
        }
        if (status !== gl.WAIT_FAILED && performance.now() - this.started <= this.timeoutMs) {
          // spin for the first 2 ms (a message a poll), then poll each millisecond
          await (performance.now() - t0 < 2 ? tick() : tick().then(() => sleep(1)));
          continue;
        }
      }
      throw this._failure();
    }
  }

  _failure() {
    const k = this.pending[0][1];
    const lost = this.lost || this.gl.isContextLost();
    this._forget();
    const which = !k ? 'the readback of the results' : k.label || `kernel ${k.name} ` +
      `(${k.op} '${k.node || k.name}'${k.scope ? ` in scope '${k.scope}'` : ''})`;
    if (lost) return new FragflowError(`${LOST} while ${which} was running: ${AGAIN}`);
    return new FragflowError(`the run did not finish in ${this.timeoutMs} ms ` +
      `(load({timeoutMs})): ${which} was still running`);
  }

  _forget() {
    for (const [fence] of this.pending) if (fence) this.gl.deleteSync(fence);
    this.pending = [];
  }

  /** Read a texture into a pixel-pack buffer (queued: nothing waits); after _wait(),
   * take(pack) copies it out. */
  _pack(texture, texels, key, layer) {
    const gl = this.gl;
    const s = texture.spec;
    const flat = s.format === 'i' ? new Int32Array(texels * 4) : new Float32Array(texels * 4);
    this.packs = this.packs || new Map();
    let buffer = this.packs.get(key);
    if (!buffer || buffer.bytes !== flat.byteLength) {
      if (buffer) gl.deleteBuffer(buffer.id);
      buffer = {id: gl.createBuffer(), bytes: flat.byteLength};
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, buffer.id);
      gl.bufferData(gl.PIXEL_PACK_BUFFER, flat.byteLength, gl.STREAM_READ);
      this.packs.set(key, buffer);
    }
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, buffer.id);
    this._readInto(texture, texels, 0, layer);    // into the buffer: queued, no wait
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    return {buffer: buffer.id, flat};
  }

  _take(pack) {
    const gl = this.gl;
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, pack.buffer);
    gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, pack.flat);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    return pack.flat;
  }

  /** Queue a fence after what is queued (the readbacks) and wait for it all. */
  async _drain() {
    this.pending.push([this.gl.fenceSync(this.gl.SYNC_GPU_COMMANDS_COMPLETE, 0), null]);
    await this._wait();
  }

  // -- control flow (docs/WEBGL.md, "Control flow")
  _copiers(vertex) {
    const gl = this.gl;
    this.copy = {};
    for (const [format, p, v] of [['f', '', 'vec4'], ['i', 'i', 'ivec4']]) {
      const fragment = gl.createShader(gl.FRAGMENT_SHADER);
      gl.shaderSource(fragment, copyShader(p, v));
      gl.compileShader(fragment);
      const program = gl.createProgram();
      gl.attachShader(program, vertex);
      gl.attachShader(program, fragment);
      gl.linkProgram(program);
      if (!gl.getProgramParameter(program, gl.LINK_STATUS)) {
        throw new FragflowError(`the copy shader did not compile:\n${gl.getShaderInfoLog(fragment)}`);
      }
      gl.deleteShader(fragment);
      gl.useProgram(program);
      gl.uniform1i(gl.getUniformLocation(program, 'src'), 0);
      const at = {};
      for (const u of COPY_UNIFORMS) at[u] = gl.getUniformLocation(program, u);
      this.copy[format] = {program, at};
      this.programs.push(program);
    }
  }

  /** Run steps: kernels, and while/scan/cond steps; draw(launch) draws a kernel. */
  async _exec(steps, draw) {
    for (const s of steps) {
      if (s.kind === 'kernels') {
        for (let i = s.first; i < s.first + s.count; i++) draw(this.launches[i]);
      } else if (s.kind === 'cond') {         // only the branch taken runs
        const branch = (await this._predicate(s.pred)) ? s.true : s.false;
        await this._exec(branch.steps, draw);
        s.outputs.forEach((o, k) => { this.slots[o].texture = this.slots[branch.outputs[k]].texture; });
      } else {
        await this._loop(s, draw);
      }
    }
  }

  /** A while_loop or scan: loop variables start as copies; each iteration runs the
   * body, then swaps each variable's texture with its result's (or a copy's). */
  async _loop(s, draw) {
    const slots = this.slots;
    const scan = s.kind === 'scan';
    const trips = scan ? s.length : s.maxIterations;       // null: until the predicate
    const outs = s.body.outputs;
    s.init.forEach((from, k) => this._copy(slots[from], slots[s.vars[k]]));
    for (let i = 0; trips === null || i < trips; i++) {
      if (performance.now() - this.started > this.timeoutMs || this.gl.isContextLost()) {
        this.pending.unshift([null, {label: `${s.kind} '${s.name}'`}]);
        throw this._failure();
      }
      const t = scan && s.reverse ? s.length - 1 - i : i;
      if (scan) {
        for (const [from, into, n] of s.elems) this._copy(slots[from], slots[into], 0, n, t * n);
      } else if (s.cond) {
        await this._exec(s.cond.steps, draw);
        if (!(await this._predicate(s.cond.pred))) break;
      }
      await this._exec(s.body.steps, draw);
      if (scan) {
        s.ys.forEach(([into, n], k) => this._copy(slots[outs[s.vars.length + k]], slots[into],
          t * n, (t + 1) * n, -t * n, true));
      }
      s.next.forEach((n, k) => { if (n >= 0) this._copy(slots[outs[k]], slots[n]); });
      s.vars.forEach((v, k) => {
        const other = slots[s.next[k] >= 0 ? s.next[k] : outs[k]];
        [slots[v].texture, other.texture] = [other.texture, slots[v].texture];
      });
    }
  }

  /** A bool scalar's value: one texel read back (the run waits for the GPU here). */
  async _predicate(index) {
    if (this.directRun) {
      this.pixel = this.pixel || new Int32Array(4);
      this._readInto(this.slots[index].texture, 1, this.pixel);
      this.predicateReads += 1;
      return this.pixel[0] !== 0;
    }
    const pack = this._pack(this.slots[index].texture, 1, 'predicate');
    await this._drain();
    // another model on this context may have drawn meanwhile: bind everything again
    this.bound = unbound();
    this.predicateReads += 1;
    return this._take(pack)[0] !== 0;
  }

  /** Copy with the copy shader: all of from into to, or to's elements [lo, hi) from
   * from's [lo + delta, hi + delta), the rest zeroed (place: only [lo, hi) written). */
  _copy(from, to, lo, hi, delta, place) {
    const gl = this.gl;
    const bound = this.bound;
    const src = from.texture;
    const dst = to.texture;
    const {width, format} = dst.spec;
    const texels = width * dst.spec.height;
    if (hi === undefined) [lo, hi, delta] = [0, 4 * texels, 0];
    if (hi <= lo) return;
    const {program, at} = this.copy[format];
    gl.useProgram(program);
    bound.program = program;
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D, src.id);
    bound.units[0] = src;
    bound.fbo = this._framebuffer(dst);
    gl.bindFramebuffer(gl.FRAMEBUFFER, bound.fbo);
    [src.spec.width, width, lo, hi, delta].forEach((value, k) => gl.uniform1i(at[COPY_UNIFORMS[k]], value));
    for (const [first, end, mask] of place ? texelDraws(lo, hi) : [[0, texels, 15]]) {
      gl.uniform1i(at.tlo, first);
      gl.uniform1i(at.thi, end);
      const row = Math.floor(first / width);
      const rows = Math.floor((end - 1) / width) + 1 - row;
      if (rows === 1) gl.viewport(first % width, row, end - first, 1);
      else gl.viewport(0, row, width, rows);       // the rows drawn only
      if (mask !== 15) gl.colorMask(!!(mask & 1), !!(mask & 2), !!(mask & 4), !!(mask & 8));
      gl.drawArrays(gl.TRIANGLES, 0, 3);
      if (mask !== 15) gl.colorMask(true, true, true, true);
    }
    bound.width = bound.height = -1;
  }

  async _end() {
    const results = {};
    if (this.directRun) {
      for (const o of this.spec.outputs) results[o.name] = this._read(this.slots[o.slot], o);
      if (this.gl.isContextLost()) {
        const ks = this.spec.kernels;
        throw new FragflowError(`${LOST} during this run (kernels ${ks[0].name} to ` +
          `${ks[ks.length - 1].name}): ${AGAIN}`);
      }
    } else {
      const packs = this.spec.outputs.map((o, k) => {
        const t = this.slots[o.slot].texture;
        return layers(o, t).map((j) => this._pack(t, t.spec.width * t.spec.height, `${k}.${j}`, j));
      });
      await this._drain();
      this.spec.outputs.forEach((o, k) => {
        results[o.name] = typed(packs[k].map((p) => this._take(p)), o);
      });
    }
    // the assigns: each variable takes the texture its new value was computed into
    for (const [variable, value] of this.spec.assigns) {
      const a = this.slots[variable];
      const b = this.slots[value];
      [a.texture, b.texture] = [b.texture, a.texture];
    }
    return results;
  }

  /** A slot's value as a typed array of its dtype (readPixels waits for the GPU). */
  _read(slot, what) {
    const s = slot.texture.spec;
    return typed(layers(what, slot.texture).map((j) => {
      const flat = staging(s);
      this._readInto(slot.texture, s.width * s.height, flat, j);
      return flat;
    }), what);
  }

  /** readPixels of a texture's texels (all, or the first; of an array, layer's) into
   * flat (or the bound pixel-pack buffer at offset 0: then it only queues the copy). */
  _readInto(texture, texels, flat, layer) {
    const gl = this.gl;
    const s = texture.spec;
    gl.bindFramebuffer(gl.FRAMEBUFFER, this._framebuffer(texture, layer));
    if (this.bound) this.bound.fbo = null;
    const [format, type] = s.format === 'i' ? [gl.RGBA_INTEGER, gl.INT] : [gl.RGBA, gl.FLOAT];
    const [w, h] = texels === 1 ? [1, 1] : [s.width, s.height];
    gl.readPixels(0, 0, w, h, format, type, flat);
  }

  /** A variable's current value (as Session.get): a typed array of its dtype. */
  read(name) {
    if (this._disposed) throw new FragflowError('the model was disposed');
    const index = this.spec.variables.findIndex((v) => v.name === name);
    if (index < 0) {
      throw new FragflowError(`no variable named '${name}'; the model's variables are ` +
        this.variables.map((v) => `'${v.name}'`).join(', '));
    }
    const v = this.spec.variables[index];
    return this._read(this.slots[v.slot], {dtype: v.dtype,
      size: v.shape.reduce((a, b) => a * b, 1)});
  }

  /** One run (its assigns apply) with each kernel timed: GPU timer queries where
   * offered, else the CPU clock around its draw and a one-texel readback. Resolves to
   * {method, outputs, kernels: [{name, op, scope, ms, calls}], totalMs}. */
  async profile(feeds) {
    const gl = this.gl;
    const ext = this.timerExt;
    const rows = this.spec.kernels.map(({name, op, scope}) => ({name, op, scope, ms: 0, calls: 0}));
    const pixel = new Float32Array(4);
    const ipixel = new Int32Array(4);
    const queries = [];                 // [query, row]
    const draw = (launch) => {          // a kernel in a loop: once per iteration
      if (!this._due(launch)) return;   // a `once` kernel that ran already
      const row = rows[launch.index];
      row.calls += 1;
      if (ext) {
        const query = gl.createQuery();
        gl.beginQuery(ext.TIME_ELAPSED_EXT, query);
        this._draw(launch);
        gl.endQuery(ext.TIME_ELAPSED_EXT);
        queries.push([query, row]);
        return;
      }
      const t0 = performance.now();
      this._draw(launch);
      const out = launch.outputs[0].texture;
      if (!launch.layers) {        // wait for it: read one texel back
        gl.bindFramebuffer(gl.FRAMEBUFFER, this._framebuffer(out));
        this.bound.fbo = null;
        if (out.spec.format === 'i') gl.readPixels(0, 0, 1, 1, gl.RGBA_INTEGER, gl.INT, ipixel);
        else gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, pixel);
      }
      row.ms += performance.now() - t0;
    };
    let outputs;
    try {
      this._begin(feeds);
      if (this.spec.program) await this._exec(this.spec.program, draw);
      else this.launches.forEach(draw);
      outputs = await this._end();
    } finally {
      this.busy = false;
    }
    let method = 'cpu';
    if (ext && queries.length) {
      method = 'timer-query';
      // results come after control went back to the browser: poll
      for (let tries = 0; tries < 2000; tries++) {
        if (gl.getQueryParameter(queries[queries.length - 1][0], gl.QUERY_RESULT_AVAILABLE)) break;
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      const disjoint = gl.getParameter(ext.GPU_DISJOINT_EXT);
      queries.forEach(([query, row]) => {
        row.ms += disjoint ? NaN : gl.getQueryParameter(query, gl.QUERY_RESULT) / 1e6;
        gl.deleteQuery(query);
      });
      if (disjoint) method = 'timer-query (disjoint: no times)';
    }
    return {method, outputs, kernels: rows, totalMs: rows.reduce((a, r) => a + r.ms, 0)};
  }

  /** Delete every texture, framebuffer and program; the model cannot run after. */
  dispose() {
    if (this._disposed) return;
    const gl = this.gl;
    for (const launch of this.launches || []) {
      if (launch.fbo) gl.deleteFramebuffer(launch.fbo);
      for (const fbo of launch.fbos.values()) gl.deleteFramebuffer(fbo);
    }
    for (const slot of this.slots || []) {
      if (slot.spec.kind === 'alias') continue;   // another slot's texture
      for (const fbo of [slot.texture.fbo, ...slot.texture.fbos || []]) gl.deleteFramebuffer(fbo);
      gl.deleteTexture(slot.texture.id);
    }
    for (const program of this.programs || []) gl.deleteProgram(program);
    const cache = programCache(gl, this.options.programCache);
    for (const program of this.programSources || []) cache.give(program);
    for (const buffer of (this.packs || new Map()).values()) gl.deleteBuffer(buffer.id);
    this._forget();
    if (gl.canvas && gl.canvas.removeEventListener) {
      gl.canvas.removeEventListener('webglcontextlost', this._onLost);
    }
    this.slots = this.launches = this.programs = this.programSources = this.packs = null;
    this._disposed = true;
  }
}

/** A texture's elements as an output's or variable's typed array (its dtype, its size),
 * from [its texels], or from its layers where a kernel left it in render targets. */
function typed(flats, what) {
  const flat = what.blocks ? inOrder(flats, what) : flats[0];
  const size = what.size === undefined ? flat.length : what.size;
  if (what.dtype === 'bool') return Uint8Array.from(flat.subarray(0, size), (v) => (v ? 1 : 0));
  return flat.slice(0, size);
}

/** The elements of a [m, n] output from its render targets' texels (what.blocks, as
 * codegen's px_ reads them): texel s * colSlab + c of layer r * cols + h is row
 * r * slab + s, column texel h * colSlab + c. */
function inOrder(flats, {size, blocks: {m, n, cols, slab, colSlab}}) {
  const flat = new Float32Array(size);
  const run = colSlab * 4;
  for (let p = 0; p < m; p++) {
    const r = Math.floor(p / slab), at = (p - r * slab) * run;
    for (let h = 0; h < cols && h * run < n; h++) {
      flat.set(flats[r * cols + h].subarray(at, at + Math.min(run, n - h * run)), p * n + h * run);
    }
  }
  return flat;
}

// [-1] (a texture), or each layer of an output a kernel left in render targets
const layers = (what, t) => what.blocks ? [...Array(t.spec.layers).keys()] : [-1];

// The next task (a message: no 4 ms clamp as nested timers have), or a sleep.
const channel = typeof MessageChannel === 'undefined' ? null : new MessageChannel();
const woken = [];
if (channel) channel.port1.onmessage = () => woken.shift()();
const tick = () => new Promise((resolve) => {
  if (!channel) return setTimeout(resolve, 0);
  woken.push(resolve);
  channel.port2.postMessage(0);
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A constant's or variable's texels from model.bin, zero-padded to its texture;
 * s.encoding: float16 or v*scale+min, as TF.js expands them; s.zeros [period, kept]:
 * each period's texels past the first kept are zeros, not stored. */
function dataOf(bin, s) {
  const [offset, count] = s.data;
  const flat = staging(s);
  const [kind, min, scale] = s.encoding || [];
  const Array = kind === 'uint8' ? Uint8Array : kind ? Uint16Array :
    s.format === 'i' ? Int32Array : Float32Array;
  const q = new Array(bin, offset, count);
  if (!kind) flat.set(q);
  for (let i = 0; kind && i < count; i++) {
    const h = q[i], e = (h >> 10) & 31, m = h & 1023;
    flat[i] = kind !== 'float16' ? h * scale + min : (h & 32768 ? -1 : 1) *
      (e === 31 ? (m ? NaN : Infinity) : e ? (1024 + m) * 2 ** (e - 25) : m * 2 ** -24);
  }
  const z = s.zeros;
  if (!z) return flat;
  const out = staging(s);
  for (let i = 0, o = 0; i < count && z[1] > 0; i += 4 * z[1], o += 4 * z[0]) {
    out.set(flat.subarray(i, i + 4 * z[1]), o);
  }
  return out;
}

/** Draws covering elements [lo, hi): [first texel, end texel, color mask] with whole
 * texels at once, and a texel shared with a neighbouring range masked to its part. */
function texelDraws(lo, hi) {
  const first = lo >> 2;
  const last = (hi - 1) >> 2;
  if (first === last) return [[first, first + 1, ((1 << (hi - lo)) - 1) << (lo & 3)]];
  const draws = [];
  const wholeLo = (lo + 3) >> 2;
  const wholeHi = hi >> 2;
  if (lo & 3) draws.push([first, first + 1, 15 & ~((1 << (lo & 3)) - 1)]);
  if (wholeLo < wholeHi) draws.push([wholeLo, wholeHi, 15]);
  if (hi & 3) draws.push([last, last + 1, (1 << (hi & 3)) - 1]);
  return draws;
}

function staging(s) {
  const n = s.width * s.height * 4;
  return s.format === 'i' ? new Int32Array(n) : new Float32Array(n);
}

function checkFramebuffer(gl, what) {
  const status = gl.checkFramebufferStatus(gl.FRAMEBUFFER);
  if (gl.isContextLost()) throw new FragflowError(`${LOST}: ${AGAIN}`);
  if (status !== gl.FRAMEBUFFER_COMPLETE) {
    throw new FragflowError(`cannot render into ${what} (framebuffer status 0x` +
      `${status.toString(16)}); float render targets need EXT_color_buffer_float`);
  }
}

/** A kernel's whole source: its program with its header after the version line. */
function withHeader(program, header) {
  const end = program.indexOf('\n') + 1;
  return program.slice(0, end) + header + program.slice(end);
}

function numbered(source) {
  return source.split('\n').map((line, i) => `${String(i + 1).padStart(4)}  ${line}`).join('\n');
}
