# Every target creates .venv on a bare machine and installs into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.installed
TORCH_CONSTRAINTS ?= constraints.txt

.PHONY: venv demo test test-models test-all bench lint typecheck docs clean

$(STAMP): pyproject.toml $(TORCH_CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c $(TORCH_CONSTRAINTS) "torch" 2>&1 | grep -v "is ignored: it is neither" || true
	$(PIP) install -c $(TORCH_CONSTRAINTS) -e ".[dev]" 2>&1 | grep -v "is ignored: it is neither" || true
	$(PY) -c "import torch, onnx, onnx_ir, onnxruntime, pt2onnx; print('torch', torch.__version__, 'onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__)"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m pt2onnx demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not models and not slow" tests

test-models: $(STAMP)
	$(PY) -m pytest -q -m models tests

bench: $(STAMP)
	$(PY) benchmarks/compare_export.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

docs: $(STAMP)
	$(PY) -m pt2onnx ops --markdown > docs/ops.md

clean:
	rm -rf $(VENV) build dist .pytest_cache
