"""Session: the user's handle on a graph. It compiles what a run needs once per set of
fetches, feeds and feed shapes (runtime/driver.py: prune → passes → lower → the backend's
plan, in a Compiled record), keeps those records, and runs their plans on the GL context
or the numpy reference executor (runtime/backend.py). Variables live in the session (on
the GPU for backend="gl") across runs."""
from __future__ import annotations

import os
import time
import zipfile

import numpy as np

from ..codegen.tuning import Tuning, TuningError
from ..ir.errors import FeedError, FetchError, FragflowError, SerializationError, SessionClosedError
from ..ir.graph import Graph, Value, get_default_graph
from ..ir.ops.state import RUN_COUNTER, initial_array
from ..ir.types import TensorType, format_shape
from ..passes import PassManager
from ..runtime import driver
from ..runtime.backend import get_backend
from . import default_session as _default, side_effects as _side_effects
from .debugging import DebugObserver, Profile, timed_runs
from .shaders import PlanPart, plan_entries, write_plan_shaders
from .tensor import Tensor

# Compiled plans a session keeps (per fetches, feeds and feed shapes); the least
# recently used is released beyond this, so varying a None dimension cannot grow GPU
# memory without bound.
MAX_PLANS = 16
_ACCEPTED_KINDS = {"float32": "fiub", "int32": "iub", "bool": "b"}
_INT32 = np.iinfo(np.int32)


