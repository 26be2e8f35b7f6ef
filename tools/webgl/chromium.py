"""Headless Chromium on this machine, for the WebGL tests and `make bench-browser`: serve
a folder on 127.0.0.1 (a free port; ES modules do not load from file://), open a page in
it, and collect what the page POSTs to /post?kind=... until it posts kind=done.

Two rasterisers (CONFIGS): SwiftShader (ANGLE over SwiftShader's Vulkan) and Mesa
(ANGLE over EGL, llvmpipe without a GPU). No network beyond the loopback server: the
flags turn off Chromium's own background traffic."""
from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import time
from urllib.parse import parse_qs, urlparse

CONFIGS = {
    "swiftshader": ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    "mesa": ["--use-angle=gl-egl"],
}
# a WebGPU adapter in headless Chromium without a GPU: SwiftShader's Vulkan
WEBGPU_FLAGS = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader",
                "--enable-features=Vulkan"]
FLAGS = ["--headless=new", "--no-sandbox", "--use-gl=angle", "--ignore-gpu-blocklist",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-extensions",
         "--disable-default-apps", "--mute-audio"]


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
        if self.server.on_message is not None:
            self.server.on_message(query, body)
        if query.get("kind") in ("done", "fatal"):
            self.server.finished.set()

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def serve_and_open(root: str, page: str, config: str, timeout: float = 120.0,
                   flags=(), on_message=None) -> list:
    """Open http://127.0.0.1:PORT/page (files from root) in headless Chromium with the
    config's flags and `flags` (e.g. WEBGPU_FLAGS); returns [(query dict, body bytes)]
    the page posted. on_message(query, body), if given, sees each message as it comes
    (from the server's thread: progress for long pages)."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    handler = lambda *a, **k: _Collector(*a, directory=root, **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.messages, server.finished = [], threading.Event()
    server.on_message = on_message
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    profile = tempfile.mkdtemp(prefix="fragflow-chromium-")
    url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
    log = open(os.path.join(profile, "stderr.txt"), "wb")
    # a first run must compile: Mesa's on-disk shader cache (which ANGLE's GL-EGL backend
    # goes through) lives in the fresh profile, not in the user's ~/.cache
    env = dict(os.environ, MESA_SHADER_CACHE_DIR=os.path.join(profile, "mesa-cache"))
    process = subprocess.Popen([browser, *FLAGS, *CONFIGS[config], *flags,
                                f"--user-data-dir={profile}", url],
                               stdout=subprocess.DEVNULL, stderr=log, env=env)
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
