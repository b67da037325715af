# Every target creates .venv on a bare machine and installs into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.installed
TORCH_CONSTRAINTS ?= constraints.txt
# The model tier needs torchvision, which imports only with the torch in TV_CONSTRAINTS,
# so it gets a venv of its own.
TV_VENV := .venv-tv
TV_PY := $(TV_VENV)/bin/python
TV_PIP := $(TV_PY) -m pip --disable-pip-version-check -q
TV_STAMP := $(TV_VENV)/.installed
TV_CONSTRAINTS ?= constraints-2.14.txt

.PHONY: venv venv-tv demo test test-2.14 test-opinfo test-models test-models-ci test-all bench bench-zoo bench-meta lint typecheck docs clean test-torch

$(STAMP): pyproject.toml $(TORCH_CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c $(TORCH_CONSTRAINTS) "torch" 2>&1 | grep -v "is ignored: it is neither" || true
	$(PIP) install -c $(TORCH_CONSTRAINTS) -e ".[dev]" 2>&1 | grep -v "is ignored: it is neither" || true
	$(PY) -c "import torch, onnx, onnx_ir, onnxruntime, pt2onnx; print('torch', torch.__version__, 'onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__)"
	touch $(STAMP)

venv: $(STAMP)

$(TV_STAMP): pyproject.toml $(TV_CONSTRAINTS)
	$(PYTHON) -m venv $(TV_VENV)
	$(TV_PIP) install -c $(TV_CONSTRAINTS) "torch" "torchvision" 2>&1 | grep -v "is ignored: it is neither" || true
	$(TV_PIP) install -c $(TV_CONSTRAINTS) -e ".[dev,models]" 2>&1 | grep -v "is ignored: it is neither" || true
	$(TV_PY) -c "import torch, torchvision, onnx, onnxruntime, pt2onnx; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'onnxruntime', onnxruntime.__version__)"
	touch $(TV_STAMP)

venv-tv: $(TV_STAMP)

demo: $(STAMP)
	$(PY) -m pt2onnx demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not models and not slow" tests

# The full OpInfo sweep (tests/rules/test_opinfo.py, slow tier); long, not part of `make test`.
test-opinfo: $(STAMP)
	$(PY) -m pytest -q -n 2 -m slow tests/rules

test-models: $(TV_STAMP)
	$(TV_PY) -m pytest -q -m models tests

# The second CI leg: the same fast tier on torch 2.14.1 (the torchvision venv).
test-2.14: $(TV_STAMP)
	$(TV_PY) -m pytest -q -n 2 -m "not models and not slow" tests

# A small, representative part of the model tier, for CI: torchvision CNNs and a
# transformer, timm resnet18, HF encoders (the *bert* family), llama with and
# without its cache, and whisper.
MODELS_CI ?= resnet18 or mobilenet_v2 or swin_t or bert or llama or whisper or fasterrcnn_mobilenet_v3_large_320_fpn or nms or roi_align
test-models-ci: $(TV_STAMP)
	$(TV_PY) -m pytest -q -n 2 -m "models and not slow" tests/models -k "$(MODELS_CI)"

# The fast tier on any torch release, in a venv of its own that tools/mkvenv.sh builds
# (or reuses) from the constraints file pinning that release: make test-torch VERSION=2.15.0
VERSION ?=
EXTRAS ?= dev
FAST := -m "not models and not slow" tests
test-torch:
	@test -n "$(VERSION)" || { echo "usage: make test-torch VERSION=X.Y.Z" >&2; exit 2; }
	venv=$$(tools/mkvenv.sh $(VERSION) $(EXTRAS)) && \
	PYTHONPATH=$(CURDIR)/src $$venv/bin/python -m pytest -q -n 2 $(FAST)

# Benchmarks print ratios against torch.onnx.export(dynamo=True); they never pass or fail on time.
bench: $(STAMP)
	$(PY) benchmarks/compare_export.py
	$(PY) benchmarks/scaling.py

bench-zoo: $(STAMP)
	$(PY) benchmarks/zoo_compare.py

bench-meta: $(STAMP)
	$(PY) benchmarks/meta_export.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

docs: $(STAMP)
	$(PY) -m pt2onnx ops --markdown > docs/ops.md

clean:
	rm -rf $(VENV) $(TV_VENV) build dist .pytest_cache
