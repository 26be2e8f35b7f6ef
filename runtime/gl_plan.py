"""Running a LoweredGraph on the GL context: a flat list of launches with textures and
linked shaders resolved when the plan is built. run() uploads feeds, draws, reads fetches
back and swaps in assigned variables; it walks no graph and formats no strings."""
from __future__ import annotations

import ctypes
import time

import numpy as np

from ..codegen.layout import Layout, layout_for
from ..ir.types import TensorType
from .device import Device
from .gl_resources import GL, ArrayTexture, RenderTargets, Texture, check_gl
from .memory_plan import hoisted_values, plan_memory
from .slot_targets import SlotTargets


class Slot:
    """Where a value lives. Variables' slots swap textures when assigned."""
    __slots__ = ("texture",)

    def __init__(self, texture: Texture):
        self.texture = texture


def to_texels(array: np.ndarray, layout: Layout, staging: np.ndarray | None = None):
    """The flat texel data of an array: zero-padded to the texture's size."""
    dtype = np.float32 if layout.dtype == "float32" else np.int32
    flat = np.ascontiguousarray(array, dtype=dtype).reshape(-1)
    total = layout.width * layout.height * 4
    if flat.size == total:
        return flat
    if staging is None:
        staging = np.zeros(total, dtype)
    staging[:flat.size] = flat
    return staging


def from_texels(flat: np.ndarray, layout: Layout) -> np.ndarray:
    out = flat[:layout.size].reshape(layout.shape)
    return out != 0 if layout.dtype == "bool" else out


def from_layers(layers: np.ndarray, view) -> np.ndarray:
    """The flat elements, in order, of a [M, N] value a kernel left in render targets
    (layers: [target, texels * 4], RenderTargets.readback_layers): its BlocksLayout
    `view`'s Blocking says where each texel is (templates/blocks_texel.glsl.j2 px_):
    row p = r * S + s, column texel ct = h * NTC + c at texel s * NTC + c of target
    r * CT + h (one matrix, no K splits: codegen/lower.py _fetched_blocks)."""
    b = view.blocking
    texels = b.slab * b.col_slab
    parts = layers[:, :texels * 4].reshape(b.rows, b.cols, b.slab, b.col_slab * 4)
    matrix = parts.transpose(0, 2, 1, 3).reshape(b.rows * b.slab, b.cols * b.col_slab * 4)
    return matrix[:b.m, :b.n].reshape(-1)


class LayersReadback:
    """Where a fetched value left in its kernel's render targets lives
    (LoweredGraph.fetched_blocks): it stands for a slot's texture to readbacks, its
    readback() the value's elements in order. Not a Texture: nothing binds it, and
    run_resident reads it back."""
    __slots__ = ("targets", "view")

    def __init__(self, targets: RenderTargets, view):
        self.targets, self.view = targets, view

    def readback(self) -> np.ndarray:
        return from_layers(self.targets.readback_layers(), self.view)


class Resident:
    """A value left in a texture by a run: the texture and its layout. Valid until the
    plan that owns the texture runs again or is released; read() reads it back."""
    __slots__ = ("texture", "layout")

    def __init__(self, texture, layout: Layout):
        self.texture, self.layout = texture, layout

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.layout.shape), self.layout.dtype)

    def read(self) -> np.ndarray:
        return from_texels(self.texture.readback(), self.layout)


class BoundState:
    """What the launch loop has bound so far: draw() skips every GL call that would set
    what is already set (dependent tiny kernels cost little more than their calls).

    It knows only what draw() did, so it is valid only while nothing else binds:
    forget() it before a launch loop (uploads bind textures, readbacks bind
    framebuffers, linking a shader uses glUseProgram, deleting an object unbinds it)
    and after anything else touched the context (run_observed's observers)."""
    __slots__ = ("shader", "framebuffer", "width", "height", "active_unit", "textures")

    def __init__(self):
        self.textures: dict = {}         # texture unit -> texture id bound there
        self.forget()

    def forget(self) -> None:
        self.shader = self.framebuffer = self.width = self.height = None
        self.active_unit = None
        self.textures.clear()


