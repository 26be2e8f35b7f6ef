"""ONNX's own test cases run on fragflow: passed / failed / skipped, per op, with a
histogram of failure reasons.

    python -m fragflow.frontend.onnx.conformance [--backend gl|numpy] [--sample N]
           [--seed S] [--match REGEX] [--no-node] [--no-files] [--json PATH]

Cases: the node tests onnx generates in memory
(onnx.backend.test.case.node.collect_testcases(), ~1,900 small models with inputs and
expected outputs) and the model tests shipped in the package
(onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple}). A case is
skipped when an input or output has a dtype fragflow does not have (float64, float16,
strings, 8/16-bit and unsigned integers...); int64 counts as supported (fragflow runs
it as int32 when the values fit). Outputs are compared with the case's own tolerances
(ONNX's defaults: rtol 1e-3, atol 1e-7).
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import random
import re
import sys
import time
import warnings

import numpy as np

from ...ir.errors import FragflowError
from .errors import OnnxImportError, UnsupportedOnnxOpError

SUPPORTED_DTYPES = {np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64),
                    np.dtype(np.bool_)}
FILE_SUITES = ("pytorch-converted", "pytorch-operator", "simple")


class Case:
    def __init__(self, name, model, data_sets, rtol=1e-3, atol=1e-7, kind="node"):
        self.name, self.model, self.data_sets = name, model, data_sets
        self.rtol, self.atol, self.kind = rtol, atol, kind

    @property
    def ops(self) -> list:
        return sorted({n.op_type for n in self.model.graph.node}) or ["(none)"]


def node_cases() -> list:
    from onnx.backend.test.case.node import collect_testcases  # optional: onnx
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [Case(c.name, c.model, c.data_sets, c.rtol, c.atol, "node") for c in cases]


def file_cases(suites=FILE_SUITES) -> list:
    import onnx  # optional: this module imports without it (--help)
    from onnx import numpy_helper  # optional, as onnx
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    out = []
    for suite in suites:
        for model_dir in sorted(glob.glob(os.path.join(root, suite, "*"))):
            path = os.path.join(model_dir, "model.onnx")
            if not os.path.exists(path):
                continue
            data_sets = []
            for data_dir in sorted(glob.glob(os.path.join(model_dir, "test_data_set_*"))):
                def read(kind, data_dir=data_dir):   # bound now (B023)
                    files = sorted(glob.glob(os.path.join(data_dir, f"{kind}_*.pb")),
                                   key=lambda p: int(re.findall(r"(\d+)\.pb$", p)[0]))
                    arrays = []
                    for f in files:
                        t = onnx.TensorProto()
                        with open(f, "rb") as fh:
                            t.ParseFromString(fh.read())
                        arrays.append(numpy_helper.to_array(t))
                    return arrays
                data_sets.append((read("input"), read("output")))
            out.append(Case(f"{suite}/{os.path.basename(model_dir)}", onnx.load(path),
                            data_sets, kind=suite))
    return out


def _as_array(a):
    """A test value as an array: onnx's cases hold arrays, numpy scalars and, in newer
    versions, TensorProtos."""
    if hasattr(a, "SerializeToString") and hasattr(a, "dims"):
        from onnx import numpy_helper  # optional: onnx
        return numpy_helper.to_array(a)
    if isinstance(a, (np.generic, int, float, bool)):
        return np.asarray(a)
    return a


def _unsupported_dtype(case):
    for inputs, outputs in case.data_sets:
        for a in map(_as_array, list(inputs) + list(outputs)):
            if not isinstance(a, np.ndarray):
                return type(a).__name__               # sequences, optionals, maps
            if a.dtype not in SUPPORTED_DTYPES:
                return str(a.dtype)
    return None


def _reason(err) -> str:
    """A failure reason with the node's name and numbers taken out, so that equal
    reasons count together."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    if isinstance(err, UnsupportedOnnxOpError):
        m = re.match(r"(\w+) node", text)
        return f"unsupported op {m.group(1) if m else '?'}"
    if isinstance(err, OnnxImportError):
        text = re.sub(r"^(\w+) node '[^']*' \(opset \d+\): ", r"\1: ", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", text)
    return f"{type(err).__name__}: {text[:110]}"


def run_case(case, backend: str):
    """("pass" | "fail" | "skip", reason)."""
    from .backend import FragflowBackend  # backend.py needs onnx at its top; this module does not
    bad = _unsupported_dtype(case)
    if bad is not None:
        return "skip", f"dtype {bad}"
    try:
        rep = FragflowBackend.prepare(case.model, backend=backend)
        for inputs, expected in case.data_sets:
            got = rep.run([_as_array(a) for a in inputs])
            expected = [_as_array(e) for e in expected]
            if len(got) != len(expected):
                return "fail", "wrong number of outputs"
            for g, e in zip(got, expected):
                e = np.asarray(e)
                if g.shape != e.shape:
                    return "fail", "output shape differs"
                if e.dtype == np.bool_ or np.issubdtype(e.dtype, np.integer):
                    if not np.array_equal(g.astype(np.int64), e.astype(np.int64)):
                        return "fail", "integer/bool values differ"
                elif not np.allclose(g, e, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-6),
                                     equal_nan=True):
                    return "fail", "values differ beyond tolerance"
        return "pass", ""
    except FragflowError as err:
        return "fail", _reason(err)
    except Exception as err:                # noqa: BLE001 -- counted, never fatal
        first = str(err).splitlines()[0][:80] if str(err) else ""
        return "fail", f"crash {type(err).__name__}: {first}"


