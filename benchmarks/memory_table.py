"""Peak memory of an export above the eager pass: pt2onnx, the torch.export path, dynamo.

Each (model, exporter) runs in a fresh process, one after another: it imports torch,
onnx, onnx_ir and onnxscript, builds the model with random weights (timm
``pretrained=False``, torchvision ``weights=None``; nothing is downloaded), runs one
eager forward under ``torch.no_grad()``, reads its resident set (the *baseline*),
resets the peak (``/proc/self/clear_refs`` 5 resets ``VmHWM``), exports once and reads
``VmHWM`` again. The figure is the peak above the baseline; the denominator of every
ratio is the model's weights (parameters and buffers, in bytes).

- ``pt2onnx``: ``pt2onnx.export(model, args, "model.onnx")`` (external data past 2 GB);
- ``torch.export``: ``torch.export.export(model, args)`` alone, the capture torch.onnx
  and pt2onnx's fallback build on (no file);
- ``dynamo``: ``torch.onnx.export(model, args, "model.onnx", dynamo=True)``.

Issue 41's bound: pt2onnx's peak above the eager pass is at most the torch.export
path's plus 5% of the weights; the ``bound`` column says whether it holds.

    python benchmarks/memory_table.py                       # the six models below
    python benchmarks/memory_table.py --models vit_large_patch16_224 swin_t
    python benchmarks/memory_table.py --exporters pt2onnx,torch.export
    python benchmarks/memory_table.py --zoo --exporters pt2onnx,torch.export
        # every torchvision and timm model of tests/models, with its tests' inputs

Before a model, the free memory (``MemAvailable``) must hold about 2.5 times its
weights (the model, the eager pass and the export); otherwise the row is
skipped and says so. This is a benchmark, not a test: nothing passes or fails here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GiB = 2**30
EXPORTERS = ("pt2onnx", "torch.export", "dynamo")
# name: input (C, H, W) or None for the model's default (timm's pretrained_cfg).
MODELS: dict[str, tuple[int, int, int] | None] = {
    "vit_giant_patch14_reg1_tipsv2": (3, 448, 448),
    "vit_giant_patch14_dinov2": None,  # 518
    "eva_giant_patch14_224": None,
    "vit_giant_patch16_sapiens2": None,  # 1024 x 768
    "vit_large_patch16_224": None,
    "swin_t": (3, 224, 224),
}
# Weights (GB, float32) to size the free-memory check before building a model.
SIZES = {"vit_giant_patch14_reg1_tipsv2": 4.6, "vit_giant_patch14_dinov2": 4.6,
         "eva_giant_patch14_224": 4.1, "vit_giant_patch16_sapiens2": 5.8,
         "vit_large_patch16_224": 1.2, "swin_t": 0.1}


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _zoo() -> tuple[Any, Any]:
    """The model tier's zoo modules (tests/models): their cases are the zoo's denominator."""
    root = Path(__file__).resolve().parent.parent / "tests"
    sys.path[:0] = [str(root), str(root / "models")]
    import test_timm_zoo  # type: ignore[import-not-found]
    import test_torchvision  # type: ignore[import-not-found]

    return test_torchvision, test_timm_zoo


def zoo_names() -> list[str]:
    """Every torchvision and timm model of the zoo, as ``tv:NAME`` / ``timm:NAME``."""
    tv, tm = _zoo()
    return ([f"tv:{n}" for n in tv.CASES] + [f"tv:{n}" for n in tv.DETECTION]
            + [f"timm:{c.name}" for c in tm.CASES])


def _build_zoo(name: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A zoo model with the zoo tests' inputs (timm's are 64x64, some built shallower)."""
    import torch

    tv, tm = _zoo()
    kind, _, model_name = name.partition(":")
    if kind == "timm":
        case = next(c for c in tm.CASES if c.name == model_name)
        model = tm.timm.create_model(model_name, pretrained=False, **case.kwargs).eval()
        return model, (torch.randn(1, 3, case.size, case.size),), {}
    if model_name in tv.DETECTION:
        model = tv.torchvision.models.get_model(model_name, weights=None,
                                                weights_backbone=None).eval()
        return model, ([torch.randn(tv.DETECTION_IMAGE)],), {}
    case = tv.CASES[model_name]
    model = tv.torchvision.models.get_model(model_name, weights=None, **case.kwargs).eval()
    return model, tuple(torch.randn(case.shape) for _ in range(case.inputs)), dict(
        case.forward_kwargs)


