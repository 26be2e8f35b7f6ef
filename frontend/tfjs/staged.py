"""Staged TF.js models: graphs whose shapes or structure depend on the data.

fragflow's shapes follow the feed shapes only. A TF.js model with TF1 control flow or an
op whose output shape depends on the data (NonMaxSuppression, Where, TopKV2 with a
computed k) is imported for given feeds in stages: the importer walks the graph; where
it needs a value the graph computes (a Switch's or LoopCond's predicate, a size, NMS's
boxes) it runs the graph built so far on the feeds (a *boundary*), and goes on with
what that value makes known:

- a **guard**: a value the graph's structure depends on (which branch a Switch takes,
  whether a loop goes on, a computed k or resize size) becomes a constant, and the
  stage remembers the value it was built for;
- a **host op**: NMS and Where run on the host on the boundary's values, as TF.js runs
  them on the CPU; their results enter the next stage as placeholders of the shapes they
  have, and the rest is built for those shapes.

The result is a plan: one graph, its outputs and the list of boundaries. `run(feeds)`
replays the plan whose feed shapes match: each boundary's inputs are computed, the host
ops run and fed on, and each guard's value checked; where a value or a host result's
shape differs from the plan's, a new plan is built for these feeds. Plans are cached per
feed shapes (at most MAX_PLANS, least recently used dropped). Nothing is ever padded or
truncated: each plan's shapes are the real ones.
"""
from __future__ import annotations

import collections
import threading

import numpy as np

from ..session import Session
from .errors import TfjsImportError

MAX_PLANS = 16


class NeedsStaging(TfjsImportError):
    """Raised by the importer without feeds where a value the graph computes decides a
    shape or the graph's structure: ff.tfjs.load then returns a StagedTfjsModel."""


class Dead:
    """The value of a tensor on a branch not taken (TF's dead tensor): an op with a dead
    input is dead; a Merge takes its one live input."""
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "DEAD"


DEAD = Dead()


class DeadOutputs(list):
    """The outputs of a dead node: dead, however many are read."""

    def __getitem__(self, k):
        return DEAD

    def __len__(self):
        return 1 << 20


class TensorSeq:
    """A TensorArray's or TensorList's elements at import: a list of table values (None:
    not written yet). TensorArrays are written in place (their flow orders the writes);
    TensorLists are values (SetItem makes a new one)."""
    __slots__ = ("items", "dtype", "kind")

    def __init__(self, items, dtype, kind):
        self.items, self.dtype, self.kind = list(items), dtype, kind

    def copy(self):
        return TensorSeq(self.items, self.dtype, self.kind)


class Guard:
    __slots__ = ("tensor", "value", "what")

    def __init__(self, tensor, value, what):
        self.tensor, self.value, self.what = tensor, value, what


class HostOp:
    __slots__ = ("sources", "fn", "placeholders", "what")

    def __init__(self, sources, fn, placeholders, what):
        self.sources, self.fn, self.placeholders, self.what = sources, fn, placeholders, what


class Runtime:
    """What the importer needs to build a plan for given feeds: the feeds (placeholder ->
    array, the host ops' results added as they are computed), the session's keywords and
    the boundaries met, in order."""

    def __init__(self, feeds_by_name: dict, session_kwargs: dict):
        self.by_name = feeds_by_name
        self.feeds: dict = {}
        self.session_kwargs = session_kwargs
        self.boundaries: list = []
        self.guarded: dict = {}       # id(tensor) -> (tensor, value): one guard per value

    def evaluate(self, graph, tensors):
        return Session(graph, **self.session_kwargs).run(list(tensors), self.feeds)


class Plan:
    """One graph built for given feeds, its outputs and its boundaries. A replay
    computes the boundaries in batches: consecutive boundaries none of which reads a
    host result of an earlier one in the batch are fetched by one run (handtrack's 7
    NMS share one run of the network before them)."""
    __slots__ = ("model", "boundaries", "sessions", "batches")

    def __init__(self, model, boundaries):
        self.model, self.boundaries, self.sessions = model, boundaries, {}
        self.batches = _batches(boundaries)

    def session(self, kwargs):
        key = repr(sorted(kwargs.items()))
        if key not in self.sessions:
            self.sessions[key] = Session(self.model.graph, **kwargs)
        return self.sessions[key]

    def replay(self, feeds: dict, kwargs):
        """{output name: array}, or None where a boundary's value differs from the one
        this plan was built for."""
        session = self.session(kwargs)
        for batch in self.batches:
            fetch = [t for b in batch for t in _fetched(b)]
            values = iter(session.run(fetch, feeds))
            for b in batch:
                if isinstance(b, Guard):
                    value = np.asarray(next(values))
                    if value.shape != b.value.shape or not np.array_equal(value, b.value):
                        return None
                    continue
                results = b.fn(*[np.asarray(next(values)) for _ in b.sources])
                for p, r in zip(b.placeholders, results):
                    if tuple(r.shape) != tuple(p.shape):
                        return None
                    feeds[p] = r
        values = session.run(self.model.outputs, feeds)
        return dict(zip(self.model.outputs_by_name, values))