def run(cases, backend="gl", progress=None) -> dict:
    results = []
    for i, case in enumerate(cases):
        status, reason = run_case(case, backend)
        results.append({"name": case.name, "kind": case.kind, "ops": case.ops,
                        "status": status, "reason": reason})
        if progress:
            progress(i + 1, len(cases), case, status)
    return summarize(results)


def summarize(results) -> dict:
    totals = collections.Counter(r["status"] for r in results)
    per_op = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    for r in results:
        for op in r["ops"]:
            per_op[op][r["status"]] += 1
        if r["status"] != "pass":
            reasons[("skip " if r["status"] == "skip" else "") + r["reason"]] += 1
    return {"results": results, "totals": dict(totals), "per_op": {k: dict(v) for k, v in
                                                                  sorted(per_op.items())},
            "reasons": reasons.most_common()}


def report(summary, out=sys.stdout) -> None:
    t = summary["totals"]
    passed, failed, skipped = t.get("pass", 0), t.get("fail", 0), t.get("skip", 0)
    total = passed + failed + skipped
    w = out.write
    w("per op (pass/fail/skip):\n")
    for op, c in summary["per_op"].items():
        w(f"  {op:28s} {c.get('pass', 0):4d} {c.get('fail', 0):4d} {c.get('skip', 0):4d}\n")
    w("\nfailure and skip reasons:\n")
    for reason, n in summary["reasons"][:60]:
        w(f"  {n:5d}  {reason}\n")
    by_kind = collections.defaultdict(collections.Counter)
    for r in summary["results"]:
        by_kind[r["kind"]][r["status"]] += 1
    w("\n")
    for kind, c in sorted(by_kind.items()):
        n = sum(c.values())
        w(f"{kind:18s} passed {c['pass']} of {n}; of the {n - c['skip']} with fragflow's "
          f"dtypes: {c['pass']}\n")
    w(f"TOTAL passed {passed} / failed {failed} / skipped {skipped} of {total}: "
      f"{100.0 * passed / max(total, 1):.1f}% of all, "
      f"{100.0 * passed / max(total - skipped, 1):.1f}% of those with fragflow's dtypes\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fragflow.frontend.onnx.conformance",
                                description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="gl", choices=["gl", "numpy"])
    p.add_argument("--sample", type=int, default=0, help="a seeded random subset of N cases")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--match", default=None, help="only cases whose name matches REGEX")
    p.add_argument("--no-node", action="store_true", help="skip onnx's node cases")
    p.add_argument("--no-files", action="store_true", help="skip the shipped model tests")
    p.add_argument("--json", default=None, help="write every case's result to PATH")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    cases = ([] if args.no_node else node_cases()) + ([] if args.no_files else file_cases())
    if args.match:
        cases = [c for c in cases if re.search(args.match, c.name)]
    if args.sample:
        cases = random.Random(args.seed).sample(cases, min(args.sample, len(cases)))
    start = time.time()

    def progress(i, n, case, status):
        if args.verbose or i % 100 == 0:
            print(f"[{i}/{n} {time.time() - start:.0f}s] {case.name}: {status}",
                  file=sys.stderr, flush=True)
    summary = run(cases, args.backend, progress)
    report(summary)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
