"""A second GL implementation: Mesa's zink (OpenGL 4.6 over Vulkan; lavapipe without a
GPU), selected by LIBGL_ALWAYS_SOFTWARE=1 GALLIUM_DRIVER=zink before the process makes
its context. `make test-zink` runs a seeded sample of the suite there; these check
that `fragflow info --devices` lists it with how to select it, and that the kernel
which crashed zink's pipeline creation (mirror_pad's gradient indexing a local bool
array) runs and matches the numpy executor. Skipped where zink is not installed
(Debian: mesa-vulkan-drivers)."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from fragflow.runtime.context.egl_devices import IMPLEMENTATIONS, other_implementations

ROOT = Path(__file__).resolve().parents[2]
ZINK = IMPLEMENTATIONS["zink"]


def _zink_env() -> dict:
    # Vulkan's loader complains on stderr without a runtime directory
    runtime_dir = tempfile.mkdtemp(prefix="fragflow-xdg-")
    return {**os.environ, **ZINK, "XDG_RUNTIME_DIR": runtime_dir}


@pytest.fixture(scope="module")
def zink():
    if all(os.environ.get(k) == v for k, v in ZINK.items()):
        return None                      # this process runs on zink already
    found = {i.name: i for i in other_implementations()}
    if found["zink"].error:
        pytest.skip(f"zink is not usable here: {found['zink'].error}")
    return found["zink"]


def test_info_devices_lists_zink_and_how_to_select_it(zink):
    if zink is None:
        pytest.skip("this process runs on zink: ff.devices() lists it as the default")
    assert zink.devices and all("zink" in d.renderer for d in zink.devices)
    proc = subprocess.run([sys.executable, "-c", "from fragflow.tools.cli import main; "
                           "raise SystemExit(main(['info', '--devices']))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "zink:0" in proc.stdout
    assert "LIBGL_ALWAYS_SOFTWARE=1 GALLIUM_DRIVER=zink" in proc.stdout


def test_the_mirror_pad_gradient_runs_on_zink(zink):
    code = textwrap.dedent("""
    import json
    import numpy as np
    import fragflow as ff
    rng = np.random.default_rng(0)
    results = []
    for mode in ("REFLECT", "SYMMETRIC"):
        g = ff.Graph()
        with g.as_default():
            x = ff.placeholder((5, 6, 7), "float32", name="x")
            y = ff.pad(x, [[1, 2], [2, 1], [0, 3]], mode=mode)
            dx, = ff.gradients(ff.reduce_sum(y * y), [x])
        feed = {x: rng.standard_normal((5, 6, 7)).astype(np.float32)}
        got = ff.Session(g).run(dx, feed)
        expected = ff.Session(g, backend="numpy", passes=[]).run(dx, feed)
        results.append(float(np.max(np.abs(got - expected))))
    print(json.dumps({"renderer": ff.gl_info()["renderer"], "errors": results}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_zink_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "zink" in out["renderer"]
    assert max(out["errors"]) < 1e-5
