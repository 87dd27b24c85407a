# Two entry points for a fresh machine:
#   make demo   set everything up, build the example library, scan it, then scan a real wheel
#   make test   set everything up and run every test (the same command CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-quick lint bench clean

$(STAMP): pyproject.toml runtime/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e runtime -e '.[test,repair]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	mkdir -p build/demo
	gcc -shared -fPIC -O1 -Wl,--build-id -o build/demo/libdemo_plugin.so tests/csrc/plugin_v2.c
	$(BIN)/backend-packager scan build/demo/libdemo_plugin.so
	$(BIN)/python -c "import sys; sys.path.insert(0, 'bench'); from _wheels import fetch_wheel; print(fetch_wheel('triton==3.9.0'))" > build/demo/wheel-path
	$(BIN)/backend-packager scan $$(cat build/demo/wheel-path)

lint: setup
	$(BIN)/ruff check backend_packager runtime tests bench
	$(BIN)/mypy

test: setup lint
	$(BIN)/pytest -q

test-quick: setup
	$(BIN)/pytest -q -m "not triton_wheel"

bench: setup
	$(BIN)/python bench/bench_scan.py
	$(BIN)/python bench/bench_build.py
	$(BIN)/python bench/bench_migrate.py

clean:
	rm -rf $(VENV) build dist