def _fetched(b):
    return [b.tensor] if isinstance(b, Guard) else list(b.sources)


def _batches(boundaries) -> list:
    """boundaries cut into runs: a boundary reading (through the graph) a placeholder
    that a host op of the current run feeds starts the next run."""
    batches, produced = [], set()
    for b in boundaries:
        if batches and not (_placeholders_read(_fetched(b)) & produced):
            batches[-1].append(b)
        else:
            batches.append([b])
            produced = set()
        if isinstance(b, HostOp):
            produced |= {p.value.node for p in b.placeholders}
    return batches


def _placeholders_read(tensors) -> set:
    """The placeholder nodes the tensors depend on (an iterative walk up the graph)."""
    seen, out = set(), set()
    stack = [t.value.node for t in tensors]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "placeholder":
            out.add(node)
        stack.extend(v.node for v in node.inputs)
    return out


class InputSpec:
    """A staged model's input before feeds fix its shape: name, shape (None: unknown
    dims; None altogether: unknown rank), dtype."""
    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, shape, dtype

    def __repr__(self):
        return f"InputSpec({self.name!r}, {self.shape}, {self.dtype})"


class StagedTfjsModel:
    """A TF.js model imported in stages for the feeds it is run on (module docstring).

    inputs_by_name: TF.js input name -> InputSpec (shape and dtype as model.json gives
    them). run(feeds, backend=..., passes=...) -> {output name: array}: the plan for
    these feeds (built, or replayed from the cache). stage(feeds, ...) -> the TfjsModel
    of that plan (its graph, outputs and boundaries), for dump, shaders and profile.
    `staged_by` names the op that made the model staged."""

    format = "tfjs"

    def __init__(self, build, inputs_by_name: dict, output_names: list, reason: str,
                 aliases=None):
        self._build = build
        self.input_aliases = dict(aliases or {})
        self.inputs_by_name = dict(inputs_by_name)
        self.inputs = list(self.inputs_by_name.values())
        self.output_names = list(output_names)
        self.staged_by = reason
        self.plans: collections.OrderedDict = collections.OrderedDict()
        self.builds = 0
        self._lock = threading.RLock()     # runs from several threads share the plans

    def _key(self, feeds):
        return tuple(sorted((k, tuple(np.shape(v)), str(np.asarray(v).dtype))
                            for k, v in feeds.items()))

    def _named(self, feeds):
        feeds = {self.input_aliases.get(k, k): v for k, v in feeds.items()}
        unknown = [k for k in feeds if k not in self.inputs_by_name]
        if unknown:
            raise TfjsImportError(f"feeds name {unknown[0]!r}, not an input of the model "
                                  f"(inputs: {', '.join(self.inputs_by_name)})")
        missing = [k for k in self.inputs_by_name if k not in feeds]
        if missing:
            raise TfjsImportError(f"the staged model needs every input fed; "
                                  f"{', '.join(missing)} missing")
        return {k: np.asarray(v) for k, v in feeds.items()}

    def _plan(self, feeds, kwargs):
        with self._lock:
            return self._plan_locked(feeds, kwargs)

    def _plan_locked(self, feeds, kwargs):
        key = self._key(feeds)
        plans = self.plans.setdefault(key, [])
        self.plans.move_to_end(key)
        for plan in plans:
            result = plan.replay(plan.model.feed_dict(dict(feeds)), kwargs)
            if result is not None:
                return plan, result
        runtime = Runtime(feeds, kwargs)
        model = self._build(runtime)
        self.builds += 1
        plan = Plan(model, runtime.boundaries)
        plans.append(plan)
        total = sum(len(v) for v in self.plans.values())
        while total > MAX_PLANS:
            oldest = next(iter(self.plans))
            dropped = self.plans[oldest].pop(0)
            del dropped
            if not self.plans[oldest]:
                del self.plans[oldest]
            total -= 1
        # the outputs from the values the plan was built on (the host results are fed
        # already): no boundary is computed twice, so none can come out otherwise
        values = plan.session(kwargs).run(model.outputs, runtime.feeds)
        return plan, dict(zip(model.outputs_by_name, values))

    def run(self, feeds: dict, backend: str = "gl", passes=None) -> dict:
        """{output name: array} for {input name: array} (every input fed)."""
        kwargs = {"backend": backend}
        if passes is not None:
            kwargs["passes"] = passes
        _, result = self._plan(self._named(feeds), kwargs)
        return result

    def stage(self, feeds: dict, backend: str = "gl", passes=None):
        """The imported model (TfjsModel) of the plan for these feeds; its
        `boundaries` lists the guards and host ops its run goes through."""
        kwargs = {"backend": backend}
        if passes is not None:
            kwargs["passes"] = passes
        plan, _ = self._plan(self._named(feeds), kwargs)
        plan.model.boundaries = plan.boundaries
        return plan.model

    def _no_single_graph(self, what):
        raise TfjsImportError(
            f"{what}: the model has no single graph ({self.staged_by}); its graph is "
            f"built for the feeds it runs on: model.run(feeds) runs it, model.stage(feeds) "
            f"gives the TfjsModel of those feeds' plan (graph, outputs, boundaries) to "
            f"dump or profile. A WebGL export would need every stage's shaders for every "
            f"shape it may meet: re-export the TF model with fixed maximum sizes (NMS with "
            f"pad_to_max_output_size, static loops) instead")

    @property
    def graph(self):
        self._no_single_graph("graph")

    @property
    def outputs(self):
        self._no_single_graph("outputs")

    @property
    def outputs_by_name(self):
        self._no_single_graph("outputs_by_name")

    def feed_dict(self, feeds):
        self._no_single_graph("feed_dict")

    def __repr__(self):
        return (f"StagedTfjsModel(inputs={list(self.inputs_by_name)}, "
                f"outputs={self.output_names}, staged by {self.staged_by})")


