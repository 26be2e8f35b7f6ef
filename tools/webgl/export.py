"""ff.webgl.export: a compiled graph as a standalone WebGL2 model, three files:

    model.js     tools/webgl/runtime.js (the runtime, written by hand) with the model's
                 schedule put in place of its MODEL placeholder: one JSON literal holding
                 the kernels (their GLSL ES 3.00 sources, headers kept), the textures,
                 which texture each kernel reads and writes, uniforms, feeds, fetches
                 and assigns. No imports, no eval: `export async function load(options)`.
    model.bin    constants and variables' values, little-endian, each 16-byte aligned
                 (float32; int32 and bool as int32), where the schedule's `data` says.
    index.html   a page that loads the model, runs it on seeded inputs and shows the
                 outputs, timings, a per-kernel profile and every kernel's source.

The graph goes through the same compile as a Session's (runtime/driver.py optimize:
prune, the pass pipeline) and codegen's lower() with WebGL2's limits and the "webgl"
tuning profile (codegen/tuning; `tuning=` to choose another); the schedule is
then what GLPlan would build (runtime/gl_plan.py), as data: the memory plan's textures
(runtime/memory_plan.py), views resolved to the texture they share, multi-target and
array-texture kernels, and the texture swaps of the assigns. docs/WEBGL.md describes
the format and the runtime's API.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from ...codegen.limits import Limits
from ...codegen.lower import lower
from ...codegen.tuning import Tuning, TuningError
from ...frontend.tensor import Tensor
from ...ir.errors import FragflowError
from ...ir.graph import Value
from ...ir.ops.state import RUN_COUNTER
from ...ir.types import TensorType
from ...runtime.driver import optimize
from ...runtime.memory_plan import plan_memory

FORMAT = "fragflow.webgl"
VERSION = 1
MODEL_MARK = "/*@fragflow-model@*/null"      # runtime.js: where the schedule goes
PAGE_MARK = "@fragflow-title@"               # page.html: the model's name
# WebGL2's guaranteed minima (the WebGL 2.0 spec's table of ES 3.0 limits): an export
# that keeps to them runs on every WebGL2 device
WEBGL2_TEXTURE_UNITS = 16
WEBGL2_DRAW_BUFFERS = 4
RUNTIME_FILE = "runtime.js"
PAGE_FILE = "page.html"


class WebGLExportError(FragflowError, ValueError):
    """A graph that cannot be exported for WebGL as asked."""


class UnknownShapeError(WebGLExportError):
    """A feed whose shape is not fully known: WebGL exports have fixed shapes."""


@dataclass
class Export:
    """What ff.webgl.export wrote."""
    directory: str
    files: dict                  # "model.js" / "model.bin" / "index.html" -> path
    schedule: dict               # the JSON the runtime reads
    kernels: list                # the Kernels, in run order
    bin_bytes: int
    runtime_bytes: int           # model.js without the schedule: the runtime alone
    notes: list = field(default_factory=list)

    def __repr__(self):
        return (f"Export({self.directory!r}, {len(self.kernels)} kernels, "
                f"model.bin {self.bin_bytes} bytes)")


def export(fetches, feeds, directory, session=None, *, max_draw_buffers: int = 4,
           name: str | None = None, page: bool = True, tuning: Tuning | None = None) -> Export:
    """Write fetches, computed from the placeholders `feeds`, as a WebGL2 model into
    directory: model.js, model.bin and index.html (docs/WEBGL.md).

    fetches: a tensor, or a list/tuple/dict of tensors (dict keys name the outputs;
    else their tensor names); an optimizer's step among them trains in the browser,
    the variables staying on the GPU. feeds: the placeholders in the order of
    `model.inputs` (a list), or {placeholder: array or shape} to fix a shape the
    placeholder leaves unknown. Every feed's shape must be known: an export has fixed
    shapes (UnknownShapeError names the feed otherwise). session: a Session of the
    graph whose variables' values go into model.bin (else their initial values).
    max_draw_buffers: the render targets one kernel may write (4: WebGL2's minimum, safe
    everywhere; 8 where the devices are known to have them). tuning: the knobs kernel
    choice follows (ff.Tuning; None: Tuning.named("webgl"), which the device running the
    page cannot change later).

    >>> ff.webgl.export(logits, [x], "web/", session=sess)   # doctest: +SKIP
    """
    fetch_values, labels = _fetch_values(fetches)
    graph = fetch_values[0].graph
    feed_values, feed_types = _feed_types(feeds, graph)
    if max_draw_buffers not in (4, 8):
        raise WebGLExportError(f"max_draw_buffers={max_draw_buffers!r}: use 4 (WebGL2's "
                               f"minimum, safe everywhere) or 8")
    if tuning is not None and not isinstance(tuning, Tuning):
        raise TuningError(f"webgl.export(tuning=...) takes an ff.Tuning, not "
                          f"{type(tuning).__name__}")
    optimized = _optimize(graph, fetch_values, feed_types, max_draw_buffers)
    lowered = lower_for_webgl(optimized.graph, max_draw_buffers, tuning)
    values = _variable_values(graph, lowered, session)
    inputs = [(v.node.name, optimized.feed_names[v], v) for v in feed_values
              if v in optimized.feed_names]
    schedule, blob = build_schedule(lowered, inputs, list(zip(labels, fetch_values)),
                                    values, name or graph.name)
    return write_export(schedule, blob, directory, lowered.kernels, page=page)


# -- feeds, fetches and variables -------------------------------------------------------
def _as_value(x) -> Value:
    value = x.value if isinstance(x, Tensor) else x
    if not isinstance(value, Value):
        raise WebGLExportError(f"{x!r} is not a tensor")
    return value


def _fetch_values(fetches) -> tuple:
    if isinstance(fetches, dict):
        items = [(str(k), _as_value(v)) for k, v in fetches.items()]
    elif isinstance(fetches, (list, tuple)):
        items = [(None, _as_value(v)) for v in fetches]
    else:
        items = [(None, _as_value(fetches))]
    if not items:
        raise WebGLExportError("nothing to export: no fetches")
    graph = items[0][1].graph
    if any(v.graph is not graph for _, v in items):
        raise WebGLExportError("the fetches belong to different graphs")
    labels = [label if label is not None else v.name for label, v in items]
    if len(set(labels)) != len(labels):
        raise WebGLExportError(f"two outputs share a name: {labels}; pass a dict")
    return [v for _, v in items], labels


def _feed_types(feeds, graph) -> tuple:
    """The feeds' Values in order and {Value: concrete TensorType}."""
    items = list(feeds.items()) if isinstance(feeds, dict) else \
        [(f, None) for f in ([feeds] if isinstance(feeds, (Tensor, Value)) else feeds)]
    values, types = [], {}
    for key, given in items:
        value = _as_value(key)
        if value.graph is not graph:
            raise WebGLExportError(f"feed '{value.name}' is a tensor of another graph")
        if value.node.op != "placeholder":
            raise WebGLExportError(f"feed '{value.name}' is a {value.node.op}, not a "
                                   f"placeholder")
        shape = value.shape if given is None else \
            tuple(np.shape(given)) if isinstance(given, np.ndarray) else tuple(given)
        declared = value.shape
        if len(shape) != len(declared) or any(d is not None and d != s
                                              for d, s in zip(declared, shape)):
            raise WebGLExportError(f"feed '{value.node.name}': shape {shape} does not fit "
                                   f"its declared shape {value.type}")
        if any(d is None for d in shape):
            example = "(" + ", ".join(str(d or 1) for d in shape) + \
                ("," if len(shape) == 1 else "") + ")"
            raise UnknownShapeError(
                f"feed '{value.node.name}' has shape {value.type}"
                + (f" ({value.node.source})" if value.node.source else "")
                + f": a WebGL export has fixed shapes; give it one, e.g. "
                  f"feeds={{{value.node.name}: {example}}} (fragflow export: "
                  f"--feed-shape {value.node.name}=" + ",".join(str(d or 1) for d in shape)
                + ")")
        values.append(value)
        types[value] = TensorType(tuple(int(d) for d in shape), value.dtype)
    return values, types


