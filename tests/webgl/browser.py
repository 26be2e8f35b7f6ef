"""Headless Chromium for the WebGL tests: serve a folder on 127.0.0.1, open a page, and
collect what the page POSTs back, until it posts `done`.

Two rasterisers: SwiftShader (ANGLE over SwiftShader's Vulkan) and Mesa (ANGLE over
EGL, on llvmpipe here). One launch runs many models: the page (harness.html) loads
each export listed in cases.json in turn."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from urllib.parse import parse_qs, urlparse

import numpy as np

CONFIGS = {
    "swiftshader": ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    "mesa": ["--use-angle=gl-egl"],
}
FLAGS = ["--headless=new", "--no-sandbox", "--use-gl=angle", "--ignore-gpu-blocklist",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-extensions",
         "--disable-default-apps", "--mute-audio"]
HARNESS = os.path.join(os.path.dirname(__file__), "harness.html")


def chromium() -> str | None:
    """The browser to drive: $FRAGFLOW_CHROMIUM, else chromium on PATH."""
    return os.environ.get("FRAGFLOW_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser")


class _Collector(http.server.SimpleHTTPRequestHandler):
    """Static files from the served folder; POST /post?kind=...: one message."""

    def do_POST(self):  # noqa: N802 - http.server's name
        query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()
        self.server.messages.append((query, body))
        if query.get("kind") in ("done", "fatal"):
            self.server.finished.set()

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def serve_and_open(root: str, page: str, config: str, timeout: float = 120.0) -> list:
    """Open http://127.0.0.1:PORT/page (files from root) in headless Chromium with the
    config's flags; returns [(query dict, body bytes)] the page posted."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("no chromium")
    handler = lambda *a, **k: _Collector(*a, directory=root, **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.messages, server.finished = [], threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    profile = tempfile.mkdtemp(prefix="fragflow-chromium-")
    url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
    log = open(os.path.join(profile, "stderr.txt"), "wb")
    process = subprocess.Popen([browser, *FLAGS, *CONFIGS[config],
                                f"--user-data-dir={profile}", url],
                               stdout=subprocess.DEVNULL, stderr=log)
    try:
        start = time.monotonic()
        while not server.finished.wait(0.2):
            if process.poll() is not None:
                raise RuntimeError(f"chromium ({config}) exited with {process.returncode} "
                                   f"before the page finished; its log: {_tail(log.name)}")
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"chromium ({config}): the page did not finish in "
                                   f"{timeout:.0f} s; got {len(server.messages)} messages")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
    return list(server.messages)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-2000:].decode(errors="replace")
    except OSError:
        return ""


_DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.uint8}


def run_cases(root: str, cases: list, config: str, timeout: float = 120.0) -> dict:
    """Run exported models in one browser launch. cases: dicts with id, dir (the export's
    folder under root), feeds {name: (array, dtype)}, runs, variables, outputs
    {name: (shape, dtype)}, variable shapes {name: (shape, dtype)}. Returns
    {"info": {...}, case id: {"outputs": [{name: array} per run], "variables":
    {name: array}, "error": str or None}}."""
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
                       "page": case.get("page", False)})
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"cases": listed}, f)
    shutil.copy(HARNESS, os.path.join(root, "harness.html"))
    messages = serve_and_open(root, "harness.html", config, timeout)
    results = {"info": {}}
    by_id = {c["id"]: c for c in cases}
    for case in cases:
        results[case["id"]] = {"outputs": [{} for _ in range(case.get("runs", 1))],
                               "variables": {}, "error": None, "profile": None,
                               "page": None}
    for query, body in messages:
        kind = query.get("kind")
        if kind == "info":
            results["info"] = json.loads(body)
        elif kind == "fatal":
            raise RuntimeError(f"the harness page failed ({config}): {body.decode()}")
        elif kind in ("out", "var"):
            case = by_id[query["case"]]
            spec = case["outputs"] if kind == "out" else case["variables"]
            shape, dtype = spec[query["name"]]
            array = np.frombuffer(body, _DTYPES[dtype]).reshape(shape)
            array = array.astype(bool) if dtype == "bool" else array.copy()
            if kind == "out":
                results[case["id"]]["outputs"][int(query["run"])][query["name"]] = array
            else:
                results[case["id"]]["variables"][query["name"]] = array
        elif kind == "error":
            results[query["case"]]["error"] = body.decode(errors="replace")
        elif kind in ("profile", "page"):
            results[query["case"]][kind] = json.loads(body)
    return results