# -- host ops, as TF.js computes them ------------------------------------------------------

def _iou(boxes, i, j) -> float:
    """TF.js's intersectionOverUnion, in float64 (JS numbers) on the float32 coords."""
    a, b = boxes[i], boxes[j]
    ymin_i, xmin_i = min(a[0], a[2]), min(a[1], a[3])
    ymax_i, xmax_i = max(a[0], a[2]), max(a[1], a[3])
    ymin_j, xmin_j = min(b[0], b[2]), min(b[1], b[3])
    ymax_j, xmax_j = max(b[0], b[2]), max(b[1], b[3])
    area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i)
    area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j)
    if area_i <= 0 or area_j <= 0:
        return 0.0
    inter = max(min(ymax_i, ymax_j) - max(ymin_i, ymin_j), 0.0) * \
        max(min(xmax_i, xmax_j) - max(xmin_i, xmin_j), 0.0)
    return inter / (area_i + area_j - inter)


def non_max_suppression(boxes, scores, max_output_size, iou_threshold, score_threshold,
                        soft_nms_sigma=0.0):
    """TF.js 4.22's nonMaxSuppressionImpl_ (tfjs-core backends/non_max_suppression_impl):
    candidates with score > score_threshold, best first (ties: the lower box index);
    a candidate is dropped at IoU >= iou_threshold with a kept box; with soft_nms_sigma
    > 0 its score decays by exp(-0.5 / sigma * iou^2) and it goes back in line. Returns
    (selected indices int32, their scores float32)."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4).astype(np.float64).tolist()
    scores = np.asarray(scores, np.float32).reshape(-1).astype(np.float64).tolist()
    max_output_size = min(int(max_output_size), len(boxes))
    iou_threshold, score_threshold = float(iou_threshold), float(score_threshold)
    soft_nms_sigma = float(soft_nms_sigma)
    # ascending by (score, -index): pop() gives the best, the lower index on ties
    line = sorted(([s, i, 0] for i, s in enumerate(scores) if s > score_threshold),
                  key=lambda c: (c[0], -c[1]))
    scale = -0.5 / soft_nms_sigma if soft_nms_sigma > 0 else 0.0
    selected, selected_scores = [], []
    while len(selected) < max_output_size and line:
        candidate = line.pop()
        original, index, begin = candidate
        if original < score_threshold:
            break
        ignore = False
        for j in range(len(selected) - 1, begin - 1, -1):
            iou = _iou(boxes, index, selected[j])
            if iou >= iou_threshold:
                ignore = True
                break
            weight = float(np.exp(scale * iou * iou)) if iou <= iou_threshold else 0.0
            candidate[0] = candidate[0] * weight
            if candidate[0] <= score_threshold:
                break
        candidate[2] = len(selected)
        if not ignore:
            if candidate[0] == original:
                selected.append(index)
                selected_scores.append(candidate[0])
            elif candidate[0] > score_threshold:
                keys = [(c[0], -c[1]) for c in line]
                position = _bisect(keys, (candidate[0], -candidate[1]))
                line.insert(position, candidate)
    return (np.asarray(selected, np.int32).reshape(-1),
            np.asarray(selected_scores, np.float32).reshape(-1))


def _bisect(keys, key) -> int:
    lo, hi = 0, len(keys)
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


def where(condition):
    """TF.js's whereImpl: the coordinates of the true (non-zero) entries, row-major,
    as int32 [count, rank]."""
    condition = np.asarray(condition)
    return np.argwhere(condition != 0).astype(np.int32).reshape(-1, condition.ndim)
