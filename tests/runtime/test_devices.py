"""GL devices: ff.devices() (EGL enumeration), Session(device=i), FRAGFLOW_DEVICE, and the
one-context-per-process rule. The environment-variable cases run in subprocesses: the
device is fixed by a process's first context."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fragflow as ff
from fragflow.runtime.context import egl_devices


def _software_index():
    found = ff.devices()
    software = [d for d in found if d.software]
    if not software:
        pytest.skip("EGL lists no software device here (no Mesa llvmpipe device)")
    return found, software[0].index


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=120)


def test_devices_lists_llvmpipe_as_software(gl):
    found, index = _software_index()
    device = found[index]
    assert "llvmpipe" in device.renderer
    assert device.software and device.error == ""
    assert device.driver and device.vendor
    assert [d.index for d in found] == list(range(len(found)))
    assert sum(d.default for d in found) == 1


def test_device_zero_runs_like_numpy(gl):
    _, index = _software_index()
    if ff.gl_info()["device"] != index:
        pytest.skip("this process's context is on another device")
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 5), "float32", name="x")
        y = ff.relu(x * 2.0 - 1.0)
    xb = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    got = ff.Session(g, device=index).run(y, {x: xb})
    want = ff.Session(g, backend="numpy", passes=[]).run(y, {x: xb})
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_bad_index_names_the_devices(gl):
    found, _ = _software_index()
    g = ff.Graph()
    with pytest.raises(ff.BackendError) as err:
        ff.Session(g, device=len(found) + 3)
    message = str(err.value)
    assert f"no device {len(found) + 3}" in message
    assert all(d.renderer in message for d in found)


def test_non_integer_device_is_refused(gl):
    with pytest.raises(ff.BackendError, match="not a device index"):
        ff.Session(ff.Graph(), device="gpu0")


def test_fragflow_device_is_honoured():
    proc = _run("""
        import fragflow as ff, numpy as np
        g = ff.Graph()
        with g.as_default():
            x = ff.placeholder((2, 3), "float32", name="x")
            y = x + 1.0
        out = ff.Session(g).run(y, {x: np.zeros((2, 3), np.float32)})
        info = ff.gl_info()
        print(info["device"], "|", info["detail"], "|", float(out.sum()))
    """, FRAGFLOW_DEVICE="0")
    if "no device" in proc.stderr or "lists no devices" in proc.stderr:
        pytest.skip(f"no EGL device 0 here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    device, detail, total = proc.stdout.strip().split(" | ")
    assert device == "0" and "EGL device 0" in detail and float(total) == 6.0


def test_bad_fragflow_device_says_which_variable():
    proc = _run("import fragflow as ff; ff.Session(ff.Graph())", FRAGFLOW_DEVICE="99")
    assert proc.returncode != 0
    assert "FRAGFLOW_DEVICE=99" in proc.stderr and "no device 99" in proc.stderr


def test_second_device_in_one_process_is_refused():
    """One process, one context: the first Session fixes the device. With only one device
    here, 'another device' is checked against a context claiming index 0 and a device
    list faked to hold two."""
    from fragflow.runtime.context import check_device

    class FakeContext:
        device_index, backend = 0, "egl"

        def info(self):
            return {"renderer": "first GPU"}

    two = [egl_devices.RawDevice(0, 0, False, "", 0), egl_devices.RawDevice(1, 0, False, "", 1)]
    original = egl_devices.enumerate_devices
    egl_devices.enumerate_devices = lambda lib: two
    try:
        check_device(FakeContext(), 0)                 # the same device: fine
        with pytest.raises(ff.BackendError, match="already open on device 0") as err:
            check_device(FakeContext(), 1)
        assert "another process" in str(err.value)
    except ff.BackendError as exc:
        if "cannot load" in str(exc):
            pytest.skip(f"no libEGL: {exc}")
        raise
    finally:
        egl_devices.enumerate_devices = original


@pytest.mark.parametrize("visible, want", [
    (None, [0, 1, 2]),           # unrestricted: EGL's order
    ("2,0", [2, 0]),             # CUDA_VISIBLE_DEVICES order, others left out
    ("", []),                    # no GPU: the software device is the default
    ("1,-1,2", [1]),             # CUDA stops at the first invalid ordinal
    ("GPU-0b1c", [0, 1, 2]),     # UUIDs: not mappable, unrestricted
])
def test_cuda_visible_devices_orders_the_default(monkeypatch, visible, want):
    gpus = [egl_devices.RawDevice(i, 0, False, f"/dev/dri/card{i}", i) for i in range(3)]
    software = egl_devices.RawDevice(3, 0, True, "", None)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    order = egl_devices.default_hardware_order(gpus + [software])
    assert [d.cuda_device for d in order] == want
    assert egl_devices.default_index(gpus + [software]) == (want[0] if want else 3)


def test_info_devices_cli_prints_them():
    proc = _run("from fragflow.tools.cli import main; "
                "raise SystemExit(main(['info', '--devices']))")
    assert proc.returncode == 0, proc.stderr
    if "lists no devices" not in proc.stdout:
        assert "llvmpipe" in proc.stdout or "GPU" in proc.stdout
        assert proc.stdout.count("*") >= 1
