# depthport: `make demo` runs the main job end to end; `make test` runs the tests.
# Both create the virtual environment at .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo-out

# pip installs without compiling bytecode (--no-compile: it would compile all 24,000 modules of the venv, 95 s of a
# 151 s install on 2 cores); Python then writes each module's bytecode the first time it is imported, about 6,500
# for the whole test suite. Allowed here even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1):
# without it every process would compile torch's modules again in memory (~30 s instead of ~10 s to import).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv demo test gpu-setup web-setup bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and exact: a range would pull a multi-GB CUDA build
	$(BIN)/pip install -q --no-compile torch==2.13.0
	$(BIN)/pip install -q --no-compile -c constraints.txt -e '.[test]'
	$(BIN)/pip install -q --no-compile --no-deps -c constraints.txt depth-anything-3
	touch $(STAMP)

# Under CI (CI=true) or DEPTHPORT_REQUIRE_GPU=1 a failed SwiftShader setup fails the run: the accelerator
# tests may not skip there. Elsewhere they skip, and `pytest -rs` names why.
gpu-setup:
	@if bash scripts/setup_swiftshader.sh; then :; \
	elif [ "$${CI:-}" = true ] || [ "$${DEPTHPORT_REQUIRE_GPU:-}" = 1 ]; then \
		echo "SwiftShader setup failed: the GPU-accelerator tests cannot run (CI=true / DEPTHPORT_REQUIRE_GPU=1)" >&2; exit 1; \
	else echo "SwiftShader setup failed: GPU-accelerator tests will be skipped (see -rs below)"; fi

# The browser target's tests: Debian's chromium (apt, as root), the pinned npm runtimes (npm ci of
# src/depthport/web/npm/package-lock.json) and Playwright (pinned in the test extras). Under CI a failed setup
# fails the run: the browser tests may not skip there.
web-setup:
	@if bash scripts/setup_web.sh; then :; \
	elif [ "$${CI:-}" = true ] || [ "$${DEPTHPORT_REQUIRE_GPU:-}" = 1 ]; then \
		echo "browser setup failed: the browser tests cannot run (CI=true / DEPTHPORT_REQUIRE_GPU=1)" >&2; exit 1; \
	else echo "browser setup failed: browser tests will be skipped (see -rs below)"; fi

demo: venv
	$(BIN)/depthport export da2-small --fallback-random --size 518x686 --targets litert-fp32 --out $(DEMO_OUT)
	$(BIN)/depthport predict $(DEMO_OUT)/da2_small_fp32.tflite src/depthport/assets/chelsea.jpg \
		-o $(DEMO_OUT)/chelsea_depth.png --npy $(DEMO_OUT)/chelsea_depth.npy

test: venv gpu-setup web-setup
	$(BIN)/python -m pytest -q -rs -n 2 --dist loadfile --no-loadscope-reorder

clean:
	rm -rf $(DEMO_OUT) .pytest_cache