def _variable_values(graph, lowered, session) -> dict:
    """{variable name: array} for each variable the lowered graph reads or assigns:
    the session's current values, else the initial ones."""
    names = set(lowered.variables.values()) | {var for var, _ in lowered.assigns}
    out = {}
    for var in sorted(names):
        node = graph.node(var)
        if session is not None:
            if session.graph is not graph:
                raise WebGLExportError("the session runs another graph than the fetches'")
            out[var] = np.asarray(session.get(node.outputs[0]))
        else:
            out[var] = np.asarray(node.attrs["initial_value"])
    return out


# -- lowering with WebGL2's limits ------------------------------------------------------
def _optimize(graph, fetch_values, feed_types, max_draw_buffers: int):
    """The driver's prune and pass pipeline with WebGL2's texture units and the
    export's render targets (fuse_updates writes one target per result)."""
    return optimize(graph, fetch_values, feed_types, max_texture_units=WEBGL2_TEXTURE_UNITS,
                    max_draw_buffers=max_draw_buffers)


def lower_for_webgl(compiled_graph, max_draw_buffers: int = WEBGL2_DRAW_BUFFERS,
                    tuning: Tuning | None = None):
    """codegen's lower() with Limits.webgl2 (codegen/limits.py): GLSL ES 3.00, layouts
    within 4096 texels a side, 16 texture units, at most max_draw_buffers render
    targets a kernel; with `tuning` (None: the "webgl" profile)."""
    return lower(compiled_graph, Limits.webgl2(max_draw_buffers=max_draw_buffers),
                 tuning=Tuning.named("webgl") if tuning is None else tuning)


