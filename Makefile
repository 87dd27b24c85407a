# Two entry points for a fresh machine:
#   make demo   set everything up, build the example library, scan it, then scan a real wheel
#   make test   set everything up and run every test (the same command CI runs)
#   make story  keygen, build the example backend, migrate triton, install both with the runtime
#               into build/story/venv, trust the key, print doctor
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo story test test-quick lint bench clean wheelhouse fuzz

$(STAMP): pyproject.toml runtime/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e 'runtime[sigstore]' -e '.[test,repair,init,sigstore]'
	touch $(STAMP)

setup: $(STAMP)

# Both distributions as wheels and sdists in dist/, built as a release would be (isolated),
# checked with twine. A vendor's isolated build then finds them: PIP_FIND_LINKS=$$PWD/dist.
wheelhouse: setup
	rm -rf dist
	$(BIN)/python -m build --outdir dist runtime
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

demo: setup
	mkdir -p build/demo
	gcc -shared -fPIC -O1 -Wl,--build-id -o build/demo/libdemo_plugin.so tests/csrc/plugin_v2.c
	$(BIN)/backend-packager scan build/demo/libdemo_plugin.so
	$(BIN)/python -c "import sys; sys.path.insert(0, 'bench'); from _wheels import fetch_wheel; print(fetch_wheel('triton==3.9.0'))" > build/demo/wheel-path
	$(BIN)/backend-packager scan $$(cat build/demo/wheel-path)

STORY := build/story

story: setup
	rm -rf $(STORY) && mkdir -p $(STORY)
	$(BIN)/backend-packager keygen -o $(STORY)/vendor.pem --comment "story vendor"
	BACKEND_PACKAGER_SIGNING_KEY=$(CURDIR)/$(STORY)/vendor.pem $(BIN)/python -m build --no-isolation --wheel -o $(STORY)/dist examples/setuptools_backend
	$(BIN)/python -m build --wheel -o $(STORY)/dist runtime
	$(BIN)/backend-packager migrate $$($(BIN)/python -c "import sys; sys.path.insert(0, 'bench'); from _wheels import fetch_wheel; print(fetch_wheel('triton==3.9.0'))") -o $(STORY)/signed --key $(STORY)/vendor.pem
	$(PYTHON) -m venv $(STORY)/venv
	$(STORY)/venv/bin/python -m pip install --quiet --no-deps $(STORY)/signed/triton-*.whl $(STORY)/dist/*.whl
	$(STORY)/venv/bin/python -m pip install --quiet packaging cryptography
	$(STORY)/venv/bin/python -m triton_backend_runtime trust add $(STORY)/vendor.pub
	$(STORY)/venv/bin/python -m triton_backend_runtime hook install
	TRITON_BACKEND_POLICY=strict $(STORY)/venv/bin/python -m triton_backend_runtime doctor

lint: setup
	$(BIN)/ruff check backend_packager runtime tests bench
	$(BIN)/mypy

# The two halves run side by side: the quick suite keeps one core busy, the real-wheel tests
# wait on pip, builds and I/O; serially they took about 15 minutes on 2 cores. The real half's
# output follows the quick half's; either failing fails the target.
test: setup lint
	@mkdir -p build/test
	@$(BIN)/pytest -q -p no:cacheprovider -m triton_wheel > build/test/real.log 2>&1 & real=$$!; \
	$(BIN)/pytest -q -m "not triton_wheel"; quick=$$?; \
	wait $$real; status=$$?; echo "== tests marked triton_wheel (real wheels) =="; cat build/test/real.log; \
	test $$quick -eq 0 && test $$status -eq 0

# make fuzz [FUZZ_SECONDS=600]: hypothesis fuzz targets in rounds with new seeds, then a report
# (runs, failing seeds, runs over 10 s, peak memory). make test runs a small slice of each.
FUZZ_SECONDS ?= 600
fuzz: setup
	$(BIN)/python tests/run_fuzz.py --seconds $(FUZZ_SECONDS)

# Two workers (pytest-xdist): the quick suite is mostly subprocesses of a few hundred ms each.
# `make test` runs it in one process beside the real-wheel half (the fork tests need one thread).
test-quick: setup
	$(BIN)/pytest -q -m "not triton_wheel" -n 2

bench: setup
	$(BIN)/python bench/bench_scan.py
	$(BIN)/python bench/bench_build.py
	$(BIN)/python bench/bench_migrate.py
	$(BIN)/python bench/bench_adopt.py
	$(BIN)/python bench/bench_mirror.py
	$(BIN)/python bench/bench_runtime.py
	$(BIN)/python bench/bench_verify.py

clean:
	rm -rf $(VENV) build dist
