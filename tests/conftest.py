"""Shared test setup: the verifier runs after every pass, and helpers that run one
graph on GL and on the numpy reference executor."""
import os
import shutil

os.environ.setdefault("FRAGFLOW_VERIFY", "1")
# A second, strict GLSL compiler checks every shader the suite generates (where it is
# installed: .ci/run installs glslang-tools), so shaders llvmpipe accepts but a GPU
# driver would reject fail here.
if shutil.which("glslangValidator"):
    os.environ.setdefault("FRAGFLOW_VALIDATE_SHADERS", "1")
# Tests must not litter the user's cache: Mesa's shader cache goes to a temp dir unless
# the caller chose one.
os.environ.setdefault("FRAGFLOW_CACHE_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), "fragflow-test-cache"))

import pytest  # noqa: E402

import fragflow as ff  # noqa: E402


def gl_available() -> bool:
    try:
        from fragflow.runtime.device import Device
        Device.get()
        return True
    except ff.BackendError:
        return False


# FRAGFLOW_REQUIRE_GL=1 (.ci/run sets it): a machine that cannot make a GL context fails
# the GL tests instead of skipping half of the suite and staying green.
REQUIRE_GL = os.environ.get("FRAGFLOW_REQUIRE_GL", "") not in ("", "0")


@pytest.fixture(scope="session")
def gl():
    """Skip (with the reason) where no GL context can be made; fail instead under
    FRAGFLOW_REQUIRE_GL=1."""
    try:
        from fragflow.runtime.device import Device
        return Device.get()
    except ff.BackendError as err:
        if REQUIRE_GL:
            pytest.fail(f"FRAGFLOW_REQUIRE_GL is set but no OpenGL context can be made: {err}",
                        pytrace=False)
        pytest.skip(f"no OpenGL context: {err}")