def es_source(source: str) -> str:
    """A kernel's source, checked to be GLSL ES 3.00 (what the browser compiles)."""
    first = source.partition("\n")[0].strip()
    if first != "#version 300 es":
        raise WebGLExportError(f"a kernel's source starts with {first!r}, not "
                               f"'#version 300 es': lowered for another dialect")
    return source


# -- the schedule -----------------------------------------------------------------------
def _texture_format(layout) -> str:
    return "i" if layout.is_int else "f"


def _as_stored(array: np.ndarray, layout) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.int32 if layout.is_int else np.float32
                                ).reshape(-1)


def build_schedule(lowered, inputs, outputs, variable_values: dict, name: str) -> tuple:
    """(schedule dict, model.bin bytes) of a LoweredGraph.

    inputs: (user name, name in the compiled graph, user Value) per feed, in feed order;
    outputs: (label, user Value) per fetch; variable_values: {variable name: array}."""
    layouts = lowered.layouts
    memory = plan_memory(lowered)
    blob = bytearray()
    slots: list = []              # what the runtime makes a texture for
    slot_of: dict = {}            # value name (a root) -> slot index

    def add_slot(kind, layout, layers=0, **extra):
        slots.append(dict(kind=kind, width=layout.width, height=layout.height,
                          format="f" if layers else _texture_format(layout),
                          layers=layers, **extra))
        return len(slots) - 1

    def store(array, layout):
        flat = _as_stored(array, layout)
        blob.extend(b"\0" * (-len(blob) % 16))
        offset = len(blob)
        blob.extend(flat.astype("<" + flat.dtype.str[1:]).tobytes())
        return [offset, int(flat.size)]

    counter = -1
    for value in lowered.feeds:
        kind = "counter" if value == RUN_COUNTER else "feed"
        slot_of[value] = add_slot(kind, layouts[value])
        if kind == "counter":
            counter = slot_of[value]
    for value, array in lowered.constants.items():
        array = np.asarray(array)
        slot_of[value] = add_slot("constant", layouts[value],
                                  data=store(array, layouts[value]))
    variable_slot: dict = {}          # variable name -> slot
    variables = []

    def variable(var, layout):
        if var not in variable_slot:
            array = np.asarray(variable_values[var])
            if array.shape != tuple(layout.shape):
                raise WebGLExportError(f"variable '{var}' holds shape {array.shape}, the "
                                       f"graph reads it as {tuple(layout.shape)}")
            variable_slot[var] = add_slot("variable", layout, data=store(array, layout))
            variables.append({"name": var, "shape": list(layout.shape),
                              "dtype": layout.dtype, "slot": variable_slot[var]})
        return variable_slot[var]

    for value, var in lowered.variables.items():
        slot_of[value] = variable(var, layouts[value])
    scratch = []
    for key in memory.textures:             # the memory plan's shared textures
        width, height, fmt = key
        slots.append(dict(kind="scratch", width=width, height=height,
                          format="i" if fmt == "rgba32i" else "f", layers=0))
        scratch.append(len(slots) - 1)
    for value, index in memory.texture_of.items():
        slot_of[value] = scratch[index]
    kernels = []
    program_of: dict = {}                   # compiled source -> the first kernel's index
    for step in lowered.steps:
        if step[0] != "kernel":
            continue
        kernel = step[1]
        out_layout = layouts[kernel.output.value]
        if kernel.output_layers:
            slot_of[kernel.output.value] = add_slot("layers", out_layout,
                                                    layers=kernel.output_layers)
        index = len(kernels)
        program = program_of.setdefault(kernel.compiled_source, index)
        kernels.append({
            "name": kernel.name, "op": kernel.op, "scope": kernel.scope,
            "program": program,
            "source": es_source(kernel.source),
            "samplers": [b.sampler for b in kernel.inputs],
            "inputs": [slot_of[memory.root(b.value)] for b in kernel.inputs],
            "outputs": [slot_of[b.value] for b in kernel.outputs],
            "layers": kernel.output_layers,
            "width": out_layout.width, "height": out_layout.height,
            "uniforms": [[uname, glsl_type, value]
                         for uname, (glsl_type, value) in kernel.uniforms.items()],
        })
    for alias, root in memory.roots.items():
        slot_of[alias] = slot_of[root]

    def described(label, value_name):
        layout = layouts[value_name]
        return {"name": label, "shape": list(layout.shape),
                "dtype": layout.dtype, "size": layout.size,
                "slot": slot_of[memory.root(value_name)]}

    schedule = {
        "format": FORMAT, "version": VERSION, "name": name,
        "inputs": [described(user, inner) for user, inner, _ in inputs],
        "outputs": [described(label, inner)
                    for (label, _), inner in zip(outputs, lowered.outputs)],
        "variables": variables,
        "counter": counter,
        "slots": slots,
        "kernels": kernels,
        "assigns": [[variable(var, layouts[value]), slot_of[memory.root(value)]]
                    for var, value in lowered.assigns],
        "drawBuffers": max([len(k["outputs"]) or 1 for k in kernels] +
                           [k["layers"] for k in kernels] + [1]),
        "binBytes": len(blob),
    }
    fed = {inner for _, inner, _ in inputs}
    missing = [v for v in lowered.feeds if v != RUN_COUNTER and v not in fed]
    if missing:
        raise WebGLExportError(f"the fetches need placeholders that are not among the "
                               f"feeds: {', '.join(missing)}")
    return schedule, bytes(blob)


