# Every target creates .venv on a bare machine and installs into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.installed
TORCH_CONSTRAINTS ?= constraints.txt
# Other torch releases get venvs of their own from tools/mkvenv.sh (.venvs/, or
# $$PT2ONNX_VENV_CACHE): deps only, pt2onnx runs from src/. The model tier needs
# torchvision, which imports only beside the torch pinned with it in constraints-2.14.txt.
TV_VERSION ?= 2.14.1
# The newest torch of the matrix (no torchvision for it): the Hugging Face model cases.
NEW_VERSION ?= 2.15.0
MKVENV := tools/mkvenv.sh
IN_SRC := PYTHONPATH=$(CURDIR)/src
FAST := -m "not models and not slow" tests

.PHONY: fuzz fuzz-compare venv demo test test-slow test-cpu-default test-newest test-llm bench-llm test-torch test-2.14 test-opinfo test-models test-models-ci test-models-hf bench bench-vision bench-cold bench-memory bench-downstream bench-zoo bench-meta lint typecheck docs clean

$(STAMP): pyproject.toml $(TORCH_CONSTRAINTS) constraints-deps.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c $(TORCH_CONSTRAINTS) "torch" 2>&1 | grep -v "is ignored: it is neither" || true
	$(PIP) install -c $(TORCH_CONSTRAINTS) -e ".[dev]" 2>&1 | grep -v "is ignored: it is neither" || true
	$(PY) -c "import torch, onnx, onnx_ir, onnxruntime, pt2onnx; print('torch', torch.__version__, 'onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__)"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m pt2onnx demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2 $(FAST)

# The fast tier on torch's unvectorized CPU kernels (CI runs both): no test may depend
# on the CPU's vector width (docs/testing.md).
test-cpu-default: $(STAMP)
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -q -n 2 $(FAST)

# The fast tier on any torch release: make test-torch VERSION=2.15.0. tools/mkvenv.sh
# builds (or reuses) a venv from the constraints file pinning that release, or from
# constraints.txt with only torch changed.
VERSION ?=
EXTRAS ?= dev
test-torch:
	@test -n "$(VERSION)" || { echo "usage: make test-torch VERSION=X.Y.Z" >&2; exit 2; }
	venv=$$($(MKVENV) $(VERSION) $(EXTRAS)) && $(IN_SRC) $$venv/bin/python -m pytest -q -n 2 $(FAST)

# The slow tier outside the OpInfo sweep and the model zoo: the fast tier's slowest tests
# (tests/slow_tests.txt, marked by tests/conftest.py) and the other `slow` tests.
test-slow: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "slow and not models" tests --ignore=tests/rules

# The full OpInfo sweep (tests/rules/test_opinfo.py, slow tier); long, not part of `make test`.
test-opinfo: $(STAMP)
	$(PY) -m pytest -q -n 2 -m slow tests/rules

test-models:
	venv=$$($(MKVENV) $(TV_VERSION) dev,models) && $(IN_SRC) $$venv/bin/python -m pytest -q -m models tests

# The fast tier on torch 2.14.1, in the model tier's venv.
test-2.14:
	$(MAKE) --no-print-directory test-torch VERSION=$(TV_VERSION) EXTRAS=dev,models

# A small, representative part of the model tier, for CI: torchvision CNNs and a
# transformer, timm resnet18, HF encoders (the *bert* family), llama with and
# without its cache, and whisper.
MODELS_CI ?= resnet18 or mobilenet_v2 or swin_t or bert or llama or whisper or fasterrcnn_mobilenet_v3_large_320_fpn or nms or roi_align
test-models-ci:
	venv=$$($(MKVENV) $(TV_VERSION) dev,models) && \
	$(IN_SRC) $$venv/bin/python -m pytest -q -n 2 -m "models and not slow" tests/models -k "$(MODELS_CI)"

# The Hugging Face cases of that subset on the newest torch (and onnxruntime, see
# constraints-2.15.txt), where no torchvision exists.
MODELS_HF_CI ?= bert or llama or whisper
test-models-hf:
	venv=$$($(MKVENV) $(NEW_VERSION) dev) && \
	$(IN_SRC) $$venv/bin/python -m pytest -q -n 2 -m "models and not slow" tests/models/test_hf_zoo.py -k "$(MODELS_HF_CI)"

