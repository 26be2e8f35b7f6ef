"""ff.webgl.export(..., weights="float16"): a float32 model's weights stored as IEEE
half in model.bin (half the download), and what that costs in accuracy.

The compiled graph's float constants and the variables' values are rounded to the
nearest float16 (numpy's round-to-nearest-even) before lowering, so that what model.bin
holds, what the runtime expands at load and what the kernels read are the same numbers;
export.encode then stores each as float16 (it decodes back bit for bit). The accuracy is
measured at export time by the numpy executor on the compiled graph, once with the
float32 weights and once with the rounded ones, on seeded inputs (float32 standard
normal from numpy's default_rng(0), int and bool zeros: the index page's distribution).

Values: NaN and +-inf stay NaN and +-inf (half has them); a finite value that rounds to
+-inf (|x| >= 65520, half's largest being 65504) is refused (HalfWeightsError names the
weight); values below half's smallest normal, 2**-14, keep fewer bits (subnormals, down
to 2**-24) and those under 2**-25 become 0: counted in the report, and a warning when
any nonzero weight becomes 0.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ...ir.graph import Graph
from ...runtime.numpy_executor import NumpyPlan, NumpyVariables

HALF_MAX = 65504.0
HALF_TINY = 2.0 ** -14           # half's smallest normal


@dataclass
class HalfWeightsReport:
    """What weights="float16" did: the weights rounded, the values that became
    subnormal or 0, and per output the largest |difference| from the float32 weights'
    result against the largest |value| of that result, on the seeded inputs."""
    weights: int = 0                 # constants and variables rounded
    elements: int = 0
    subnormal: int = 0               # nonzero values now below 2**-14
    flushed: int = 0                 # nonzero values now 0
    changed: int = 0                 # values float16 could not hold exactly
    outputs: dict = field(default_factory=dict)   # label -> {"max_abs_diff", "max_abs"}

    @property
    def relative(self) -> float:
        """The worst output's max |difference| / max |output| (0 where an output is 0)."""
        worst = 0.0
        for o in self.outputs.values():
            if o["max_abs"] > 0:
                worst = max(worst, o["max_abs_diff"] / o["max_abs"])
            elif o["max_abs_diff"] > 0:
                worst = float("inf")
        return worst

    def lines(self) -> list:
        out = [f"weights float16: {self.weights} weights, {self.elements} values "
               f"({self.changed} rounded, {self.subnormal} subnormal, {self.flushed} "
               f"became 0)"]
        for label, o in self.outputs.items():
            rel = o["max_abs_diff"] / o["max_abs"] if o["max_abs"] else 0.0
            out.append(f"  output {label}: max |float16 - float32| {o['max_abs_diff']:.3g}"
                       f" of max |output| {o['max_abs']:.3g} ({rel:.2e}) on seeded inputs")
        return out


def round_half(array, what: str, report: HalfWeightsReport, error) -> np.ndarray:
    """array's values as the nearest float16s, in float32; `error` (an exception class)
    raised when a finite value would become +-inf."""
    flat = np.asarray(array, np.float32)
    with np.errstate(over="ignore"):
        half = flat.astype(np.float16)
    overflow = np.isfinite(flat) & ~np.isfinite(half)
    if overflow.any():
        bad = flat[overflow]
        raise error(f"{what}: {overflow.sum()} value(s) beyond float16's range "
                    f"(|x| >= 65520, e.g. {float(bad.reshape(-1)[0])!r}) would become inf "
                    f"with weights='float16'; export it with weights='float32' or scale "
                    f"the weight")
    back = half.astype(np.float32)
    nonzero = flat != 0
    report.weights += 1
    report.elements += int(flat.size)
    report.flushed += int((nonzero & (back == 0)).sum())
    report.subnormal += int((nonzero & (back != 0) & (np.abs(back) < HALF_TINY)).sum())
    report.changed += int((~np.isnan(flat) & (back != flat)).sum())
    return back


def rounded_graph(graph: Graph, report: HalfWeightsReport, error) -> Graph:
    """A copy of a compiled graph with its float constants rounded to float16 (names,
    scopes and outputs kept); sub-graphs' constants stay as they are."""
    out = Graph(graph.name)
    out.weight_encodings = list(getattr(graph, "weight_encodings", ()))
    mapping = {}
    for node in graph.nodes:
        inputs = [mapping[v] for v in node.inputs]
        if node.op == "constant" and node.outputs[0].dtype == "float32":
            attrs = dict(node.attrs)
            attrs["value"] = round_half(attrs["value"], f"constant '{node.name}'", report,
                                        error)
            copy = out.add_node(node.op, inputs, attrs, exact_name=node.name,
                                scope=node.scope, source=node.source)
        else:
            copy = out.add_copy(node, inputs)
        mapping.update(zip(node.outputs, copy.outputs))
    out.outputs = [mapping[v] for v in graph.outputs]
    return out


def seeded_feeds(graph: Graph) -> dict:
    """{placeholder name: array} for a compiled graph: float32 standard normal from
    default_rng(0), int and bool zeros; the run counter 0."""
    rng = np.random.default_rng(0)
    feeds = {}
    for node in graph.nodes:
        if node.op in ("placeholder", "run_counter"):
            t = node.outputs[0].type
            feeds[node.outputs[0].name] = \
                rng.standard_normal(t.shape).astype(np.float32) if t.dtype == "float32" \
                else np.zeros(t.shape, np.dtype(t.dtype))
    return feeds


def _run(graph: Graph, values: dict) -> list:
    variables = NumpyVariables()
    for node in graph.nodes:
        if node.op == "variable":
            variables.value(node.name, values[node.name])
    return NumpyPlan(graph, variables).run(seeded_feeds(graph))


def measure(graph: Graph, half: Graph, values: dict, half_values: dict, labels: list,
            report: HalfWeightsReport) -> None:
    """Fill report.outputs: the numpy executor on `graph` with `values` ({variable name:
    array}) against `half` with `half_values`, the first len(labels) outputs."""
    want = _run(graph, values)
    got = _run(half, half_values)
    for label, a, b in zip(labels, want, got):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        both = np.isfinite(a) & np.isfinite(b)
        diff = float(np.abs(a - b)[both].max()) if both.any() else 0.0
        if not np.array_equal(np.isfinite(a), np.isfinite(b)):
            diff = float("inf")          # a value finite in one and not in the other
        report.outputs[label] = {"max_abs_diff": diff,
                                 "max_abs": float(np.abs(a[np.isfinite(a)]).max())
                                 if np.isfinite(a).any() else 0.0}
    if report.flushed:
        warnings.warn(f"weights='float16': {report.flushed} nonzero weight value(s) are "
                      f"below float16's smallest subnormal (2**-25) and became 0 "
                      f"(max |difference| / max |output| "
                      f"{report.relative:.2e})", stacklevel=3)