BOUND = BoundState()      # one GL context per process (runs hold the session's lock)
_TEXTURE0, _TEXTURE_2D, _FRAMEBUFFER = GL.GL_TEXTURE0, GL.GL_TEXTURE_2D, GL.GL_FRAMEBUFFER
_TRIANGLES = GL.GL_TRIANGLES


def draw(shader_id, inputs, uniforms, out, width, height, bound=BOUND) -> None:
    """One launch: the linked shader, its uniforms and input textures, the output's
    framebuffer, and a triangle covering it; only the calls that change state."""
    if bound.shader != shader_id:
        GL.glUseProgram(shader_id)
        bound.shader = shader_id
    for setter, location, value in uniforms:    # kernels sharing a shader differ here
        setter(location, value)
    textures = bound.textures
    for unit, slot in enumerate(inputs):
        texture_id = slot.texture.id
        if textures.get(unit) != texture_id:
            if bound.active_unit != unit:
                GL.glActiveTexture(_TEXTURE0 + unit)
                bound.active_unit = unit
            GL.glBindTexture(slot.texture.target, texture_id)
            textures[unit] = texture_id
    fbo = out.texture.fbo
    if bound.framebuffer != fbo:
        GL.glBindFramebuffer(_FRAMEBUFFER, fbo)
        bound.framebuffer = fbo
    if bound.width != width or bound.height != height:
        GL.glViewport(0, 0, width, height)
        bound.width, bound.height = width, height
    GL.glDrawArrays(_TRIANGLES, 0, 3)


def draw_rows(launch, row0: int, rows: int, bound=BOUND) -> None:
    """draw(*launch) into rows [row0, row0 + rows) of its target only (a kernel writing
    a window of a larger texture: codegen/windows.py)."""
    shader_id, inputs, uniforms, out, width, _ = launch
    bound.width = bound.height = None       # the next draw sets its whole viewport again
    GL.glViewport(0, row0, width, rows)
    draw(shader_id, inputs, uniforms, out, None, None, bound)


def _timer_entry_points():
    """(GL_TIME_ELAPSED, glGetQueryObjectui64v) of this context, or None: GL 3.3 core
    has them; OpenGL ES only through EXT_disjoint_timer_query."""
    context = Device.get().context
    if not context.timer_query:
        return None
    if context.api == "gles":
        # through eglGetProcAddress: PyOpenGL's wrapper has no array type for GLuint64
        # results, and its raw entry point is not resolved on an ES context
        address = context.proc_address("glGetQueryObjectui64vEXT")
        if not address:
            return None
        get = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint,
                               ctypes.POINTER(ctypes.c_uint64))(address)

        def result(query, pname):
            value = ctypes.c_uint64()
            get(query, pname, ctypes.byref(value))
            return value.value
        return 0x88BF, result       # GL_TIME_ELAPSED_EXT (GL_TIME_ELAPSED's value)
    return GL.GL_TIME_ELAPSED, GL.glGetQueryObjectui64v


class GPUTimer:
    """Per-draw GPU time with GL_TIME_ELAPSED queries (core since 3.3, ES through
    EXT_disjoint_timer_query); where a driver lacks them, None: the caller times the
    (synchronised) draw on the CPU clock."""

    def __init__(self):
        self.query = None
        entry_points = _timer_entry_points()
        if entry_points is None:
            return
        self.time_elapsed, self.result_ui64 = entry_points
        try:
            self.query = int(GL.glGenQueries(1))
        except Exception:            # no timer queries: CPU clock after glFinish
            self.query = None

    def begin(self):
        if self.query is not None:
            GL.glBeginQuery(self.time_elapsed, self.query)

    def end(self):
        if self.query is None:
            GL.glFinish()
            return None
        GL.glEndQuery(self.time_elapsed)
        nanoseconds = self.result_ui64(self.query, GL.GL_QUERY_RESULT)
        return int(getattr(nanoseconds, "value", nanoseconds)) * 1e-9

    def __del__(self):
        # the collector may run on any thread, outside a GL section: delete the query
        # at the start of the next section instead
        if self.query is not None:
            try:
                Device.get().gl.defer(lambda query=self.query:
                                      GL.glDeleteQueries(1, [query]))
            except Exception:        # interpreter shutdown: the context is gone
                pass


