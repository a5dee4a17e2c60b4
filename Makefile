# The two set-up commands: `make demo` and `make test`. Each creates or reuses .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): setup.cfg pyproject.toml requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip install -q -e .
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup

lint: $(STAMP)
	$(VENV)/bin/ruff check flor tests examples benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/bench_runtime.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache
