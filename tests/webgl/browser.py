"""The WebGL tests' browser runs: the harness page (harness.html) loads each export that
cases.json lists, in one shared context, in ONE Chromium launch per rasteriser
(tools/webgl/chromium.py)."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np

from fragflow.tools.webgl.chromium import CONFIGS, chromium, serve_and_open  # noqa: F401

HARNESS = os.path.join(os.path.dirname(__file__), "harness.html")
_DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.uint8}


def run_cases(root: str, cases: list, config: str, timeout: float = 240.0) -> dict:
    """Run exported models in one browser launch. cases: dicts with id, dir (the export's
    folder under root), feeds {name: (array, dtype)}, runs, variables, outputs
    {name: (shape, dtype)}, variable shapes {name: (shape, dtype)}. Returns
    {"info": {...}, case id: {"outputs": [{name: array} per run], "variables":
    {name: array}, "error": str or None, "reads": [predicates read back per run],
    "profile", "page", "timings" (load()'s model.timings: phases, programs linked and
    reused; case["load_options"]: more options for load()), "guards": {scenario:
    {name, message}} (case["guards"]: the folder
    of the export whose run must time out), "reload": {"new" | "restored": {name:
    array}} (the runs after the context losses, on a new context and on the restored
    one)}}. page_query: what index.html's address ends with (page)."""
    listed = []
    for case in cases:
        feeds = {}
        for name, (array, dtype) in case["feeds"].items():
            file = f"{case['dir']}/feed_{len(feeds)}.bin"
            stored = np.dtype(np.float32 if dtype == "float32" else np.int32).newbyteorder("<")
            np.ascontiguousarray(array).astype(stored).tofile(os.path.join(root, file))
            feeds[name] = {"file": file, "dtype": "float32" if dtype == "float32" else "int32"}
        listed.append({"id": case["id"], "dir": case["dir"], "feeds": feeds,
                       "runs": case.get("runs", 1), "variables": list(case.get("variables", {})),
                       "profile": case.get("profile", False),
                       "page": case.get("page", False), "pageQuery": case.get("page_query", ""),
                       "guards": case.get("guards", ""),
                       "loadOptions": case.get("load_options", {})})
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"cases": listed}, f)
    shutil.copy(HARNESS, os.path.join(root, "harness.html"))
    messages = serve_and_open(root, "harness.html", config, timeout)
    results = {"info": {}}
    by_id = {c["id"]: c for c in cases}
    for case in cases:
        results[case["id"]] = {"outputs": [{} for _ in range(case.get("runs", 1))],
                               "variables": {}, "error": None, "profile": None,
                               "page": None, "reads": None, "guards": None,
                               "timings": None, "variant": None,
                               "reload": {}}
    for query, body in messages:
        kind = query.get("kind")
        if kind == "info":
            results["info"] = json.loads(body)
        elif kind == "fatal":
            raise RuntimeError(f"the harness page failed ({config}): {body.decode()}")
        elif kind in ("out", "var", "reload"):
            case = by_id[query["case"]]
            spec = case["variables"] if kind == "var" else case["outputs"]
            shape, dtype = spec[query["name"]]
            array = np.frombuffer(body, _DTYPES[dtype]).reshape(shape)
            array = array.astype(bool) if dtype == "bool" else array.copy()
            if kind == "out":
                results[case["id"]]["outputs"][int(query["run"])][query["name"]] = array
            elif kind == "reload":
                results[case["id"]]["reload"].setdefault(query["when"], {})[query["name"]] = array
            else:
                results[case["id"]]["variables"][query["name"]] = array
        elif kind == "error":
            results[query["case"]]["error"] = body.decode(errors="replace")
        elif kind in ("profile", "page", "reads", "guards", "timings", "variant"):
            results[query["case"]][kind] = json.loads(body)
    return results