class GLVariables:
    """A session's variables, each in a texture it owns, across runs. The variable-store
    API every backend's store has (runtime/backend.py): `name in store`, read, write
    (which creates a variable not held yet), textures, release; plans take a
    variable's texture with slot()."""

    def __init__(self, device: Device):
        self.device = device
        self._slots: dict = {}     # variable name -> Slot
        self._layouts: dict = {}
        # bumped whenever a variable's value may have changed (write, a plan's assign,
        # release): plans compute the kernels they hoisted from variables again
        self.generation = 0

    def slot(self, name: str, layout: Layout, initial_value, written: bool = False) -> Slot:
        """The variable's slot, made from initial_value on first use. A float16 initial
        value (an imported float16 model's weight) gets an RGBA16F texture where the
        device's tuning has half_weight_textures, until a plan writes the variable
        (written: an assign's swap; or write()): then it turns RGBA32F, values kept."""
        slot = self._slots.get(name)
        if slot is None:
            key = layout.texture_key
            if not written and np.asarray(initial_value).dtype == np.float16 and \
                    self.device.tuning.half_weight_textures:
                key = (key[0], key[1], "rgba16f")
            slot = Slot(self.device.pool.acquire(key))
            slot.texture.upload(to_texels(initial_value, layout))
            self._slots[name] = slot
            self._layouts[name] = layout
        elif written:
            self._full(name)
        return slot

    def _full(self, name: str) -> None:
        """The variable's texture as RGBA32F (from RGBA16F: its values copied)."""
        slot, layout = self._slots[name], self._layouts[name]
        if slot.texture.format == "rgba16f":
            half = slot.texture
            slot.texture = self.device.pool.acquire(layout.texture_key)
            slot.texture.upload(half.readback())
            self.device.pool.release(half)

    def __contains__(self, name: str) -> bool:
        return name in self._slots

    def read(self, name: str) -> np.ndarray:
        return from_texels(self._slots[name].texture.readback(), self._layouts[name])

    def write(self, name: str, value: np.ndarray) -> None:
        """value: an array of the variable's shape and dtype (a Session checks it)."""
        if name not in self._slots:
            layout = layout_for(TensorType(value.shape, value.dtype.name),
                                self.device.max_texture_size)
            self.slot(name, layout, value)
        else:
            self._full(name)
            self._slots[name].texture.upload(to_texels(value, self._layouts[name]))
        self.generation += 1

    def textures(self) -> list:
        return [s.texture for s in self._slots.values()]

    def release(self) -> None:
        for slot in self._slots.values():
            self.device.pool.release(slot.texture)
        self._slots.clear()
        self.generation += 1