def _build(name: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch

    torch.manual_seed(0)
    if ":" in name:
        return _build_zoo(name)
    if name == "swin_t":
        import torchvision

        model = torchvision.models.swin_t(weights=None).eval()
        return model, (torch.randn(1, *MODELS[name] or (3, 224, 224)),), {}
    import timm

    model = timm.create_model(name, pretrained=False).eval()
    shape = MODELS[name] or tuple(model.pretrained_cfg["input_size"])
    return model, (torch.randn(1, *shape),), {}


def _export(exporter: str, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
            out: Path) -> None:
    import torch

    if exporter == "pt2onnx":
        import pt2onnx

        pt2onnx.export(model, args, out / "model.onnx", kwargs=kwargs or None)
    elif exporter == "torch.export":
        torch.export.export(model, args, kwargs=kwargs or None)
    elif exporter == "dynamo":
        torch.onnx.export(model, args, out / "model.onnx", kwargs=kwargs or None,
                          dynamo=True)
    else:
        raise SystemExit(f"unknown exporter {exporter!r}")


def _load_exporters() -> None:
    """Every exporter's code, loaded before the baseline: the figures are the export's
    data, not its modules (pt2onnx defers its imports to the first export)."""
    os.environ["PT2ONNX_EAGER_IMPORTS"] = "1"
    import onnx  # noqa: F401
    import onnx_ir  # noqa: F401
    import onnxscript  # noqa: F401
    import torch._dynamo
    import torch.export
    import torch.onnx._internal.exporter._core  # noqa: F401

    import pt2onnx
    from pt2onnx.translate import REGISTRY

    REGISTRY.load_builtins()
    pt2onnx.export  # noqa: B018  (the facade's deferred names)


def _stage_probe() -> Any:
    """Per pt2onnx stage: RSS at its start and end, and its own peak (VmHWM reset at each
    start), relative to the baseline; ``--stages`` prints them."""
    from pt2onnx.report import on_stage

    seen: list[tuple[str, str, int, int]] = []

    def probe(stage: str, seconds: float | None) -> None:
        if seconds is None:
            seen.append((stage, "start", _status("VmRSS"), 0))
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        else:
            seen.append((stage, "end", _status("VmRSS"), _status("VmHWM")))

    return seen, on_stage(probe)


def worker(name: str, exporter: str, out: Path, stages: bool = False) -> dict[str, Any]:
    import contextlib
    import warnings

    import torch

    _load_exporters()
    warnings.simplefilter("ignore")
    model, args, kwargs = _build(name)
    weights = sum(t.numel() * t.element_size()
                  for t in [*model.parameters(), *model.buffers()])
    start = time.perf_counter()
    with torch.no_grad():
        model(*args, **kwargs)
    eager_s = time.perf_counter() - start
    baseline = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    seen, probe = _stage_probe() if stages else ([], contextlib.nullcontext())
    start = time.perf_counter()
    try:
        with probe:
            _export(exporter, model, args, kwargs, out)
    except BaseException as exc:
        text = str(exc).strip().splitlines()
        return {"ok": False, "error": f"{type(exc).__name__}: {text[0][:160] if text else ''}"}
    seconds = time.perf_counter() - start
    return {"ok": True, "weights": weights, "baseline": baseline, "peak": _status("VmHWM"),
            "seconds": seconds, "eager_s": eager_s, "input": list(
                (args[0][0] if isinstance(args[0], list) else args[0]).shape),
            "after": _status("VmRSS"), "stages": [
                (st, at, (rss - baseline) / GiB, (hwm - baseline) / GiB if hwm else None)
                for st, at, rss, hwm in seen]}


def _run(name: str, exporter: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pt2onnx-memory-") as tmp:
        proc = subprocess.run([sys.executable, __file__, "--worker", name, exporter, tmp],
                              capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"ok": False, "error": f"exit {proc.returncode}: {tail[:160]}"}
    return dict(json.loads(lines[-1]))


def _median(name: str, exporter: str, repeat: int) -> dict[str, Any]:
    """The run whose peak above the baseline is the median of ``repeat`` fresh processes
    (the same model's figure moved by up to 30 MB between processes: glibc's heap)."""
    runs = [_run(name, exporter) for _ in range(repeat)]
    ok = sorted((r for r in runs if r["ok"]), key=lambda r: r["peak"] - r["baseline"])
    return ok[len(ok) // 2] if ok else runs[0]


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if not r["ok"]:
        return f"failed ({r['error']})"
    above = r["peak"] - r["baseline"]
    return f"{_size(above)} ({above / r['weights']:.2f}, {r['seconds']:.0f} s)"


def _size(n: float) -> str:
    """GiB from 1 GiB up, MB below (the zoo's small models)."""
    return f"{n / GiB:.2f} GiB" if abs(n) >= GiB else f"{n / 2**20:.0f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=None,
                        help="the models to measure (with --zoo: only these of the zoo)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="fresh processes per cell; the median peak is shown")
    parser.add_argument("--zoo", action="store_true",
                        help="every torchvision and timm model of the model tier's zoo "
                             "(tests/models), with its tests' inputs")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--worker", nargs=3, metavar=("MODEL", "EXPORTER", "OUT"))
    parser.add_argument("--stages", action="store_true",
                        help="with --worker: RSS at each pt2onnx stage (resets the peak)")
    args = parser.parse_args()
    if args.worker:
        name, exporter, out = args.worker
        print(json.dumps(worker(name, exporter, Path(out), args.stages)), flush=True)
        return 0
    import torch

    exporters = args.exporters.split(",")
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; peak RSS above the eager "
          "pass (VmHWM - VmRSS after one eager forward), as GiB (/ weights, export time); "
          "one fresh process per cell")
    print("\n| model | input | weights | eager baseline RSS | "
          + " | ".join(exporters) + " | pt2onnx - torch.export | bound |")
    print("|---|---|---|---|" + "---|" * len(exporters) + "---|---|")
    if args.zoo:
        names = [n for n in zoo_names() if args.models is None
                 or n in args.models or n.partition(":")[2] in args.models]
    else:
        names = args.models or list(MODELS)
    exceeded = []
    for name in names:
        need = 2.5 * SIZES.get(name, 2.0) * 1e9
        if _available() < need:
            print(f"| {name} | skipped: {_available() / GiB:.1f} GiB available, about "
                  f"{need / GiB:.1f} GiB needed |", flush=True)
            continue
        rows = {e: _median(name, e, args.repeat) for e in exporters}
        first = next((r for r in rows.values() if r["ok"]), None)
        if first is None:
            print(f"| {name} | " + " | ".join(_cell(r) for r in rows.values()) + " |")
            continue
        weights = first["weights"]
        mine, ref = rows.get("pt2onnx"), rows.get("torch.export")
        gap = bound = "-"
        if mine and ref and mine["ok"] and ref["ok"]:
            diff = (mine["peak"] - mine["baseline"]) - (ref["peak"] - ref["baseline"])
            gap = f"{'+' if diff >= 0 else '-'}{_size(abs(diff))} ({diff / weights:+.3f})"
            bound = "holds" if diff <= 0.05 * weights else "exceeded"
            if bound == "exceeded":
                exceeded.append(name)
        print(f"| {name} | {'x'.join(map(str, first['input'][1:]))} | "
              f"{_size(weights)} | {_size(first['baseline'])} | "
              + " | ".join(_cell(rows[e]) for e in exporters) + f" | {gap} | {bound} |",
              flush=True)
    print(f"\n{len(names)} models; the bound exceeded on {len(exceeded)}: "
          f"{', '.join(exceeded) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