# The canary: the newest release of every dependency (torch, onnxruntime, transformers,
# onnx, onnx-ir, onnxscript, onnxruntime-genai, ...), none of constraints-deps.txt's pins:
# the fast tier, the Hugging Face subset and export-llm's tests. When a new release breaks
# it, that fix comes first (docs/compatibility.md records what it last passed on).
# The parts that follow the unpinned libraries most (transformers, onnxruntime-genai) run
# first, the fast tier last: in CI the canary gets only what is left of the time budget.
test-newest:
	venv=$$($(MKVENV) newest dev,llm) && $(IN_SRC) $$venv/bin/python -m pt2onnx doctor && \
	$(IN_SRC) $$venv/bin/python -m pytest -q -n 2 -m "models and not slow" tests/models/test_hf_zoo.py -k "$(MODELS_HF_CI)" && \
	$(IN_SRC) $$venv/bin/python -m pytest -q -n 2 tests/test_export_llm.py tests/test_llm_stamp.py tests/test_llm_fused.py tests/test_llm_meta.py tests/test_llm_whisper.py tests/test_llm_hybrid.py tests/test_llm_vlm.py && \
	$(IN_SRC) $$venv/bin/python -m pytest -q -n 2 $(FAST)

# export-llm: every decoder family through onnxruntime-genai's generation loop (the llm
# extra; without it these tests skip), on the dev pins.
LLM_TORCH ?= 2.13.0
test-llm:
	venv=$$($(MKVENV) $(LLM_TORCH) dev,llm) && $(IN_SRC) $$venv/bin/python -m pytest -q -n 2 tests/test_export_llm.py tests/test_llm_stamp.py tests/test_llm_fused.py tests/test_llm_meta.py tests/test_llm_whisper.py tests/test_llm_hybrid.py tests/test_llm_vlm.py

# export-llm against onnxruntime-genai's model builder: export time, size, ms per token.
bench-llm:
	venv=$$($(MKVENV) $(LLM_TORCH) dev,llm) && $(IN_SRC) $$venv/bin/python benchmarks/llm_compare.py

# Benchmarks print ratios against torch.onnx.export(dynamo=True); they never pass or fail on time.
bench: $(STAMP)
	$(PY) benchmarks/compare_export.py
	$(PY) benchmarks/scaling.py

# YOLO11n and a diffusers UNet against torch.onnx and the TorchScript exporter; ultralytics
# needs torchvision, so this runs in the model tier's venv (torch $(TV_VERSION)).
bench-vision:
	venv=$$($(MKVENV) $(TV_VERSION) dev,models,bench) && $(IN_SRC) $$venv/bin/python \
	  benchmarks/compare_export.py --models yolo11n unet --baselines torch.onnx,torchscript --repeat 3

# Import + export in fresh processes, resnet50 against both torch.onnx exporters (issue 41).
bench-cold:
	venv=$$($(MKVENV) $(TV_VERSION) dev,models,bench) && $(IN_SRC) $$venv/bin/python \
	  benchmarks/cold_start.py --models resnet50 yolo11n

# Peak RSS above the eager pass, pt2onnx against torch.export alone and dynamo, one fresh
# process per model and exporter (issue 41; docs/performance.md). Rows whose model does not
# fit the free memory are skipped and say so.
bench-memory:
	venv=$$($(MKVENV) $(TV_VERSION) dev,models) && $(IN_SRC) $$venv/bin/python \
	  benchmarks/memory_table.py

# The tools people run after exporting, on pt2onnx's and torch.onnx's files (docs/compatibility.md).
bench-downstream:
	venv=$$($(MKVENV) $(TV_VERSION) dev,models) && $(IN_SRC) $$venv/bin/python \
	  benchmarks/downstream_tools.py

# Differential fuzzing against eager PyTorch (docs/testing.md): make fuzz N=20000 SEED=1.
# Failures (checker, runtime, mismatch) are minimized into $(FUZZ_CORPUS); a triaged one
# moves to tests/fuzz/corpus/, where it becomes a regression test. fuzz-compare runs the
# same programs through torch.onnx (dynamo) too, as a comparison (every EVERY-th program:
# torch.onnx takes about 4x pt2onnx's time per program). JOBS child processes check
# programs at once; a program that crashes its process counts as a runtime failure.
N ?= 1000
SEED ?= 1
JOBS ?= 2
EVERY ?= 1
FUZZ_CORPUS ?= build/fuzz-corpus
fuzz: $(STAMP)
	$(PY) -m pt2onnx.testing.fuzz --seed $(SEED) --count $(N) --jobs $(JOBS) --progress 1000 \
	  --log build/fuzz-failures.jsonl --save-corpus $(FUZZ_CORPUS) --json

fuzz-compare: $(STAMP)
	$(PY) -m pt2onnx.testing.fuzz --seed $(SEED) --count $(N) --jobs $(JOBS) --progress 1000 \
	  --exporter pt2onnx,torch.onnx --compare-every $(EVERY) --json

bench-zoo: $(STAMP)
	$(PY) benchmarks/zoo_compare.py

bench-meta: $(STAMP)
	$(PY) benchmarks/meta_export.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

docs: $(STAMP)
	$(PY) -m pt2onnx ops --markdown > docs/ops.md

clean:
	rm -rf $(VENV) .venvs build dist .pytest_cache
