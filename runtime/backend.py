"""Execution backends: what the compile driver (runtime/driver.py) and a Session need
from "gl" and "numpy", behind one interface, so neither checks a backend's name.

A backend (one per Session): `name`; `device` (the process's GL Device, or None);
`lock` (re-entrant, held around every use of its plans and variables: GL's section);
`max_texture_units` / `max_draw_buffers` (what one kernel may read / write, or None:
the passes' defaults); `limits` and `tuning` (what lowering follows: codegen/limits.py,
codegen/tuning; limits None: nothing is lowered, its plans run the compiled graph);
`variables()` (a new store); `build_plan(program, variables, initial values)` (program:
a LoweredGraph where limits is set, else the compiled graph); `release_plan(plan)`;
`evict()` (after plans were built or released: GL deletes idle linked shaders beyond
its bound); `release(plans, variables)` and `release_later(...)` (from __del__, on any
thread: GL waits for its next section); `trim()` (after close); `stats()`.

A variable store: `name in store`, read(name), write(name, array) (making one not held
yet), textures(), release(). A plan: run(feeds_by_name) -> arrays, which is
run_observed(feeds_by_name, None), an observer hearing input(name, read), phase(name,
seconds) and kernel(kernel, seconds, read); kernels; textures(); release(). The driver
hands a plan out in its Compiled record (runtime/driver.py).
"""
from __future__ import annotations

import threading

from ..ir.errors import FragflowError
from .device import Device
from .numpy_executor import NumpyPlan, NumpyVariables


class NumpyBackend:
    """The ops' numpy references, node by node (runtime/numpy_executor.py)."""
    name = "numpy"
    device = None
    max_texture_units = None      # the passes' default, GL 3.3's 16
    max_draw_buffers = None       # the passes' default, GL 3.3's 8
    limits = None                 # runs the compiled graph: nothing is lowered
    tuning = None

    def __init__(self, device=None):      # device: GL only, no meaning here
        self.lock = threading.RLock()     # plan cache and variables, one call at a time

    def variables(self):
        return NumpyVariables()

    def build_plan(self, graph, variables, variable_values: dict):
        """graph: the compiled graph (its variables start from their nodes' values)."""
        return NumpyPlan(graph, variables)

    def release_plan(self, plan) -> None:
        plan.release()

    def evict(self) -> None:
        pass

    def release(self, plans, variables) -> None:
        for plan in plans:
            plan.release()
        variables.release()

    def release_later(self, plans, variables) -> None:
        pass                      # nothing held outside Python's memory

    def trim(self) -> None:
        pass

    def stats(self) -> dict:
        return {}


class GLBackend:
    """Kernels lowered to GLSL, drawn on the process's GL context (runtime/gl_plan.py)."""
    name = "gl"

    def __init__(self, device=None):
        self.device = Device.get() if device is None else Device.get(device)
        self.lock = self.device.gl      # every GL call runs in this section
        self.max_texture_units = self.device.limits.max_texture_units
        self.max_draw_buffers = self.device.limits.max_draw_buffers

    def variables(self):
        from .gl_plan import GLVariables  # imports OpenGL: only once the device's context exists
        return GLVariables(self.device)

    @property
    def limits(self):
        """What lowering depends on besides the graph: the device's dialect and limits
        (codegen/limits.py's Limits; the plan cache's key holds them)."""
        return self.device.limits

    @property
    def tuning(self):
        """The device's Tuning (codegen/tuning: its profile, FRAGFLOW_TUNING applied)."""
        return self.device.tuning

    def build_plan(self, lowered_graph, variables, variable_values: dict):
        """lowered_graph: the driver's LoweredGraph (codegen lower() with self.limits),
        or the plan cache's."""
        from .gl_plan import GLPlan  # imports OpenGL: only once the device's context exists
        plan = GLPlan(lowered_graph, variables, variable_values)
        self.device.shaders.pin(plan.kernels)    # its shaders stay while it lives
        return plan

    def release_plan(self, plan) -> None:
        self.device.shaders.unpin(plan.kernels)
        plan.release()

    def evict(self) -> None:
        self.device.shaders.evict()      # shaders no live plan uses: bounded

    def release(self, plans, variables) -> None:
        for plan in plans:
            self.release_plan(plan)
        variables.release()
        self.evict()

    def release_later(self, plans, variables) -> None:
        self.device.gl.defer(lambda: self.release(plans, variables))

    def trim(self) -> None:
        self.device.pool.trim()
        self.device.trim_heap()

    def stats(self) -> dict:
        return self.device.stats()


BACKENDS = {"gl": GLBackend, "numpy": NumpyBackend}


def get_backend(name: str, **options):
    """A new backend by name ("gl" takes device=, an index from ff.devices())."""
    if name not in BACKENDS:
        raise FragflowError(f"unknown backend {name!r}; use one of {tuple(BACKENDS)}")
    return BACKENDS[name](**options)