class GLPlan:
    def __init__(self, lowered_graph, variables: GLVariables, variable_values: dict):
        """variable_values: variable name -> initial value (used on first use)."""
        self.lowered_graph = lowered_graph
        self.device = variables.device
        self._store = variables             # the session's GLVariables
        self._hoisted_launches: list = []  # run once (ready()), not every run
        self._hoisted_generation = None    # variables.generation they were run at
        self.hoisted_runs = 0              # how many times ready() ran them
        self._owned: list = []
        self._launches: list = []
        self._framebuffers: list = []      # RenderTargets of multi-output kernels
        self._arrays: list = []            # ArrayTextures of blocked kernels' targets
        try:
            self._build(lowered_graph, variables, variable_values)
        except BaseException:
            self.release()          # a plan that fails to build keeps no texture
            raise

    def _build(self, lowered_graph, variables: GLVariables, variable_values: dict):
        pool = self.device.pool
        layouts = lowered_graph.layouts
        slot_of: dict = {}

        def new_slot(texture_key):
            slot = Slot(pool.acquire(texture_key))
            self._owned.append(slot)
            return slot

        # Feeds and constants: textures of the plan's own for its whole life.
        self._uploads = []
        for name in lowered_graph.feeds:
            slot_of[name] = new_slot(layouts[name].texture_key)
            staging = np.zeros(layouts[name].width * layouts[name].height * 4,
                               np.float32 if layouts[name].dtype == "float32" else np.int32)
            self._uploads.append((name, slot_of[name], layouts[name], staging))
        for name, value in lowered_graph.constants.items():
            slot_of[name] = new_slot(layouts[name].texture_key)
            slot_of[name].texture.upload(to_texels(value, layouts[name]))
        for value_name, var_name in lowered_graph.variables.items():
            slot_of[value_name] = variables.slot(var_name, layouts[value_name],
                                                 variable_values[var_name])

        # What the kernels write: textures shared by liveness (runtime/memory_plan.py)
        # Kernels reading only constants, variables no run of this plan assigns, and
        # other such kernels' outputs (a matmul's packed weights) run once, in ready(),
        # into textures nothing else reuses (memory_plan.hoisted_values)
        hoisted = self.hoisted = hoisted_values(lowered_graph)
        memory = self.memory = plan_memory(lowered_graph, hoisted)
        shared = [new_slot(key) for key in memory.textures]
        for value, index in memory.texture_of.items():
            slot_of[value] = shared[index]
            if layouts[value].window:   # the runtime points it into a larger texture
                slot_of[value] = new_slot(layouts[value].texture_key)
        self._launches = []
        self._launch_info = []         # (kernel, output layout) per launch
        targets_of = {}                # array value -> the RenderTargets writing it
        for step in lowered_graph.steps:
            if step[0] != "kernel":
                continue
            kernel = step[1]
            out = kernel.output.value
            layout = layouts[out]
            target = slot_of.get(out)
            if kernel.output_layers:            # render targets: an array's layers
                self._arrays.append(ArrayTexture(layout.width, layout.height,
                                                 kernel.output_layers))
                slot_of[out] = Slot(self._arrays[-1])
                targets = targets_of[out] = RenderTargets(array=slot_of[out].texture)
                self._framebuffers.append(targets)
                target = Slot(targets)
            elif kernel.extra_outputs:          # several render targets, one draw
                # a framebuffer per set of textures the slots hold (assigns swap them)
                target = SlotTargets(slot_of[b.value] for b in kernel.outputs)
                self._framebuffers.append(target)
            shader_id = self.device.shaders.get(kernel)
            inputs = tuple(slot_of[memory.root(b.value)] for b in kernel.inputs)
            uniforms = self.device.shaders.uniform_setters(shader_id, kernel)
            launch = (shader_id, inputs, uniforms, target, layout.width, layout.height)
            if out in hoisted:
                self._hoisted_launches.append((launch, (kernel, layout)))
                continue
            self._launches.append(launch)
            self._launch_info.append((kernel, layout))
        for name, blocks in lowered_graph.fetched_blocks.items():
            slot_of[name] = Slot(LayersReadback(targets_of[blocks], layouts[blocks]))
        for alias, source in memory.roots.items():
            slot_of[alias] = slot_of[source]
        self._readbacks = [(slot_of[n], layouts[n]) for n in lowered_graph.outputs]
        # a variable that is fed in this run and assigned has no slot yet: make it
        self._swaps = [(variables.slot(var, layouts[n], variable_values[var], written=True),
                        slot_of[n])
                       for var, n in lowered_graph.assigns]
        check_gl("building a plan")

    @property
    def kernels(self):
        return self.lowered_graph.kernels

    def ready(self, observer=None) -> bool:
        """Run the hoisted kernels where their textures do not hold their values yet (the
        first run, or the session's variables changed since: Session.set, restore, an
        assign). Called in the device's GL section by every run, and by whatever replays
        `_launches` (runtime/control_flow.py). True where it ran them."""
        if not self._hoisted_launches or \
                self._hoisted_generation == self._store.generation:
            return False
        BOUND.forget()
        if observer is None:
            for launch, _ in self._hoisted_launches:
                draw(*launch)
        else:
            self._draw_observed(observer, self._hoisted_launches)
        self._hoisted_generation = self._store.generation
        self.hoisted_runs += 1
        return True

    def run(self, feeds: dict) -> list:
        """Upload feeds, draw, read the fetches back, swap in assigned variables."""
        return self.run_observed(feeds, None)

    def run_observed(self, feeds: dict, observer) -> list:
        """run() with an observer (None: nobody) told what each phase and kernel costs,
        and able to look at every kernel's output (profiling, debug mode). Observed
        runs are slower: they wait for the GPU after every step.

        Runs inside the device's GL section (re-entrant: a Session's run already holds
        it), so a plan is right from any thread, whoever calls it."""
        with self.device.gl:
            return self._run_in_section(feeds, observer)

    def _run_in_section(self, feeds: dict, observer) -> list:
        start = time.perf_counter()
        for name, slot, layout, staging in self._uploads:
            slot.texture.upload(to_texels(feeds[name], layout, staging))
            if observer is not None:
                observer.input(name, lambda slot=slot, layout=layout:
                               from_texels(slot.texture.readback(), layout))
        if observer is None:
            self.ready()
            BOUND.forget()            # uploads (and anything since the last run) bound
            for launch in self._launches:
                draw(*launch)
            results = self._read_outputs()
        else:
            GL.glFinish()
            observer.phase("upload", time.perf_counter() - start)
            self.ready(observer)
            self._draw_observed(observer, zip(self._launches, self._launch_info))
            start = time.perf_counter()
            results = self._read_outputs()
            observer.phase("readback", time.perf_counter() - start)
        self._swap_assigned()
        check_gl("running a plan")
        return results

    def _draw_observed(self, observer, launches) -> None:
        """Draw (launch, (kernel, layout)) pairs, each timed and shown to the observer."""
        timer = GPUTimer()
        for launch, (kernel, layout) in launches:
            out = launch[3]
            start = time.perf_counter()
            timer.begin()
            BOUND.forget()            # the observer may have read a texture back
            draw(*launch)
            gpu = timer.end()
            observer.kernel(kernel, gpu if gpu is not None else time.perf_counter() - start,
                            lambda out=out, layout=layout:
                            from_texels(out.texture.readback(), layout))

    def _read_outputs(self) -> list:
        return [from_texels(slot.texture.readback(), layout)
                for slot, layout in self._readbacks]

    def _swap_assigned(self) -> None:
        """Assigned variables take their new values' textures (and give theirs back)."""
        for var_slot, new_slot in self._swaps:
            var_slot.texture, new_slot.texture = new_slot.texture, var_slot.texture
        if self._swaps:       # this plan's hoisted kernels never read what it assigns
            current = self._hoisted_generation == self._store.generation
            self._store.generation += 1
            if current:
                self._hoisted_generation = self._store.generation

    def textures(self) -> list:
        return [s.texture for s in self._owned] + list(self._arrays)

    def release(self) -> None:
        for targets in self._framebuffers:
            targets.delete()
        self._framebuffers.clear()
        for array in self._arrays:
            array.delete()
        self._arrays.clear()
        for slot in self._owned:
            self.device.pool.release(slot.texture)
        self._owned.clear()
        self._launches.clear()
        self._hoisted_launches.clear()

    # -- a run that keeps its values on the GPU (runtime/control_flow.py) --------------
    def run_resident(self, feeds: dict) -> list:
        """run() with values left on the GPU: a feed may be a Resident, whose texture is
        bound in place of the feed's own for this run (nothing uploaded) when its layout
        matches, and each fetch comes back as a Resident (nothing read back) except one in
        an array texture or left in render targets (read back). The feed textures given
        are only read, never written; an assigned variable whose new value is a given
        feed gets a copy (uploaded)."""
        with self.device.gl:
            swapped = {id(new) for _, new in self._swaps}
            restore = []
            for name, slot, layout, staging in self._uploads:
                value = feeds[name]
                if isinstance(value, Resident):
                    if (value.layout.texture_key == layout.texture_key and
                            id(slot) not in swapped and isinstance(value.texture, Texture)):
                        restore.append((slot, slot.texture))
                        slot.texture = value.texture
                        continue
                    value = value.read()
                slot.texture.upload(to_texels(value, layout, staging))
            self.ready()
            BOUND.forget()
            for launch in self._launches:
                draw(*launch)
            results = [Resident(slot.texture, layout) if isinstance(slot.texture, Texture)
                       else from_texels(slot.texture.readback(), layout)
                       for slot, layout in self._readbacks]
            self._swap_assigned()
            for slot, texture in restore:
                slot.texture = texture
            check_gl("running a plan")
            return results
