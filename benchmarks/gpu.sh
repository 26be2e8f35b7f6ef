#!/usr/bin/env bash
# The benchmark on an NVIDIA GPU, headless: EGL's device platform, no display server.
#
#     benchmarks/gpu.sh [out-dir [bench.py options]]     (default out-dir: out/gpu)
#
# Makes the venv (make install; offline, an installed python), prints `fragflow info` (it must name the GPU, not
# llvmpipe), runs the GL tests, then the benchmark; writes out-dir/bench.json and
# out-dir/bench.md (the table for the README, beside the llvmpipe one).
# FRAGFLOW_GPU_ALLOW_SOFTWARE=1 runs it on a software renderer too (to try the script);
# FRAGFLOW_GPU_NO_INSTALL=1 PYTHON=... skips make install; GPU_TESTS picks test paths.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/gpu}
shift || true
mkdir -p "$out"

# No display: fragflow's EGL backend tries GPU devices (EGL_EXT_platform_device) first.
unset DISPLAY WAYLAND_DISPLAY
export FRAGFLOW_GL=egl
# glvnd finds NVIDIA's EGL through its vendor file; point at it when it is not the default.
nvidia_vendor=/usr/share/glvnd/egl_vendor.d/10_nvidia.json
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f "$nvidia_vendor" ]; then
    export __EGL_VENDOR_LIBRARY_FILENAMES=$nvidia_vendor
fi

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader || echo "nvidia-smi not found"
# The venv: make install (needs the package index), else a python that already has
# fragflow's dependencies (a machine without network), with fragflow from this tree.
if [ -z "${FRAGFLOW_GPU_NO_INSTALL:-}" ] && make install; then
    py=.venv/bin/python
else
    py=${PYTHON:-python3}
    echo "gpu.sh: make install failed (no network?); using $py with PYTHONPATH" >&2
    # the view first, then the tree (for tests/); not the tree's fragflow/ (3.11+)
    export PYTHONSAFEPATH=1
    view=$PWD/$out/pythonpath
    export PYTHONPATH=$view:$PWD${PYTHONPATH:+:$PYTHONPATH}
    # fragflow's subpackages are the top-level folders: a fragflow/ view of them
    mkdir -p "$view/fragflow"
    ln -sf "$PWD/fragflow/__init__.py" "$view/fragflow/__init__.py"
    for d in ir passes codegen runtime frontend tools; do
        ln -sfn "$PWD/$d" "$view/fragflow/$d"
    done
fi
"$py" -c "import sys; from fragflow.tools.cli import main; sys.exit(main(['info']))" \
    | tee "$out/info.txt"
if grep -qi "llvmpipe\|softpipe\|swrast" "$out/info.txt" && \
        [ -z "${FRAGFLOW_GPU_ALLOW_SOFTWARE:-}" ]; then
    echo "gpu.sh: the GL context is a software renderer, not the GPU (see above);" \
         "is the NVIDIA driver's EGL (libEGL_nvidia) installed?" >&2
    exit 1
fi

# shellcheck disable=SC2086
"$py" -m pytest -q -p no:cacheprovider ${GPU_TESTS:-tests/ops tests/runtime tests/frontend \
    tests/models tests/autodiff/test_manual_training.py} > "$out/tests.txt" 2>&1 \
    || echo "gpu.sh: some GL tests FAILED on this GPU (see $out/tests.txt)" >&2
tail -3 "$out/tests.txt"

# torch (when installed) is imported by the benchmark before fragflow's context.
"$py" benchmarks/bench.py --json "$out/bench.json" "$@" | tee "$out/bench.md"
echo "gpu.sh: table in $out/bench.md, figures in $out/bench.json"
