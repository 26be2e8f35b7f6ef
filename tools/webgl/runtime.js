// fragflow's WebGL2 runtime: runs a model that ff.webgl.export compiled in Python.
//
// This file is the whole runtime; the exporter copies it to model.js and puts the
// model's schedule in place of MODEL below (one JSON literal: kernels with their GLSL
// ES 3.00 sources, textures, bindings, uniforms, feeds, fetches and assigns). The
// constants' and variables' values are in model.bin. Nothing is imported, nothing is
// evaluated: the schedule is data, the shaders are compiled by WebGL.
//
//   const model = await (await import('./model.js')).load();
//   model.inputs, model.outputs      [{name, shape, dtype}] in feed and fetch order
//   await model.run({x: Float32Array}) -> {name: Float32Array | Int32Array | Uint8Array}
//   await model.profile(feeds)       per-kernel times (GPU timer queries where offered)
//   model.dispose()
//
// How a run works (as fragflow's GLPlan, runtime/gl_plan.py): every value lives in an
// RGBA32F or RGBA32I texture, 4 consecutive row-major elements per texel. A "slot"
// is where a value lives: a feed's texture, a constant's, a variable's, one of the
// textures the memory plan shares between values whose lives do not overlap, or an
// array texture whose layers a blocked kernel writes. A kernel draws one triangle
// over its output's texels with its shader, reading its input slots as samplers and
// writing one slot, several (render targets 0, 1, ..) or the layers of one array.
// After the fetches are read back, each assigned variable swaps textures with the
// slot its new value was computed into: the next run computes into the old one.
// See docs/WEBGL.md.

const MODEL = /*@fragflow-model@*/null;

const VERTEX_SHADER = `#version 300 es
// One triangle that covers the viewport; no vertex data (gl_VertexID only).
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
`;

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
 *   gl              a WebGL2RenderingContext to use (shared with your own drawing:
 *                   the runtime sets what it needs before each run)
 *   url             where model.bin is (default: next to model.js)
 *   bin             model.bin's bytes (an ArrayBuffer) instead of fetching it
 *   maxDrawBuffers  refuse contexts with fewer render targets than the model needs
 *                   (the model knows how many it needs; this only lowers the ceiling)
 */
export async function load(options = {}) {
  const gl = options.gl || context(options.canvas);
  const model = new Model(gl, MODEL, options);
  const bin = options.bin || await fetchBin(options.url || new URL('model.bin', import.meta.url));
  model.upload(bin);
  await model.compile();
  return model;
}