class Session:
    """Runs a graph.

    A session may be used from several threads at once: each call runs whole, under
    the process-wide GL lock (backend="gl") or the session's own lock ("numpy"), on
    the one GL context, which is made current on the calling thread for the call.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     x = ff.placeholder((None, 2), "float32", name="x")
    ...     y = ff.relu(x * 2.0 - 1.0)
    >>> ff.Session(g, backend="numpy").run(y, {x: np.array([[0., 1.]], np.float32)})
    array([[0., 1.]], dtype=float32)
    """

    def __init__(self, graph: Graph | None = None, backend: str = "gl", passes=None,
                 disable_passes=(), dump_passes: str | None = None, debug: bool = False,
                 device: int | None = None, *, config=None, target=None, tuning=None):
        # TF1's tf.Session(target='', graph=None, config=tf.ConfigProto(...)): a target
        # string first means no graph; config is accepted and ignored (ff.ConfigProto)
        if isinstance(graph, str):
            graph = None
        self.graph = graph if graph is not None else get_default_graph()
        self.backend = backend
        self.debug = debug
        if debug:      # one kernel per node, so a NaN is pinned on the node that made it
            disable_passes = tuple(disable_passes) + ("merge_matmuls", "fuse_norms",
                                                     "fuse_epilogues", "fuse_updates",
                                                     "fuse_elementwise")
        self._pass_args = dict(passes=passes, disable=disable_passes, dump_dir=dump_passes)
        if tuning is not None:      # the knobs of kernel choice (ff.Tuning); else the device's
            if not isinstance(tuning, Tuning):
                raise TuningError(f"Session(tuning=...) takes an ff.Tuning, not "
                                  f"{type(tuning).__name__}")
            self._pass_args["tuning"] = tuning
        # unknown pass names fail here, not later
        PassManager(**{k: v for k, v in self._pass_args.items() if k != "tuning"})
        # device: an index from ff.devices(). One process has one GL context: the
        # first GL session fixes its device; asking another later raises BackendError.
        self._backend = get_backend(backend, device=device)   # unknown names fail here
        self._device = self._backend.device          # None for numpy
        # every use of plans and variables runs under it (GL: the GL section, see
        # runtime/context); one call at a time
        self._lock = self._backend.lock
        self._variables = self._backend.variables()
        self._plans: dict = {}
        self._runs = 0
        self._closed = False

    # -- running ----------------------------------------------------------------------
    def run(self, fetches, feed_dict=None):
        """Evaluate fetches (a tensor, or a list/tuple/dict of them: the same structure
        comes back, as numpy arrays) with feed_dict {tensor: value}."""
        self._check_open()
        flat, rebuild = _flatten(fetches)
        values = [self._fetch_value(f) for f in flat]
        feeds = self._check_feeds(feed_dict or {})
        expanded, effects = _side_effects.expand(self.graph, values)
        results = self._run_values(expanded, feeds)
        if effects:
            results = _side_effects.finish(results, effects, expanded)
        return rebuild(results[:len(values)])

    def compile(self, fetches, feeds=(), passes=None):
        """A callable fn(*feed_values) -> list of arrays, for fixed fetches and feeds."""
        self._check_open()
        return CompiledFunction(self, fetches, feeds, passes)

    def _run_values(self, values: list, feeds: dict, passes=None) -> list:
        types = {v: TensorType(a.shape, v.dtype) for v, a in feeds.items()}
        with self._lock:          # the plan must not be evicted before it has run
            compiled = self._plan(values, types, passes)
            return self._execute(compiled, _by_name(compiled, feeds))

    def _execute(self, compiled, feeds_by_name: dict, observer=None) -> list:
        """One run of a Compiled record's plan: the run counter (random ops' fresh
        draws) is fed like a placeholder. observer: a profile's; else, in debug mode,
        the NaN/Inf checker."""
        feeds_by_name[RUN_COUNTER] = np.array(self._runs, np.int32)
        self._runs += 1
        if observer is None and self.debug:
            observer = DebugObserver(compiled.graph)
        return compiled.plan.run_observed(feeds_by_name, observer)

    def profile(self, fetches, feed_dict=None, runs: int = 10):
        """Run fetches `runs` times and report where the time goes, per user op and
        scope (GPU time per kernel), with compile, upload and readback times."""
        self._check_open()
        flat, _ = _flatten(fetches)
        values = [self._fetch_value(f) for f in flat]
        feeds = self._check_feeds(feed_dict or {})
        with self._lock:
            return self._profile(values, feeds, runs)

    def _profile(self, values, feeds, runs):
        types = {v: TensorType(a.shape, v.dtype) for v, a in feeds.items()}
        start = time.perf_counter()
        compiled = self._plan(values, types)
        compile_seconds = time.perf_counter() - start
        by_name = _by_name(compiled, feeds)
        self._execute(compiled, dict(by_name))          # warm-up: JIT, first-touch
        profile = Profile(runs, compile_seconds, graph=compiled.graph, plan=compiled.plan)

        return timed_runs(lambda observer: self._execute(compiled, by_name, observer),
                          runs, profile)

    def _plan(self, values, feed_types: dict, passes=None):
        """The Compiled record (runtime/driver.py) for these fetches, feed shapes and
        passes: kept (MAX_PLANS, least recently used released first), else compiled."""
        key = (tuple(values), frozenset((v, t.shape) for v, t in feed_types.items()),
               None if passes is None else tuple(passes))
        with self._lock:
            self._check_open()
            plan = self._plans.pop(key, None)
            built = plan is None
            if built:
                args = dict(self._pass_args)
                if passes is not None:
                    args["passes"] = passes
                plan = driver.compile(self.graph, values, feed_types, self._backend,
                                      self._variables, **args)
            self._plans[key] = plan               # most recently used last
            while len(self._plans) > MAX_PLANS:   # e.g. one plan per batch size: bounded
                oldest = next(iter(self._plans))
                self._backend.release_plan(self._plans.pop(oldest).plan)
            if built:
                self._backend.evict()
            return plan

    # -- fetches and feeds --------------------------------------------------------------
    def _fetch_value(self, fetch) -> Value:
        if isinstance(fetch, str):
            try:
                return self.graph.value(fetch)
            except FragflowError as err:
                raise FetchError(f"fetch {fetch!r}: {err}") from None
        value = fetch.value if isinstance(fetch, Tensor) else fetch
        if not isinstance(value, Value):
            raise FetchError(f"cannot fetch {fetch!r}: fetches are tensors (or their names)")
        if value.graph is not self.graph:
            raise FetchError(f"fetch '{value.name}' belongs to graph '{value.graph.name}', "
                             f"not to this session's graph '{self.graph.name}'"
                             + _same_name(value.graph, self.graph))
        return value

    def _check_feeds(self, feed_dict: dict) -> dict:
        return {self._feed_value(key): _feed_array(self._feed_value(key), data)
                for key, data in feed_dict.items()}

    def _feed_value(self, key) -> Value:
        value = self.graph.value(key) if isinstance(key, str) else \
            key.value if isinstance(key, Tensor) else key
        if not isinstance(value, Value):
            raise FeedError(f"feed key {key!r} is not a tensor")
        if value.graph is not self.graph:
            raise FeedError(f"feed for '{value.name}', a tensor of graph "
                            f"'{value.graph.name}', not of this session's graph "
                            f"'{self.graph.name}'" + _same_name(value.graph, self.graph))
        return value

    # -- variables --------------------------------------------------------------------
    def _variable_name(self, var) -> str:
        value = var.value if isinstance(var, Tensor) else var
        if not isinstance(value, Value) or value.node.op != "variable" or \
                value.graph is not self.graph:
            raise FragflowError(f"{var!r} is not a variable of this session's graph")
        return value.node.name

    def get(self, var) -> np.ndarray:
        """A variable's current value."""
        self._check_open()
        name = self._variable_name(var)
        with self._lock:
            self._check_open()
            if name in self._variables:
                return self._variables.read(name)
        return np.array(initial_array(self.graph.node(name)))

    def set(self, var, value) -> None:
        """Overwrite a variable's value (on the GPU for backend="gl")."""
        self._check_open()
        name = self._variable_name(var)
        node = self.graph.node(name)
        array = _feed_array(node.outputs[0], value)
        with self._lock:
            self._check_open()
            self._variables.write(name, array)      # made on first write

    def save(self, path: str) -> None:
        """Every variable of the graph to an .npz file (no pickle)."""
        self._check_open()
        with self._lock:          # one consistent state, not a run's half-way point
            values = {n.name: self.get(n.outputs[0]) for n in self.graph.nodes
                      if n.op == "variable"}
        try:
            np.savez(path, **values)
        except OSError as err:
            raise SerializationError(f"cannot write checkpoint {str(path)!r}: "
                                     f"{err.strerror or err}") from None

    def restore(self, path: str, strict: bool = True) -> None:
        """Variables from an .npz file written by save(); loads no code (no pickle).

        All or nothing: every entry's name, shape and dtype is checked (from the file's
        headers, before any data is read), then every value, and only then is any
        variable written. Every variable of the graph must be in the file unless
        strict=False (those missing keep their values). A file that is not such a
        checkpoint (truncated, corrupt, not .npz, holding objects) raises
        SerializationError."""
        self._check_open()
        if not os.path.exists(path) and os.path.exists(str(path) + ".npz"):
            path = str(path) + ".npz"      # save() wrote it with numpy's .npz suffix
        variables = {n.name: n for n in self.graph.nodes if n.op == "variable"}
        arrays = _read_checkpoint(path, variables, self.graph.name)
        missing = [name for name in variables if name not in arrays]
        if missing and strict:
            raise SerializationError(
                f"checkpoint {str(path)!r} lacks variable(s) {', '.join(map(repr, missing))} "
                f"of graph '{self.graph.name}' (restore(..., strict=False) restores the "
                f"others and leaves these as they are)")
        checked = {}
        for name, array in arrays.items():
            try:
                checked[name] = _feed_array(variables[name].outputs[0], array)
            except FeedError as err:
                raise SerializationError(f"checkpoint {str(path)!r}: {err}") from None
        with self._lock:
            self._check_open()
            for name, array in checked.items():
                self._variables.write(name, array)

    # -- resources ------------------------------------------------------------------
    def memory(self) -> dict:
        """What this session holds on the GPU, and what the process holds:

        textures, bytes  textures this session holds (variables and its plans' own)
        plans            compiled plans it keeps (at most MAX_PLANS)
        live_textures    textures that exist in the process (held by any session, or
                         free in the pool)
        pool_textures, pool_bytes   free textures the pool keeps for reuse (bounded)
        shaders          linked shaders (GL program objects) in the process (bounded
                         beyond those that live plans launch); pinned_shaders: those
        """
        with self._lock:
            plans = [compiled.plan for compiled in self._plans.values()]
            out = {"textures": 0, "bytes": 0, "plans": len(plans), "live_textures": 0,
                   "pool_textures": 0, "pool_bytes": 0, "shaders": 0,
                   "pinned_shaders": 0}
            textures = list(self._variables.textures())
            for plan in plans:
                textures.extend(plan.textures())
            out.update(self._backend.stats(), textures=len(textures),
                       bytes=sum(t.nbytes for t in textures))
            return out

    def close(self) -> None:
        """Give back every texture and linked shader; the session cannot run afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._backend.release([c.plan for c in self._plans.values()], self._variables)
            self._plans.clear()
            self._backend.trim()

    def __del__(self):
        # A session dropped without close() gives its textures and shaders back at the
        # start of the next GL section: the collector may run on any thread, even one
        # inside a GL section, so no GL call and no pool change happens here.
        try:
            if not getattr(self, "_closed", True):
                self._closed = True
                self._backend.release_later([c.plan for c in self._plans.values()],
                                            self._variables)
        except Exception:        # interpreter shutdown: nothing left to give back to
            pass

    def _check_open(self):
        if self._closed:
            raise SessionClosedError("this session is closed: run, compile, get, set, "
                                     "save and restore need an open one")

    def as_default(self):
        """A context in which this session is the default one (TF1's as_default):
        tensor.eval() and op.run() run in it. Leaving it does not close the session."""
        return _default.as_default(self)

    def __enter__(self):
        _default.push(self)            # `with ff.Session() as sess:` makes sess the default, as TF1
        return self

    def __exit__(self, *exc):
        _default.pop(self)
        self.close()


class CompiledFunction:
    """sess.compile(fetches, feeds=[...]): call it with one value per feed."""

    def __init__(self, session: Session, fetches, feeds, passes=None):
        self.session = session
        flat, _ = _flatten(fetches)
        self._fetched = [session._fetch_value(f) for f in flat]
        # control dependencies, prints and summaries (frontend/side_effects.py)
        self._values, self._effects = _side_effects.expand(session.graph, self._fetched)
        self._feeds = [session._feed_value(f) for f in feeds]
        self._passes = passes
        self._last = None
        if all(v.type.is_static for v in self._feeds):
            self._last = session._plan(self._values, {v: v.type for v in self._feeds},
                                       passes)

    def __call__(self, *arrays):
        if len(arrays) != len(self._feeds):
            raise FeedError(f"this function takes {len(self._feeds)} feed(s) "
                            f"({', '.join(v.name for v in self._feeds)}), got {len(arrays)}")
        feeds = {v: _feed_array(v, a) for v, a in zip(self._feeds, arrays)}
        types = {v: TensorType(a.shape, v.dtype) for v, a in feeds.items()}
        session = self.session
        with session._lock:       # the plan must not be evicted before it has run
            compiled = self._last = session._plan(self._values, types, self._passes)
            results = session._execute(compiled, _by_name(compiled, feeds))
        if self._effects:
            results = _side_effects.finish(results, self._effects, self._values)
        return results[:len(self._fetched)]

    @property
    def fusion_report(self) -> list:
        """What fusion did for the last compiled specialisation: each group fused and
        each candidate rejected, with the reason."""
        self._require_plan()
        return list(self._last.fusion_report)

    @property
    def graph(self):
        """The compiled graph (after every pass) of the last specialisation."""
        self._require_plan()
        return self._last.graph

    def _require_plan(self):
        if self._last is None:
            raise FragflowError("feed shapes are not known yet: call the function once "
                                "(kernels depend on the shapes)")

    @property
    def kernels(self) -> list:
        """The kernels of the last compiled specialisation, in run order; with control
        flow, the kernels of each loop's and branch's plan where they run (a branch
        not taken yet has none)."""
        if self._last is None:
            raise FragflowError("feed shapes are not known yet: call the function once "
                                "(kernels depend on the shapes)")
        return _flat(plan_entries(self._last.plan))

    def dump_shaders(self, directory: str) -> list:
        """Write one .frag file per kernel of the last compiled specialisation into
        directory, numbered in run order; each starts with a comment naming the nodes it
        implements (fused ones too), their scopes and source lines, the input and output
        shapes and texture layouts, and the uniforms, and compiles as it is. A loop's
        or branch's kernels go in a folder of their own (frontend/shaders.py). Returns
        the paths."""
        self._require_plan()
        return write_plan_shaders(self._last.plan, directory)


def _same_name(theirs, ours) -> str:
    """The hint when two graphs share a name (the default graph after
    reset_default_graph(), a model rebuilt in a new ff.Graph())."""
    if theirs.name != ours.name:
        return ""
    return (f" (another graph of the same name: '{theirs.name}' was made again, e.g. by "
            f"reset_default_graph() or a new ff.Graph(); make the session after building "
            f"the graph, or run the tensor in a session of its own graph)")


def _by_name(compiled, feeds: dict) -> dict:
    """{name in the plan's compiled graph: array} of the feeds it reads (prune drops the
    others)."""
    names = compiled.feed_names
    return {names[v]: a for v, a in feeds.items() if v in names}


def _read_checkpoint(path, variables: dict, graph_name: str) -> dict:
    """{name: array} of an .npz checkpoint, every entry checked against `variables`
    (name, shape, dtype from its header) before any data is read; SerializationError
    naming the file and the entry for anything else."""
    where = f"checkpoint {str(path)!r}"
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError, TypeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise SerializationError(f"cannot read {where}: {why} (save() writes an .npz "
                                 f"file)") from None
    arrays = {}
    with archive:
        try:
            members = archive.infolist()
            for member in members:
                name = member.filename.removesuffix(".npy")
                if not member.filename.endswith(".npy"):
                    raise SerializationError(f"{where} holds {member.filename!r}, which is "
                                             f"not an array (.npy) entry")
                if name not in variables:
                    raise SerializationError(f"{where} holds '{name}', which is not a "
                                             f"variable of graph '{graph_name}'")
                with archive.open(member) as f:
                    version = np.lib.format.read_magic(f)
                    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                        else np.lib.format.read_array_header_2_0
                    shape, _, dtype = read_header(f)
                expected = variables[name].outputs[0]
                if dtype.hasobject or dtype.kind not in _ACCEPTED_KINDS[expected.dtype]:
                    raise SerializationError(f"{where}: '{name}' is stored as {dtype}; the "
                                             f"variable is {expected.dtype}")
                if tuple(shape) != tuple(expected.shape):
                    raise SerializationError(
                        f"{where}: '{name}' has shape {format_shape(shape)}; the variable's "
                        f"is {format_shape(expected.shape)}")
            for member in members:       # every header is fine: now the data
                with archive.open(member) as f:
                    arrays[member.filename.removesuffix(".npy")] = \
                        np.lib.format.read_array(f, allow_pickle=False)
        except SerializationError:
            raise
        except Exception as err:         # truncated or corrupt: zlib, CRC, EOF, header
            raise SerializationError(f"cannot read {where}: {type(err).__name__}: "
                                     f"{err}") from None
    return arrays


def _feed_array(value: Value, data) -> np.ndarray:
    """data as an array of the tensor's dtype and a shape it accepts, or a FeedError.

    Accepts numpy arrays, anything with __dlpack__ (torch CPU tensors, JAX arrays on
    the CPU) or __array__, and nested lists. A C-contiguous input of the tensor's dtype
    is used in place, with no copy (torch tensors through DLPack).
    """
    array, reasons = None, []
    if not isinstance(data, np.ndarray) and hasattr(data, "__dlpack__"):
        try:
            array = np.from_dlpack(data)        # a view of the producer's memory
        except Exception as err:                # e.g. a GPU tensor, requires_grad, bfloat16
            reasons.append(str(err))
    if array is None:
        try:
            array = np.asarray(data)
        except Exception as err:
            reasons.append(str(err))
            raise FeedError(f"feed for '{value.name}' is not array-like: "
                            f"{'; '.join(dict.fromkeys(reasons))}") from None
    dtype = value.dtype
    if array.dtype.kind not in _ACCEPTED_KINDS[dtype]:
        raise FeedError(f"feed for '{value.name}' has dtype {array.dtype}, but the tensor "
                        f"is {dtype}")
    if dtype == "int32" and array.dtype.kind in "iu" and array.size and \
            (array.min() < _INT32.min or array.max() > _INT32.max):
        raise FeedError(f"feed for '{value.name}' holds values outside int32's range")
    expected = value.shape
    if len(array.shape) != len(expected) or any(
            e is not None and e != d for e, d in zip(expected, array.shape)):
        raise FeedError(f"feed for '{value.name}' has shape {format_shape(array.shape)}, "
                        f"but the tensor's shape is {format_shape(expected)}")
    return np.asarray(array, dtype=np.dtype(dtype), order="C")   # keeps 0-d arrays 0-d


def _flatten(fetches):
    """(flat list of fetches, function rebuilding the user's structure from results):
    tensors in lists, tuples, namedtuples and dicts, nested to any depth."""
    if isinstance(fetches, (dict, list, tuple)):
        items = list(fetches.values()) if isinstance(fetches, dict) else list(fetches)
        parts = [_flatten(item) for item in items]
        flat = [f for part, _ in parts for f in part]

        def rebuild(out):
            values, start = [], 0
            for part, rebuild_part in parts:
                values.append(rebuild_part(out[start:start + len(part)]))
                start += len(part)
            if isinstance(fetches, dict):
                return type(fetches)(zip(fetches.keys(), values))
            if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
                return type(fetches)(*values)
            return type(fetches)(values)
        return flat, rebuild
    return [fetches], lambda out: out[0]


def _flat(entries) -> list:
    """Kernels of plan_entries, a loop's or branch's among them in place."""
    out = []
    for entry in entries:
        out.extend(_flat(entry.entries) if isinstance(entry, PlanPart) else [entry])
    return out