# -- files ------------------------------------------------------------------------------
def runtime_text() -> str:
    """tools/webgl/runtime.js, the runtime every model.js is made of."""
    return resources.files(__package__).joinpath(RUNTIME_FILE).read_text(encoding="utf-8")


def page_text() -> str:
    return resources.files(__package__).joinpath(PAGE_FILE).read_text(encoding="utf-8")


def model_literal(schedule: dict) -> str:
    """The schedule as a JavaScript literal: JSON, plus NaN and Infinity for uniforms
    that hold them; ASCII only (U+2028 cannot end a line of it)."""
    return json.dumps(schedule, ensure_ascii=True, allow_nan=True, separators=(",", ":"))


def write_export(schedule: dict, blob: bytes, directory, kernels, page: bool = True):
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    runtime = runtime_text()
    if runtime.count(MODEL_MARK) != 1:
        raise WebGLExportError(f"{RUNTIME_FILE} must hold {MODEL_MARK} once")
    files = {"model.js": os.path.join(directory, "model.js"),
             "model.bin": os.path.join(directory, "model.bin")}
    with open(files["model.js"], "w", encoding="utf-8") as f:
        f.write(runtime.replace(MODEL_MARK, model_literal(schedule)))
    with open(files["model.bin"], "wb") as f:
        f.write(blob)
    if page:
        files["index.html"] = os.path.join(directory, "index.html")
        title = "".join(c for c in schedule["name"] if c.isalnum() or c in " _-./")[:80]
        with open(files["index.html"], "w", encoding="utf-8") as f:
            f.write(page_text().replace(PAGE_MARK, title or "model"))
    return Export(directory, files, schedule, list(kernels), len(blob),
                  len(runtime.replace(MODEL_MARK, "null").encode()))
