"""ff.webgl.export: a compiled graph as a standalone WebGL2 model, three files:

    model.js     tools/webgl/runtime.js (the runtime, written by hand) with the model's
                 schedule put in place of its MODEL placeholder: one JSON literal holding
                 the kernels (their GLSL ES 3.00 sources, headers kept), the textures,
                 which texture each kernel reads and writes, uniforms, feeds, fetches
                 and assigns. No imports, no eval: `export async function load(options)`.
    model.bin    constants and variables' values, little-endian, each 16-byte aligned
                 (float32; int32 and bool as int32), where the schedule's `data` says;
                 a constant equal to the decoding of one of the graph's
                 weight_encodings (an imported model's weights as they came: float16,
                 uint8/uint16 with min and scale) is kept in that form, its slot's
                 `encoding` saying how the runtime expands it at load.
                 weights="float16" rounds a float32 model's weights to float16 and
                 stores them so (tools/webgl/half.py: the accuracy it costs is in
                 Export.weights_report); weights="float32" stores every weight as
                 float32. A float16 weight that no kernel writes is a half-float
                 texture (RGBA16F) on the GPU where the tuning's half_weight_textures
                 is on: the slot's `half`.
    index.html   a page that loads the model, runs it on seeded inputs and shows the
                 outputs, timings, a per-kernel profile and every kernel's source.

The graph goes through the same compile as a Session's (runtime/driver.py optimize:
prune, the pass pipeline) and codegen's lower() with WebGL2's limits and the "webgl"
tuning profile (codegen/tuning; `tuning=` to choose another); the schedule is
then what GLPlan would build (runtime/gl_plan.py), as data: the memory plan's textures
(runtime/memory_plan.py), views resolved to the texture they share, multi-target and
array-texture kernels, and the texture swaps of the assigns. A graph with while_loop,
cond or scan is cut in stages between them, and each control node's sub-graphs are
optimized and lowered the same way into programs of their own, nested in the
schedule's `program` (version 2; _Builder.program). docs/WEBGL.md describes the
format and the runtime's API.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from importlib import resources

import numpy as np

from ...codegen import conv as _conv
from ...codegen.layout import layout_for
from ...codegen.limits import Limits
from ...codegen.lower import lower
from ...codegen.tuning import Tuning, TuningError
from ...frontend import side_effects as _effects
from ...frontend.tensor import Tensor
from ...ir.errors import FragflowError
from ...ir.graph import Graph, Value
from ...ir.ops import control as _control, shape as _shape
from ...ir.ops.elementwise import builders as _builders
from ...ir.ops.state import RUN_COUNTER, placeholder
from ...ir.types import TensorType
from ...runtime.control_flow import stage_fetches, stage_graph
from ...runtime.driver import optimize
from ...runtime.memory_plan import hoisted_values, plan_memory
from . import half as _half

has_control_flow = _control.has_control_flow

FORMAT = "fragflow.webgl"
VERSION = 1
CONTROL_VERSION = 2              # a schedule with a `program` (control flow)
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


class HalfWeightsError(WebGLExportError):
    """weights="float16" of a weight with values float16 cannot hold (|x| >= 65520)."""


WEIGHTS = (None, "float32", "float16")   # export(weights=...)


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
    # weights="float16": what rounding did and the outputs' difference from float32
    weights_report: _half.HalfWeightsReport | None = None

    def __repr__(self):
        return (f"Export({self.directory!r}, {len(self.kernels)} kernels, "
                f"model.bin {self.bin_bytes} bytes)")


def export(fetches, feeds, directory, session=None, *, max_draw_buffers=(4, 8),
           name: str | None = None, page: bool = True, tuning: Tuning | None = None,
           weights: str | None = None, dynamic_length=None) -> Export:
    """Write fetches, computed from the placeholders `feeds`, as a WebGL2 model into
    directory: model.js, model.bin and index.html (docs/WEBGL.md).

    fetches: a tensor, or a list/tuple/dict of tensors (dict keys name the outputs;
    else their tensor names); an optimizer's step among them trains in the browser,
    the variables staying on the GPU. feeds: the placeholders in the order of
    `model.inputs` (a list), or {placeholder: array or shape} to fix a shape the
    placeholder leaves unknown. Every feed's shape must be known: an export has fixed
    shapes (UnknownShapeError names the feed otherwise). session: a Session of the
    graph whose variables' values go into model.bin (else their initial values).
    max_draw_buffers: the render targets one kernel may write: (4, 8), the default: the
    schedule for WebGL2's minimum of 4 and, as a patch of it, the kernels that change
    with 8, which the runtime switches to after the first run where the context offers
    8 (docs/WEBGL.md "Render targets: a variant for 8"); 4 or 8: that schedule alone.
    tuning: the knobs kernel
    choice follows (ff.Tuning; None: Tuning.named("webgl"), which the device running the
    page cannot change later). weights: how model.bin stores float weights: None
    (as they came: an imported model's float16 or quantized weights stay so), "float32",
    or "float16" (every float constant and variable rounded to float16: half the
    download; Export.weights_report and .notes give the outputs' max |difference| from
    float32 on seeded inputs; a value beyond float16's range is a HalfWeightsError).
    dynamic_length: a text model's attention mask among the
    feeds, shape (..., max_length), 1 at a token and 0 at padding: the model then takes
    `length` (int32, shape (...,): the tokens in each sequence) in its place and makes
    the mask from it, so one export at the maximum length serves every shorter input
    (padded to it; read the outputs' first `length` positions). docs/TRANSFORMERS.md.

    >>> ff.webgl.export(logits, [x], "web/", session=sess)   # doctest: +SKIP
    """
    fetch_values, labels = _fetch_values(fetches)
    graph = fetch_values[0].graph
    feed_values, feed_types = _feed_types(feeds, graph)
    runs_with = _assigns_run_with(graph, fetch_values)
    if weights not in WEIGHTS:
        raise WebGLExportError(f"weights={weights!r}: use None (as the model stores "
                               f"them), 'float32' or 'float16'")
    encodings = getattr(graph, "weight_encodings", ()) if weights is None else \
        [{"dtype": "float16"}] if weights == "float16" else []
    values = _Variables(graph, session, encodings)
    if dynamic_length is not None:
        graph, feed_values, feed_types, kept = _length_feed(
            graph, _as_value(dynamic_length), feed_values, feed_types,
            fetch_values + runs_with)
        fetch_values, runs_with = kept[:len(fetch_values)], kept[len(fetch_values):]
    variant = isinstance(max_draw_buffers, (tuple, list)) and \
        tuple(max_draw_buffers) == VARIANT_DRAW_BUFFERS
    if max_draw_buffers not in (4, 8) and not variant:
        raise WebGLExportError(f"max_draw_buffers={max_draw_buffers!r}: use 4 (WebGL2's "
                               f"minimum, safe everywhere), 8, or (4, 8) (4, and a variant "
                               f"for 8 taken where the context has them)")
    if tuning is not None and not isinstance(tuning, Tuning):
        raise TuningError(f"webgl.export(tuning=...) takes an ff.Tuning, not "
                          f"{type(tuning).__name__}")
    buffers = WEBGL2_DRAW_BUFFERS if variant else max_draw_buffers
    optimized = _optimize(graph, fetch_values + runs_with, feed_types, buffers, tuning)
    report = None
    if weights == "float16":
        optimized, values, report = _rounded(optimized, values, labels)
    inputs = [(v.node.name, optimized.feed_names[v], v) for v in feed_values
              if v in optimized.feed_names]
    outputs = list(zip(labels, fetch_values))
    if has_control_flow(optimized.graph):
        schedule, blob, kernels = build_control_schedule(
            optimized.graph, inputs, outputs, values, name or graph.name, buffers, tuning)
    else:
        lowered = lower_for_webgl(optimized.graph, buffers, tuning)
        schedule, blob, kernels = build_schedule(lowered, inputs, outputs, values,
                                                 name or graph.name, tuning)
        if variant:
            wider = lower_for_webgl(optimized.graph, VARIANT_DRAW_BUFFERS[1], tuning)
            other, other_blob, _ = build_schedule(wider, inputs, outputs, values,
                                                  name or graph.name, tuning)
            variant = schedule_variant(schedule, other) if other_blob == blob else None
            if variant is not None:
                schedule["variants"] = [variant]
    done = write_export(schedule, blob, directory, kernels, page=page)
    if report is not None:
        done.weights_report = report
        done.notes.extend(report.lines())
    return done


def _rounded(optimized, values, labels) -> tuple:
    """weights="float16": (the compiled graph with its constants rounded, variables
    whose values are rounded, the HalfWeightsReport with the outputs' accuracy)."""
    report = _half.HalfWeightsReport()
    graph = optimized.graph
    names = [n.name for n in graph.nodes if n.op == "variable"]
    full = {name: np.asarray(values[name]) for name in names}
    rounded = {name: _half.round_half(a, f"variable '{name}'", report, HalfWeightsError)
               if a.dtype.kind == "f" else a for name, a in full.items()}
    half_graph = _half.rounded_graph(graph, report, HalfWeightsError)
    _half.measure(graph, half_graph, full, rounded, labels, report)
    values = _Variables(values.graph, None, values.encodings, rounded)
    return replace(optimized, graph=half_graph), values, report


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


def _assigns_run_with(graph, fetch_values) -> list:
    """The assigns a Session.run of the fetches also applies (tf.control_dependencies,
    the variables a loop or branch assigns: frontend/control_effects.py); they apply at
    the end of the model's run as at the end of Session.run. Prints do not export."""
    expanded, _ = _effects.expand(graph, list(fetch_values))
    return [v for v in expanded[len(fetch_values):] if v.node.op == "assign"]


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


LENGTH_FEED = "length"       # dynamic_length: the feed that takes the mask's place


def _length_feed(graph, mask, feed_values, feed_types, values) -> tuple:
    """dynamic_length: (a copy of graph whose feed `mask`, shape (..., max_length), is
    computed from a new int32 feed LENGTH_FEED of shape (...,): mask[..., j] = j <
    length[...], in the mask's dtype; the feeds in order with `length` in the mask's
    place; their types; `values` in the copy). Copies keep names, so variables are
    found by name as in the graph."""
    if mask not in feed_values:
        raise WebGLExportError(f"dynamic_length: '{mask.name}' is not among the feeds; "
                               f"give the attention mask placeholder")
    shape = feed_types[mask].shape
    if not shape:
        raise WebGLExportError(f"dynamic_length: '{mask.name}' is a scalar, not a mask "
                               f"(..., max_length)")
    if mask.dtype not in ("float32", "int32", "bool"):
        raise WebGLExportError(f"dynamic_length: '{mask.name}' is {mask.dtype}")
    if any(n.name == LENGTH_FEED or n.name.startswith(LENGTH_FEED + "/")
           for n in graph.nodes):
        raise WebGLExportError(f"dynamic_length: the graph already has a node named "
                               f"'{LENGTH_FEED}' or in its scope, the name of the feed "
                               f"it adds and of the nodes making the mask")
    new = Graph(graph.name)
    new.custom_gradients = graph.custom_gradients
    new.weight_encodings = getattr(graph, "weight_encodings", ())
    mapping: dict = {}
    for node in graph.nodes:
        if node is mask.node:
            length = new.add_node("placeholder", [], {"shape": shape[:-1], "dtype": "int32"},
                                  exact_name=LENGTH_FEED).outputs[0]
            scope = LENGTH_FEED + "/"         # names no copied node has (checked above)
            positions = _builders.range_(new, 0, shape[-1], 1, dtype="int32",
                                         name=scope + "positions")
            inside = _builders.binary("less", positions, _shape.expand_dims(
                length, -1, name=scope + "lengths"), name=scope + "mask")
            mapping[mask] = inside if mask.dtype == "bool" else \
                _builders.cast(inside, mask.dtype, name=scope + "cast")
            continue
        copy = new.add_copy(node, [mapping[v] for v in node.inputs])
        mapping.update(zip(node.outputs, copy.outputs))
    feeds = [length if v is mask else mapping[v] for v in feed_values]
    types = {f: TensorType(shape[:-1], "int32") if v is mask else feed_types[v]
             for f, v in zip(feeds, feed_values)}
    return new, feeds, types, [mapping[v] for v in values]


# -- lowering with WebGL2's limits ------------------------------------------------------
def _optimize(graph, fetch_values, feed_types, max_draw_buffers: int = WEBGL2_DRAW_BUFFERS,
              tuning: Tuning | None = None):
    """The driver's prune and pass pipeline with WebGL2's texture units, the export's
    render targets (fuse_updates writes one target per result) and its tuning (None:
    the "webgl" profile)."""
    return optimize(graph, fetch_values, feed_types, max_texture_units=WEBGL2_TEXTURE_UNITS,
                    max_draw_buffers=max_draw_buffers,
                    tuning=Tuning.named("webgl") if tuning is None else tuning)


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


def header_of(kernel) -> str:
    """A kernel's header: the lines between its source's version line and its body
    (Kernel.body), HEADER_END included. The runtime puts it back after the first line
    of the kernel's program to show the kernel's whole source (model.kernels,
    index.html); nothing compiles it."""
    first, _, rest = kernel.source.partition("\n")
    return rest[:len(rest) - (len(kernel.body) - len(first) - 1)]


def kernel_source(schedule: dict, record: dict) -> str:
    """A schedule's kernel record's whole source, header and all, as the runtime shows
    it (runtime.js withHeader): its program with its header after the version line."""
    program = schedule["programs"][record["program"]]
    first, _, rest = program.partition("\n")
    return f"{first}\n{record['header']}{rest}"


# -- the schedule -----------------------------------------------------------------------
def _texture_format(layout) -> str:
    return "i" if layout.is_int else "f"


def _as_stored(array: np.ndarray, layout) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.int32 if layout.is_int else np.float32
                                ).reshape(-1)


class _Variables:
    """{variable name: array} on demand: the session's current values, else the
    initial ones."""

    def __init__(self, graph, session, encodings=(), given=None):
        if session is not None and session.graph is not graph:
            raise WebGLExportError("the session runs another graph than the fetches'")
        self.graph, self.session = graph, session
        self.encodings = list(encodings)
        self.given = dict(given or {})       # values set by the export (rounded ones)

    def __getitem__(self, var):
        if var in self.given:
            return self.given[var]
        node = self.graph.node(var)
        if self.session is not None:
            return np.asarray(self.session.get(node.outputs[0]))
        return np.asarray(node.attrs["initial_value"])


class _Builder:
    """The schedule's parts as they are made: slots (each with its layout), model.bin,
    kernels (one list for the whole model: programs are shared by source), variables,
    assigns. stage() adds a LoweredGraph's kernels; program() a compiled graph's,
    with its control-flow nodes as nested steps (docs/WEBGL.md, "Control flow")."""

    def __init__(self, variable_values, max_draw_buffers: int = WEBGL2_DRAW_BUFFERS,
                 tuning: Tuning | None = None):
        self.variable_values = variable_values
        self.max_draw_buffers, self.tuning = max_draw_buffers, tuning
        self.max_texture_size = Limits.webgl2(max_draw_buffers=max_draw_buffers) \
            .max_texture_size
        self.blob = bytearray()
        self.slots: list = []            # what the runtime makes a texture for
        self.layouts: list = []          # slot -> the layout of the value it holds
        self.kernels: list = []          # the schedule's kernel records
        self.kernel_objects: list = []   # the Kernels, in the same order
        self.programs: list = []         # each distinct kernel body (GLSL) once
        self.program_of: dict = {}       # compiled source -> its index in programs
        self.variable_slot: dict = {}    # variable name -> slot
        self.variables: list = []
        self.assigns: list = []
        self.counter = -1
        # layered slot -> (the layout of the fetched value it holds, its Blocking): an
        # output left in render targets (LoweredGraph.fetched_blocks), read back in order
        self.blocks_read: dict = {}

    def add_slot(self, kind, layout, layers=0, **extra) -> int:
        self.slots.append(dict(kind=kind, width=layout.width, height=layout.height,
                               format="f" if layers else _texture_format(layout),
                               layers=layers, **extra))
        self.layouts.append(layout)
        return len(self.slots) - 1

    def own(self, kind: str, type_: TensorType) -> int:
        """A slot of the value of this type (a loop variable's, a scan's stacked ys..)."""
        return self.add_slot(kind, layout_for(type_, self.max_texture_size))

    def store(self, array, layout) -> list:
        flat = _as_stored(array, layout)
        self.blob.extend(b"\0" * (-len(self.blob) % 16))
        offset = len(self.blob)
        self.blob.extend(flat.astype("<" + flat.dtype.str[1:]).tobytes())
        return [offset, int(flat.size)]

    def store_constant(self, array, layout) -> dict:
        """A constant's or variable's slot fields: `data`, `encoding` where it keeps a
        form of the graph's weight_encodings (encode), and `zeros` where whole texels
        of it are zeros in a period (zero_period: stored without them)."""
        encodings = getattr(self.variable_values, "encodings", ())
        flat = _as_stored(np.asarray(array), layout)
        zeros = None if layout.is_int else zero_period(flat)
        extra = {}
        if zeros is not None:
            period, kept = zeros
            flat = flat.reshape(-1, period, 4)[:, :kept].reshape(-1)
            extra["zeros"] = [period, kept]
        if encodings and not layout.is_int:
            data, encoding = encode(flat, encodings)
            if encoding is not None:
                self.blob.extend(b"\0" * (-len(self.blob) % 16))
                offset = len(self.blob)
                self.blob.extend(data)
                return {"data": [offset, int(flat.size)], "encoding": encoding, **extra}
        return {"data": self.store(flat, layout), **extra}

    def add_program(self, kernel) -> int:
        """The index in `programs` of the kernel's body, added the first time: kernels
        equal but for their operands (repeated layers) share one, compiled once."""
        key = kernel.compiled_source
        if key not in self.program_of:
            self.program_of[key] = len(self.programs)
            self.programs.append(es_source(kernel.body))
        return self.program_of[key]

    def variable(self, var, layout) -> int:
        if var not in self.variable_slot:
            array = np.asarray(self.variable_values[var])
            if array.shape != tuple(layout.shape):
                raise WebGLExportError(f"variable '{var}' holds shape {array.shape}, the "
                                       f"graph reads it as {tuple(layout.shape)}")
            self.variable_slot[var] = self.add_slot("variable", layout,
                                                    **self.store_constant(array, layout))
            self.variables.append({"name": var, "shape": list(layout.shape),
                                   "dtype": layout.dtype, "slot": self.variable_slot[var]})
        return self.variable_slot[var]

    def feed_slots(self, lowered) -> dict:
        """A slot per feed of a LoweredGraph (the run counter's is the counter)."""
        bound = {}
        for value in lowered.feeds:
            if value == RUN_COUNTER:
                self.counter = self.add_slot("counter", lowered.layouts[value])
            else:
                bound[value] = self.add_slot("feed", lowered.layouts[value])
        return bound

    def stage(self, lowered, bound: dict) -> tuple:
        """(steps, output slots, output constants) of a LoweredGraph whose feeds live in
        the slots `bound` ({feed name: slot}): its constants, variables, the memory
        plan's textures and its kernels added. An output constant is its value (a
        loop's condition known at export), else None."""
        lowered = fold_filter_panels(lowered)
        layouts = lowered.layouts
        # kernels of constants and unassigned variables only run once (schedule() drops
        # the mark where another stage assigns such a variable)
        hoisted = hoisted_values(lowered)
        memory = plan_memory(lowered, hoisted)
        slot_of: dict = {}
        missing = []
        for value in lowered.feeds:
            if value == RUN_COUNTER:
                if self.counter < 0:
                    self.counter = self.add_slot("counter", layouts[value])
                slot_of[value] = self.counter
            elif value in bound:
                slot_of[value] = bound[value]
            else:
                missing.append(value)
        if missing:
            raise WebGLExportError(f"the fetches need placeholders that are not among "
                                   f"the feeds: {', '.join(missing)}")
        for value, array in lowered.constants.items():
            slot_of[value] = self.add_slot("constant", layouts[value],
                                           **self.store_constant(array, layouts[value]))
        for value, var in lowered.variables.items():
            slot_of[value] = self.variable(var, layouts[value])
        scratch = []
        for key in memory.textures:             # the memory plan's shared textures
            width, height, fmt = key
            self.slots.append(dict(kind="scratch", width=width, height=height,
                                   format="i" if fmt == "rgba32i" else "f", layers=0))
            self.layouts.append(None)
            scratch.append(len(self.slots) - 1)
        for value, index in memory.texture_of.items():
            slot_of[value] = scratch[index]
            self.layouts[scratch[index]] = layouts[value]
        first = len(self.kernels)
        for step in lowered.steps:
            if step[0] != "kernel":
                continue
            kernel = step[1]
            out_layout = layouts[kernel.output.value]
            if kernel.output_layers:
                slot_of[kernel.output.value] = self.add_slot("layers", out_layout,
                                                             layers=kernel.output_layers)
            self.kernels.append({
                "name": kernel.name, "op": kernel.op, "scope": kernel.scope,
                "node": kernel.node_records[0].name, "program": self.add_program(kernel),
                "header": header_of(kernel),
                "samplers": [b.sampler for b in kernel.inputs],
                "inputs": [slot_of[memory.root(b.value)] for b in kernel.inputs],
                "outputs": [slot_of[b.value] for b in kernel.outputs],
                "layers": kernel.output_layers,
                "width": out_layout.width, "height": out_layout.height,
                "uniforms": [[uname, glsl_type, value]
                             for uname, (glsl_type, value) in kernel.uniforms.items()],
            })
            if kernel.output.value in hoisted:
                self.kernels[-1]["once"] = True
            self.kernel_objects.append(kernel)
        for alias, root in memory.roots.items():
            slot_of[alias] = slot_of[root]
        self.assigns.extend([self.variable(var, layouts[value]), slot_of[memory.root(value)]]
                            for var, value in lowered.assigns)
        in_blocks = lowered.fetched_blocks      # read back from its render targets
        outputs = [slot_of[memory.root(in_blocks.get(n, n))] for n in lowered.outputs]
        for n, slot in zip(lowered.outputs, outputs):
            if n in in_blocks:
                self.blocks_read[slot] = (layouts[n], layouts[in_blocks[n]].blocking)
        layered = [n for n, slot in zip(lowered.outputs, outputs)
                   if self.slots[slot]["layers"] and n not in in_blocks]
        if layered:         # codegen stitches its blocks: a value never ends in layers
            raise WebGLExportError(f"value '{layered[0]}' is left in an array texture, "
                                   f"which no later kernel, loop or readback can read")
        constants = [lowered.constants.get(memory.root(n)) for n in lowered.outputs]
        count = len(self.kernels) - first
        steps = [{"kind": "kernels", "first": first, "count": count}] if count else []
        return steps, outputs, constants

    def schedule(self, name, inputs, outputs, program=None) -> dict:
        """inputs: (label, slot) in feed order; outputs: (label, slot, the user's
        Value) in fetch order."""
        def described(label, slot, value=None):
            layout, blocking = self.blocks_read.get(slot, (self.layouts[slot], None))
            # a fetched view (a reshape of a kernel's result) shares its root's slot:
            # its own shape, the slot's elements in the same order
            shape = layout.shape
            own = getattr(getattr(value, "type", None), "shape", None)
            if own is not None and None not in own and tuple(own) != tuple(shape) and \
                    int(np.prod(own, dtype=np.int64)) == layout.size:
                shape = own
            record = {"name": label, "shape": list(shape), "dtype": layout.dtype,
                      "size": layout.size, "slot": slot}
            if blocking is not None:    # row p = r * slab + s, column texel h * colSlab
                # + c: texel s * colSlab + c of layer r * cols + h (blocks_texel px_)
                record["blocks"] = {"m": blocking.m, "n": blocking.n, "rows": blocking.rows,
                                    "cols": blocking.cols, "slab": blocking.slab,
                                    "colSlab": blocking.col_slab}
            return record
        kernels = self.kernels
        self._half_textures()
        self._once()
        schedule = {
            "format": FORMAT, "version": VERSION if program is None else CONTROL_VERSION,
            "name": name,
            "inputs": [described(label, slot) for label, slot in inputs],
            "outputs": [described(*output) for output in outputs],
            "variables": self.variables,
            "counter": self.counter,
            "slots": self.slots,
            "programs": self.programs,
            "kernels": kernels,
            "assigns": self.assigns,
            "drawBuffers": max([len(k["outputs"]) or 1 for k in kernels] +
                               [k["layers"] for k in kernels] + [1]),
            "binBytes": len(self.blob),
        }
        if program is not None:
            schedule["program"] = program
        return schedule

    def _half_textures(self) -> None:
        """Mark `half` the float16 slots no kernel, copy or assign writes (constants,
        variables never assigned) where the tuning's half_weight_textures is on: the
        runtime makes them RGBA16F textures, half the GPU memory of RGBA32F."""
        tuning = Tuning.named("webgl") if self.tuning is None else self.tuning
        assigned = {var for var, _ in self.assigns}
        for k, s in enumerate(self.slots):
            if (tuning.half_weight_textures and s.get("encoding") == ["float16"]
                    and k not in assigned and not s["layers"]):
                s["half"] = True
            else:
                s.pop("half", None)

    def _once(self) -> None:
        """Keep the `once` mark (the runtime draws the kernel at the first run only) of
        kernels whose inputs are constants, variables no assign of the export writes,
        or outputs of kernels that keep theirs; stage() marked them per stage."""
        assigned = {var for var, _ in self.assigns}
        fixed = {k for k, s in enumerate(self.slots)
                 if s["kind"] == "constant" or (s["kind"] == "variable" and k not in assigned)}
        for record in self.kernels:
            if record.get("once") and all(i in fixed for i in record["inputs"]):
                fixed.update(record["outputs"])
            else:
                record.pop("once", None)

    # -- control flow ------------------------------------------------------------------
    def program(self, graph, bound: dict) -> tuple:
        """(steps, output slots, output constants) of a compiled graph (after the
        passes) whose placeholders live in `bound` ({placeholder name: slot}): one stage
        without control flow; else stages between its control nodes (as
        runtime/control_flow.py runs them: every value computed once, handed on in its
        texture), each control node a step holding its sub-graphs' programs."""
        if not has_control_flow(graph):
            # a stage's values are handed on (loop variables, copies): none is left in
            # render targets, which only a readback reads (reduce.norm_rows_fetched)
            tuning = (self.tuning or Tuning.named("webgl")).with_(
                {"reduce.norm_rows_fetched": False})
            return self.stage(lower_for_webgl(graph, self.max_draw_buffers, tuning), bound)
        staged, controls, inputs_of, results = stage_graph(graph)
        fetches = stage_fetches(staged, controls, inputs_of, results)
        env = {n.outputs[0]: bound[n.name] for n in staged.nodes
               if n.op == "placeholder" and n.name in bound}
        steps: list = []
        outputs = constants = None
        for stage, wanted in enumerate(fetches):
            if wanted:
                types = {v: v.type for v in env}
                optimized = _optimize(staged, wanted, types, self.max_draw_buffers,
                                      self.tuning)
                names = {optimized.feed_names[v]: env[v] for v in env
                         if v in optimized.feed_names}
                more, outs, consts = self.program(optimized.graph, names)
                steps += more
                env.update(zip(wanted, outs))
                if stage == len(controls):
                    outputs, constants = outs, consts
            if stage < len(controls):
                node, outs = controls[stage]
                step, slots = self.control(node, [env[v] for v in inputs_of[stage]])
                steps.append(step)
                env.update(zip(outs, slots))
        return steps, outputs, constants

    def sub(self, name: str, graph, types: list, slots: list) -> dict:
        """A sub-graph's program, its parameters of these (static) types in these
        slots: {"steps", "outputs"} and its output constants."""
        g = Graph(name)
        params = [placeholder(g, t.shape, t.dtype, name=f"p{k}") for k, t in enumerate(types)]
        g.outputs = _control.inline(g, graph, params)
        optimized = _optimize(g, g.outputs, dict(zip(params, types)), self.max_draw_buffers,
                              self.tuning)
        bound = {optimized.feed_names[p]: s for p, s in zip(params, slots)
                 if p in optimized.feed_names}
        steps, outputs, constants = self.program(optimized.graph, bound)
        return {"steps": steps, "outputs": outputs}, constants

    def _copyable(self, node, slot: int) -> int:
        if self.slots[slot]["layers"]:
            raise WebGLExportError(f"{node.where()}: a value it carries or slices lives in "
                                   f"an array texture, which the runtime's copies cannot "
                                   f"read")
        return slot

    def _next(self, node, outputs: list, types: list, made: range) -> list:
        """Per loop variable: -1 where the body's result texture can swap places with
        the variable's (a scratch texture of the body's own, no other variable's), else
        a slot the result is copied into first (a loop variable returned as it is, a
        constant, a captured value, a cond's result)."""
        out, seen = [], set()
        for slot, t in zip(outputs, types):
            self._copyable(node, slot)
            if self.slots[slot]["kind"] == "scratch" and slot in made and slot not in seen:
                out.append(-1)
            else:
                out.append(self.own("loop", t))
            seen.add(slot)
        return out

    def control(self, node, slots: list) -> tuple:
        """(the step of a while_loop, cond or scan node reading `slots`, the slots of
        its outputs)."""
        types = [v.type for v in node.inputs]
        for v, t in zip(node.inputs, types):
            if not t.is_static:
                raise WebGLExportError(f"{node.where()}: its input '{v.name}' has shape "
                                       f"{t}, not a fixed one: an export has fixed shapes")
        label = node.name.replace("/", ".")
        attrs = node.attrs
        if node.op == "cond":
            _, tcaps, fcaps = _control._cond_split(slots, attrs)
            _, ttypes, ftypes = _control._cond_split(types, attrs)
            true, _ = self.sub(f"{label}.true", attrs["true_branch"], ttypes, tcaps)
            false, _ = self.sub(f"{label}.false", attrs["false_branch"], ftypes, fcaps)
            outs = [self.own("alias", v.type) for v in node.outputs]
            return {"kind": "cond", "name": node.name, "pred": slots[0], "true": true,
                    "false": false, "outputs": outs}, outs
        if node.op == "while_loop":
            n = attrs["num_vars"]
            var_types, ctypes, btypes = _control._while_split(types, attrs)
            _, ccaps, bcaps = _control._while_split(slots, attrs)
            var_types = _control.loop_types(var_types, attrs)
            for name, t in zip(_control._names(attrs, n), var_types):
                if not t.is_static:
                    raise WebGLExportError(
                        f"{node.where()}: {name} has the shape invariant {t}: its shape "
                        f"may change between iterations, which an export (fixed shapes, "
                        f"textures made once) cannot hold")
            init = [self._copyable(node, s) for s in slots[:n]]
            loop_vars = [self.own("loop", t) for t in var_types]
            cond, (known,) = self.sub(f"{label}.cond", attrs["cond"], var_types + ctypes,
                                      loop_vars + ccaps)
            before = len(self.slots)
            body, _ = self.sub(f"{label}.body", attrs["body"], var_types + btypes,
                               loop_vars + bcaps)
            limit = attrs["maximum_iterations"]
            if known is not None:           # the condition is a constant
                if bool(known) and limit is None:
                    raise WebGLExportError(f"{node.where()}: its condition is always true "
                                           f"and it has no maximum_iterations: it never "
                                           f"ends")
                limit = 0 if not bool(known) else limit
            step = {"kind": "while", "name": node.name, "init": init, "vars": loop_vars,
                    "next": self._next(node, body["outputs"], var_types,
                                       range(before, len(self.slots))),
                    "cond": None if known is not None else
                    {"steps": cond["steps"], "pred": cond["outputs"][0]},
                    "body": body, "maxIterations": None if limit is None else int(limit)}
            return step, loop_vars
        nc = attrs["num_carry"]
        carry_types, elem_types, cap_types = _control._scan_split(types, attrs)
        _, elems, caps = _control._scan_split(slots, attrs)
        length = _control.scan_length(elem_types, attrs)
        slice_types = [TensorType(t.shape[1:], t.dtype) for t in elem_types]
        init = [self._copyable(node, s) for s in slots[:nc]]
        carry = [self.own("loop", t) for t in carry_types]
        sliced = [self.own("loop", t) for t in slice_types]
        before = len(self.slots)
        body, _ = self.sub(f"{label}.body", attrs["body"],
                           carry_types + slice_types + cap_types, carry + sliced + caps)
        made = range(before, len(self.slots))
        ys = [[self.own("loop", v.type), _size(TensorType(v.shape[1:], v.dtype))]
              for v in node.outputs[nc:]]
        for slot in body["outputs"][nc:]:
            self._copyable(node, slot)
        step = {"kind": "scan", "name": node.name, "length": int(length),
                "reverse": bool(attrs["reverse"]), "init": init, "vars": carry,
                "next": self._next(node, body["outputs"][:nc], carry_types, made),
                "elems": [[self._copyable(node, e), s, _size(t)]
                          for e, s, t in zip(elems, sliced, slice_types)],
                "body": body, "ys": ys}
        return step, carry + [slot for slot, _ in ys]


def encode(array: np.ndarray, encodings) -> tuple:
    """(stored bytes, the slot's `encoding`) of a float constant: its values in one of
    `encodings`' forms (ir Graph.weight_encodings) where that form decodes back to
    them bit for bit -- float16 as IEEE half (TF.js's table decoder agrees on every
    pattern), uint8/uint16 as v * scale + min in float64 rounded once to float32, as
    TF.js dequantizes -- else (None, None): float32 as it is."""
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    if not flat.size:
        return None, None
    with np.errstate(all="ignore"):
        for form in encodings:
            kind = form.get("dtype")
            if kind == "float16":
                half = flat.astype("<f2")
                if np.array_equal(half.astype(np.float32).view(np.uint32), flat.view(np.uint32)):
                    return half.tobytes(), ["float16"]
            elif kind in ("uint8", "uint16") and form.get("size") == flat.size:
                low, scale = float(form["min"]), float(form["scale"])
                top = 255 if kind == "uint8" else 65535
                if not scale or not np.isfinite(flat).all():
                    continue
                v = np.rint((flat.astype(np.float64) - low) / scale)
                if v.min() < 0 or v.max() > top:
                    continue
                back = (v * scale + low).astype(np.float32)
                if np.array_equal(back.view(np.uint32), flat.view(np.uint32)):
                    return v.astype("u1" if kind == "uint8" else "<u2").tobytes(), \
                        [kind, low, scale]
    return None, None


# the longest period (texels) zero_period looks for
ZERO_PERIOD_MAX = 64


def zero_period(flat: np.ndarray) -> tuple | None:
    """(period, kept) where the float constant's texels, in groups of `period`, are all
    +0.0 past the first `kept` of each group, and that is at least a quarter of them:
    the zero rows passes/pad_channels.py gives a filter (C = 3 padded to 4: every 4th
    row of its panel, or 6 of each 24 texels of an HWIO filter of 24 output channels).
    model.bin stores the kept texels; the runtime puts the zeros back at load (slot
    field `zeros`). Else None. Only +0.0 counts (the bits, not the value: -0.0 stays)."""
    if flat.dtype != np.float32 or flat.size % 4 or flat.size < 16:
        return None
    zero = ~flat.view(np.uint32).reshape(-1, 4).any(axis=1)
    n = zero.size
    if 4 * int(zero.sum()) < n:
        return None
    for period in range(2, min(n, ZERO_PERIOD_MAX) + 1):
        if n % period:
            continue
        always = zero.reshape(-1, period).all(axis=0)
        kept = period
        while kept and always[kept - 1]:
            kept -= 1
        if 4 * (period - kept) >= period:
            return period, kept
    return None


def fold_filter_panels(lowered):
    """The LoweredGraph with each blocked conv2d's filter panel (codegen/conv.py
    _filter_panel: a kernel reading a constant filter, drawn once) made here: the
    panel is a permutation of the filter's texels (panel texel ct * K + k is the
    filter's row k, texel ct), so model.bin stores the panel in the filter's place (its
    float16 or uint8 encoding kept: encode() checks the values) and the runtime draws
    no pack kernel, holds no second copy and the export carries no record of it. Where
    another kernel, a fetch or an alias reads the filter too, the pack kernel stays."""
    kernels = lowered.kernels
    readers: dict = {}
    for k in kernels:
        for b in k.inputs:
            readers[b.value] = readers.get(b.value, 0) + 1
    aliased = {step[2] for step in lowered.steps if step[0] == "alias"}
    panels: dict = {}                   # filter value -> (panel value, panel array)
    for k in kernels:
        source = k.inputs[0].value if k.inputs else None
        if source not in lowered.constants or readers[source] != 1 or \
                source in aliased or source in lowered.outputs:
            continue
        panel = _conv.panel_of(k, lowered.constants[source])
        if panel is not None:
            panels[source] = (k.output.value, panel)
    if not panels:
        return lowered
    # each panel where its filter was: model.bin's order and alignment as before
    constants = dict(panels.get(name, (name, array)) for name, array in lowered.constants.items())
    dropped = {value for value, _ in panels.values()}
    steps = [s for s in lowered.steps if s[0] != "kernel" or s[1].output.value not in dropped]
    return replace(lowered, constants=constants, steps=steps)


def _size(t: TensorType) -> int:
    return int(np.prod(t.shape, dtype=np.int64))


def build_schedule(lowered, inputs, outputs, variable_values, name: str,
                   tuning: Tuning | None = None) -> tuple:
    """(schedule dict, model.bin bytes) of a LoweredGraph (a graph without control
    flow: one list of kernels).

    inputs: (user name, name in the compiled graph, user Value) per feed, in feed order;
    outputs: (label, user Value) per fetch; variable_values: {variable name: array}."""
    builder = _Builder(variable_values, tuning=tuning)
    bound = builder.feed_slots(lowered)
    _, slots, _ = builder.stage(lowered, bound)
    schedule = builder.schedule(name, [(user, bound[inner]) for user, inner, _ in inputs],
                                [(label, slot, value)
                                 for (label, value), slot in zip(outputs, slots)])
    return schedule, bytes(builder.blob), builder.kernel_objects


def build_control_schedule(compiled_graph, inputs, outputs, variable_values, name: str,
                           max_draw_buffers: int = WEBGL2_DRAW_BUFFERS,
                           tuning: Tuning | None = None) -> tuple:
    """(schedule dict, model.bin bytes, Kernels) of a compiled graph holding while_loop,
    cond or scan nodes: the schedule's `program` nests their sub-graphs' programs."""
    builder = _Builder(variable_values, max_draw_buffers, tuning)
    by_name = {n.name: n.outputs[0] for n in compiled_graph.nodes if n.op == "placeholder"}
    bound = {inner: builder.add_slot("feed", layout_for(by_name[inner].type,
                                                        builder.max_texture_size))
             for _, inner, _ in inputs}
    program, slots, _ = builder.program(compiled_graph, bound)
    schedule = builder.schedule(name, [(user, bound[inner]) for user, inner, _ in inputs],
                                [(label, slot, value)
                                 for (label, value), slot in zip(outputs, slots)],
                                program)
    return schedule, bytes(builder.blob), builder.kernel_objects


# -- variants ---------------------------------------------------------------------------
# what may differ between a schedule and the same graph lowered for more render targets:
# blocked kernels write 8 layers of an array texture where they wrote 4, over half the
# fragments, with another program and header
VARIANT_DRAW_BUFFERS = (4, 8)     # export(max_draw_buffers=(4, 8))
VARIANT_SLOT_FIELDS = frozenset({"layers", "width", "height"})
VARIANT_KERNEL_FIELDS = frozenset({"program", "layers", "width", "height", "header",
                                   "uniforms"})


def schedule_variant(base: dict, other: dict) -> dict | None:
    """`other` (base's graph lowered for more render targets) as a patch of `base`:
    {drawBuffers, slots: [[index, changed fields]], kernels: [[index, changed fields]]},
    other's programs added to base's `programs` (each text once), a changed header as
    [line, text] pairs where its line count is base's. None where other differs in
    anything else (kernels, slots, feeds, weights) or not at all. runtime.js `variantFor`
    applies it where the context allows `drawBuffers` targets."""
    fixed = set(base) - {"slots", "kernels", "programs", "drawBuffers"}
    if set(other) != set(base) or any(base[k] != other[k] for k in fixed) or \
            len(base["slots"]) != len(other["slots"]) or \
            len(base["kernels"]) != len(other["kernels"]):
        return None
    programs = list(base["programs"])
    index = {text: i for i, text in enumerate(programs)}
    slots, kernels = [], []
    for i, (a, b) in enumerate(zip(base["slots"], other["slots"])):
        change = _changed(a, b, VARIANT_SLOT_FIELDS)
        if change is None:
            return None
        if change:
            slots.append([i, change])
    for i, (a, b) in enumerate(zip(base["kernels"], other["kernels"])):
        text = other["programs"][b["program"]]
        if text not in index:
            index[text] = len(programs)
            programs.append(text)
        b = {**b, "program": index[text]}
        change = _changed(a, b, VARIANT_KERNEL_FIELDS)
        if change is None:
            return None
        if "header" in change:
            old, new = a["header"].split("\n"), b["header"].split("\n")
            if len(old) == len(new):
                change["header"] = [[j, line] for j, (was, line) in enumerate(zip(old, new))
                                    if was != line]
        if change:
            kernels.append([i, change])
    if not slots and not kernels:
        return None
    base["programs"] = programs
    return {"drawBuffers": other["drawBuffers"], "slots": slots, "kernels": kernels}


def schedule_for(schedule: dict, draw_buffers: int) -> dict:
    """The schedule the runtime runs on a context allowing `draw_buffers` render
    targets (runtime.js `variantFor`, in Python): its variant for the most targets at
    most that many applied, without `variants`; program indices stay the schedule's."""
    fits = [v for v in schedule.get("variants", ()) if v["drawBuffers"] <= draw_buffers]
    out = {k: v for k, v in schedule.items() if k != "variants"}
    if not fits:
        return out
    variant = fits[-1]
    slots, kernels = list(schedule["slots"]), list(schedule["kernels"])
    for target, changes in ((slots, variant["slots"]), (kernels, variant["kernels"])):
        for i, change in changes:
            target[i] = {**target[i], **change}
            if isinstance(change.get("header"), list):
                lines = schedule["kernels"][i]["header"].split("\n")
                for j, line in change["header"]:
                    lines[j] = line
                target[i]["header"] = "\n".join(lines)
    return {**out, "slots": slots, "kernels": kernels, "drawBuffers": variant["drawBuffers"]}


def _changed(a: dict, b: dict, allowed) -> dict | None:
    """b's fields that differ from a's; None where one outside `allowed` does."""
    change = {k: b.get(k) for k in set(a) | set(b) if a.get(k) != b.get(k)}
    if set(change) - allowed or set(a) != set(b):
        return None
    return change


# -- files ------------------------------------------------------------------------------
def runtime_text() -> str:
    """tools/webgl/runtime.js, the runtime every model.js is made of."""
    return resources.files(__package__).joinpath(RUNTIME_FILE).read_text(encoding="utf-8")


def page_text() -> str:
    return resources.files(__package__).joinpath(PAGE_FILE).read_text(encoding="utf-8")


def model_literal(schedule: dict) -> str:
    """The schedule as a JavaScript literal: JSON, plus NaN and Infinity for uniforms
    that hold them; ASCII only (U+2028 cannot end a line of it). Each program is written
    as the indices of its lines in `lines`, where every distinct line is once (programs
    share most of theirs); runtime.js joins them back at load."""
    if schedule.get("programs"):
        lines: dict = {}
        coded = [[lines.setdefault(line, len(lines)) for line in text.split("\n")]
                 for text in schedule["programs"]]
        schedule = {**schedule, "lines": list(lines), "programs": coded}
    return json.dumps(schedule, ensure_ascii=True, allow_nan=True, separators=(",", ":"))


def read_schedule(model_js: str) -> dict:
    """The schedule a model.js text carries, its programs' texts joined again from
    `lines` (model_literal's inverse)."""
    start = model_js.index("const MODEL = ") + len("const MODEL = ")
    schedule = json.JSONDecoder().raw_decode(model_js[start:])[0]
    lines = schedule.pop("lines", None)
    if lines is not None:
        schedule["programs"] = ["\n".join(lines[i] for i in p) for p in schedule["programs"]]
    return schedule


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
