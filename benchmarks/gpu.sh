#!/usr/bin/env bash
# The benchmark on an NVIDIA GPU, headless: EGL's device platform, no display server.
#
#     benchmarks/gpu.sh [out-dir [bench.py options]]     (default out-dir: out/gpu)
#
# Makes the venv (make install), prints `fragflow info` (it must name the GPU, not
# llvmpipe), runs the GL tests, then the benchmark; writes out-dir/bench.json and
# out-dir/bench.md (the table for the README, beside the llvmpipe one).
# FRAGFLOW_GPU_ALLOW_SOFTWARE=1 runs it on a software renderer too (to try the script).
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
make install
.venv/bin/fragflow info | tee "$out/info.txt"
if grep -qi "llvmpipe\|softpipe\|swrast" "$out/info.txt" && \
        [ -z "${FRAGFLOW_GPU_ALLOW_SOFTWARE:-}" ]; then
    echo "gpu.sh: the GL context is a software renderer, not the GPU (see above);" \
         "is the NVIDIA driver's EGL (libEGL_nvidia) installed?" >&2
    exit 1
fi

.venv/bin/python -m pytest -q -p no:cacheprovider tests/ops tests/runtime tests/frontend \
    tests/models tests/autodiff/test_manual_training.py > "$out/tests.txt" 2>&1 \
    || echo "gpu.sh: some GL tests FAILED on this GPU (see $out/tests.txt)" >&2
tail -3 "$out/tests.txt"

# torch (when installed) is imported by the benchmark before fragflow's context.
.venv/bin/python benchmarks/bench.py --json "$out/bench.json" "$@" | tee "$out/bench.md"
echo "gpu.sh: table in $out/bench.md, figures in $out/bench.json"