/** The schedule this file carries (a copy-free view: do not change it). */
export const schedule = MODEL;

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
    if (!spec || spec.format !== 'fragflow.webgl' || spec.version !== 1) {
      throw new FragflowError('model.js holds no fragflow.webgl version 1 schedule');
    }
    this.gl = gl;
    this.spec = spec;
    this.inputs = spec.inputs.map(({name, shape, dtype}) => ({name, shape, dtype}));
    this.outputs = spec.outputs.map(({name, shape, dtype}) => ({name, shape, dtype}));
    this.variables = spec.variables.map(({name, shape, dtype}) => ({name, shape, dtype}));
    this.kernels = spec.kernels.map(({name, op, scope, source}) => ({name, op, scope, source}));
    this.runs = 0;                  // the run counter random ops draw from
    this.timings = {};              // load phases, in milliseconds
    this._disposed = false;
    this._checkContext(options);
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
    const ceiling = Math.min(have, options.maxDrawBuffers || have);
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

  // -- textures ---------------------------------------------------------------------
  /** Make every slot's texture; constants and variables take their values from bin. */
  upload(bin) {
    const t0 = performance.now();
    if (bin.byteLength !== this.spec.binBytes) {
      throw new FragflowError(`model.bin has ${bin.byteLength} bytes, the model expects ` +
        `${this.spec.binBytes}: model.js and model.bin come from different exports`);
    }
    this.slots = this.spec.slots.map((s) => {
      const slot = {spec: s, texture: this._texture(s)};
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
    const format = s.format === 'i' ? gl.RGBA32I : gl.RGBA32F;
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

  /** The framebuffer rendering into one texture (made on first use, kept). */
  _framebuffer(texture) {
    if (!texture.fbo) {
      const gl = this.gl;
      texture.fbo = gl.createFramebuffer();
      gl.bindFramebuffer(gl.FRAMEBUFFER, texture.fbo);
      gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D,
        texture.id, 0);
      checkFramebuffer(gl, `a ${texture.spec.width}x${texture.spec.height} texture`);
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
        checkFramebuffer(gl, `${launch.layers} layers of an array texture`);
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
      checkFramebuffer(gl, `${textures.length} textures at once`);
      launch.fbos.set(key, fbo);
    }
    return fbo;
  }

  _id(texture) {        // a small number per texture, for framebuffer keys
    if (texture.key === undefined) texture.key = this._nextKey = (this._nextKey || 0) + 1;
    return texture.key;
  }

  // -- shaders ------------------------------------------------------------------------
  /** Compile every shader, then link every program, then wait for them all: with
   * KHR_parallel_shader_compile the driver works on them at once while we poll. */
  async compile() {
    const gl = this.gl;
    const t0 = performance.now();
    const vertex = gl.createShader(gl.VERTEX_SHADER);
    gl.shaderSource(vertex, VERTEX_SHADER);
    gl.compileShader(vertex);
    const programs = new Map();                  // kernel index -> program being built
    this.spec.kernels.forEach((k, i) => {
      if (k.program !== i) return;               // shares the program of kernel k.program
      const fragment = gl.createShader(gl.FRAGMENT_SHADER);
      gl.shaderSource(fragment, k.source);
      gl.compileShader(fragment);
      programs.set(i, {fragment, program: null});
    });
    for (const p of programs.values()) {
      p.program = gl.createProgram();
      gl.attachShader(p.program, vertex);
      gl.attachShader(p.program, p.fragment);
      gl.linkProgram(p.program);
    }
    if (this.parallelExt) {
      const done = this.parallelExt.COMPLETION_STATUS_KHR;
      while (![...programs.values()].every((p) => gl.getProgramParameter(p.program, done))) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }
    for (const [i, p] of programs) {
      if (!gl.getProgramParameter(p.program, gl.LINK_STATUS)) {
        const k = this.spec.kernels[i];
        const log = gl.getShaderInfoLog(p.fragment) || gl.getProgramInfoLog(p.program);
        throw new FragflowError(`kernel ${k.name} did not compile:\n${log}\nsource:\n` +
          numbered(k.source));
      }
      gl.detachShader(p.program, p.fragment);
      gl.deleteShader(p.fragment);
    }
    gl.deleteShader(vertex);
    this.programs = [...programs.values()].map((p) => p.program);
    this._launches(programs);
    this.timings.compile = performance.now() - t0;
  }

  /** What each draw needs, resolved once: program, sampler units, uniform setters. */
  _launches(programs) {
    const gl = this.gl;
    const setters = {float: 'uniform1f', int: 'uniform1i', bool: 'uniform1i', uint: 'uniform1ui'};
    this.launches = this.spec.kernels.map((k) => {
      const program = programs.get(k.program).program;
      gl.useProgram(program);
      k.samplers.forEach((name, unit) => {     // samplers never change units
        const location = gl.getUniformLocation(program, name);
        if (location !== null) gl.uniform1i(location, unit);
      });
      const uniforms = [];
      for (const [name, type, value] of k.uniforms) {
        const location = gl.getUniformLocation(program, name);
        // the compiler drops uniforms the code never reads
        if (location !== null) uniforms.push([setters[type], location, Number(value)]);
      }
      return {
        kernel: k, program, uniforms, layers: k.layers, fbo: null, fbos: new Map(),
        inputs: k.inputs.map((i) => this.slots[i]),
        outputs: k.outputs.map((i) => this.slots[i]),
        width: k.width, height: k.height,
      };
    });
  }

  // -- running ------------------------------------------------------------------------
  /** One run: upload the feeds, draw every kernel, read the fetches back, then apply
   * the assigns (variables stay on the GPU). Resolves to {output name: typed array}. */
  async run(feeds) {
    this._begin(feeds);
    for (const launch of this.launches) this._draw(launch);
    return this._end();
  }

  _begin(feeds) {
    if (this._disposed) throw new FragflowError('the model was disposed');
    const gl = this.gl;
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
    // state a shared context may have changed: nothing blends, tests or culls
    for (const cap of [gl.BLEND, gl.DEPTH_TEST, gl.STENCIL_TEST, gl.SCISSOR_TEST,
      gl.CULL_FACE, gl.DITHER, gl.RASTERIZER_DISCARD]) gl.disable(cap);
    gl.bindVertexArray(null);
    this.bound = {program: null, fbo: null, width: -1, height: -1, units: [], kernel: new Map()};
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
  }

  _end() {
    const results = {};
    for (const output of this.spec.outputs) {
      results[output.name] = this._read(this.slots[output.slot], output);
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
    const gl = this.gl;
    const s = slot.texture.spec;
    const flat = s.format === 'i' ? new Int32Array(s.width * s.height * 4)
      : new Float32Array(s.width * s.height * 4);
    gl.bindFramebuffer(gl.FRAMEBUFFER, this._framebuffer(slot.texture));
    if (this.bound) this.bound.fbo = null;
    if (s.format === 'i') {
      gl.readPixels(0, 0, s.width, s.height, gl.RGBA_INTEGER, gl.INT, flat);
    } else {
      gl.readPixels(0, 0, s.width, s.height, gl.RGBA, gl.FLOAT, flat);
    }
    const size = what.size === undefined ? flat.length : what.size;
    if (what.dtype === 'bool') return Uint8Array.from(flat.subarray(0, size), (v) => (v ? 1 : 0));
    return flat.slice(0, size);
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

  /**
   * One observed run: each kernel's time, from GPU timer queries
   * (EXT_disjoint_timer_query_webgl2) where the context offers them, else the CPU's
   * clock around the draw and a one-texel readback (which waits for the GPU). The run
   * counts as a run (its assigns apply). Resolves to
   * {method, outputs, kernels: [{name, op, scope, ms}], totalMs}.
   */
  async profile(feeds) {
    const gl = this.gl;
    const ext = this.timerExt;
    this._begin(feeds);
    const rows = [];
    const pixel = new Float32Array(4);
    const ipixel = new Int32Array(4);
    const queries = [];
    for (const launch of this.launches) {
      const k = launch.kernel;
      if (ext) {
        const query = gl.createQuery();
        gl.beginQuery(ext.TIME_ELAPSED_EXT, query);
        this._draw(launch);
        gl.endQuery(ext.TIME_ELAPSED_EXT);
        queries.push(query);
        rows.push({name: k.name, op: k.op, scope: k.scope, ms: 0});
      } else {
        const t0 = performance.now();
        this._draw(launch);
        const out = launch.outputs[0].texture;
        if (!launch.layers) {        // wait for it: read one texel back
          gl.bindFramebuffer(gl.FRAMEBUFFER, this._framebuffer(out));
          this.bound.fbo = null;
          if (out.spec.format === 'i') gl.readPixels(0, 0, 1, 1, gl.RGBA_INTEGER, gl.INT, ipixel);
          else gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, pixel);
        }
        rows.push({name: k.name, op: k.op, scope: k.scope, ms: performance.now() - t0});
      }
    }
    const outputs = this._end();
    let method = 'cpu';
    if (ext && queries.length) {
      method = 'timer-query';
      // results come after control went back to the browser: poll
      for (let tries = 0; tries < 2000; tries++) {
        if (gl.getQueryParameter(queries[queries.length - 1], gl.QUERY_RESULT_AVAILABLE)) break;
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      const disjoint = gl.getParameter(ext.GPU_DISJOINT_EXT);
      queries.forEach((query, i) => {
        rows[i].ms = disjoint ? NaN : gl.getQueryParameter(query, gl.QUERY_RESULT) / 1e6;
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
      if (slot.texture.fbo) gl.deleteFramebuffer(slot.texture.fbo);
      gl.deleteTexture(slot.texture.id);
    }
    for (const program of this.programs || []) gl.deleteProgram(program);
    this.slots = this.launches = this.programs = null;
    this._disposed = true;
  }
}

/** A constant's or variable's texels from model.bin, zero-padded to its texture. */
function dataOf(bin, s) {
  const [offset, count] = s.data;
  const flat = staging(s);
  const Array = s.format === 'i' ? Int32Array : Float32Array;
  flat.set(new Array(bin, offset, count));
  return flat;
}

function staging(s) {
  const n = s.width * s.height * 4;
  return s.format === 'i' ? new Int32Array(n) : new Float32Array(n);
}

function checkFramebuffer(gl, what) {
  const status = gl.checkFramebufferStatus(gl.FRAMEBUFFER);
  if (status !== gl.FRAMEBUFFER_COMPLETE) {
    throw new FragflowError(`cannot render into ${what} (framebuffer status 0x` +
      `${status.toString(16)}); float render targets need EXT_color_buffer_float`);
  }
}

function numbered(source) {
  return source.split('\n').map((line, i) => `${String(i + 1).padStart(4)}  ${line}`).join('\n');
}
