"""Model-zoo cases through pt2onnx and torch.onnx.export(dynamo=True), in one run.

Takes the cases of the model tier (tests/models: Hugging Face always; timm and
torchvision where they import), exports each with both exporters, runs both
files in onnxruntime and compares every tensor output with eager PyTorch
(max abs diff <= 1e-4 + 1e-3 * max|ref|). Prints the pass count of each
exporter and, per model, the ratios pt2onnx / torch.onnx of export time,
node count and onnxruntime latency (1 thread, median of 5).

    python benchmarks/zoo_compare.py [--family hf timm torchvision] [-k llama] [--dynamic]

With --dynamic, each model is exported once from a batch-1 example with a dynamic
batch (and sequence, for text), by both exporters with the same dynamic_axes and
input names, and both files are run at batch 1 and again at batch 3; a file that
exports but fails at batch 3 is counted as a wrong file.

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests"), str(ROOT / "tests" / "models")]

from compare_export import _latency  # noqa: E402  (1 thread, median; shared with make bench)


def _tier(module: str, family: str) -> Any:
    """A model-tier test module, or None (with the reason printed) where it cannot import:
    timm needs torchvision, which needs its own torch."""
    import importlib

    try:
        return importlib.import_module(module)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # pytest's Skipped (raised at import) is a BaseException
        print(f"skipping {family}: {type(exc).__name__}: {str(exc)[:120]}")
        return None


def _cases(families: list[str]) -> list[tuple[str, Any]]:
    """(name, factory) pairs; factory() -> (model, args, kwargs)."""
    out: list[tuple[str, Any]] = []
    if "hf" in families:
        import test_hf_zoo as hf

        for case in hf.CASES:
            def make(case: Any = case) -> Any:
                model = hf.build(case)
                return model, (), hf.make_inputs(case, model)
            out.append((f"hf/{case.name}", make))
        for case in hf.DECODERS:
            def make_cache(case: Any = case) -> Any:
                model = hf.build(case)
                return model, (), {**hf.make_inputs(case, model), "use_cache": True}
            out.append((f"hf/{case.name}+cache", make_cache))
    if "timm" in families:
        tz = _tier("test_timm_zoo", "timm")
        if tz is not None:
            for case in tz.CASES:
                def make_timm(case: Any = case) -> Any:
                    import torch

                    model = tz.timm.create_model(case.name, pretrained=False, **case.kwargs)
                    return model.eval(), (torch.randn(1, 3, case.size, case.size),), {}
                out.append((f"timm/{case.name}", make_timm))
    if "torchvision" in families:
        tv = _tier("test_torchvision", "torchvision")
        if tv is not None:
            for case in tv.CASES.values():
                def make_tv(case: Any = case) -> Any:
                    import torch

                    model = tv.torchvision.models.get_model(case.name, weights=None,
                                                            **case.kwargs).eval()
                    args = tuple(torch.randn(case.shape) for _ in range(case.inputs))
                    return model, args, dict(case.forward_kwargs)
                out.append((f"torchvision/{case.name}", make_tv))
            for name in tv.DETECTION:
                def make_det(name: str = name) -> Any:
                    import torch

                    return tv._detection_model(name), ([torch.rand(tv.DETECTION_IMAGE)],), {}
                out.append((f"torchvision/{name}", make_det))
    return out


def _detections_match(expected: Any, got: list[Any]) -> bool:
    """Detection outputs (a list with one dict): rows matched, ties in either order."""
    import test_torchvision as tv

    (ref,) = expected
    try:
        tv._assert_detections_match(ref, dict(zip(ref, got)))
    except AssertionError:
        return False
    return True


def _one(exporter: str, factory: Any, tmp: Path) -> dict[str, Any]:
    import onnx
    import onnxruntime as ort
    import torch

    from pt2onnx.verify import compare, flatten_tensors, to_numpy

    torch.manual_seed(0)
    model, args, kwargs = factory()
    feeds = [to_numpy(t).copy() for t in flatten_tensors((args, kwargs))]
    path = tmp / f"{exporter}.onnx"
    start = time.perf_counter()
    if exporter == "pt2onnx":
        import pt2onnx

        pt2onnx.export(model, args, path, kwargs=kwargs)
    else:
        torch.onnx.export(model, args, str(path), kwargs=kwargs, dynamo=True)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        eager = model(*args, **kwargs)
    expected = flatten_tensors(eager)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], feeds)))
    if isinstance(eager, list) and eager and isinstance(eager[0], dict) and "boxes" in eager[0]:
        ok = _detections_match(eager, got)
    else:
        ok = compare([f"out{i}" for i in range(len(got))], expected, got).ok
    nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
    latency = _latency(path, {f"in{i}": a for i, a in enumerate(feeds)}, 5)
    return {"ok": ok, "export_s": seconds, "nodes": nodes, "latency": latency}


def _dynamic_cases(families: list[str]) -> list[tuple[str, Any]]:
    """(name, factory) pairs; factory() -> (model, inputs(batch) -> (args, kwargs), axes)."""
    out: list[tuple[str, Any]] = []
    if "hf" in families:
        import test_hf_zoo as hf

        for case in hf.CASES:
            def make(case: Any = case) -> Any:
                model = hf.build(case)
                return (model, lambda b: ((), hf.make_inputs(case, model, batch=b)),
                        hf.DYNAMIC_AXES[case.inputs])
            out.append((f"hf/{case.name}", make))
    if "timm" in families:
        tz = _tier("test_timm_zoo", "timm")
        if tz is not None:
            for case in tz.CASES:
                def make_timm(case: Any = case) -> Any:
                    import torch

                    model = tz.timm.create_model(case.name, pretrained=False, **case.kwargs)
                    return (model.eval(), lambda b: ((torch.randn(b, 3, case.size, case.size),), {}),
                            {"x": {0: "batch"}})
                out.append((f"timm/{case.name}", make_timm))
    if "torchvision" in families:
        tv = _tier("test_torchvision", "torchvision")
        if tv is not None:
            for case in tv.CASES.values():
                def make_tv(case: Any = case) -> Any:
                    import torch

                    model = tv.torchvision.models.get_model(case.name, weights=None,
                                                            **case.kwargs).eval()
                    return (model, lambda b: (tuple(torch.randn((b, *case.shape[1:]))
                                                    for _ in range(case.inputs)),
                                              dict(case.forward_kwargs)),
                            {f"x{i}": {0: "batch"} for i in range(case.inputs)})
                out.append((f"torchvision/{case.name}", make_tv))
    return out


def _one_dynamic(exporter: str, factory: Any, tmp: Path) -> dict[str, Any]:
    """Exported from batch 1 with dynamic axes; ok only if it matches at batch 1 and 3."""
    import onnxruntime as ort
    import torch

    from pt2onnx.capture import bound_inputs, tensor_leaves
    from pt2onnx.verify import compare, flatten_tensors, to_numpy

    torch.manual_seed(0)
    model, inputs, axes = factory()
    args, kwargs = inputs(1)
    names = [n for n, _ in tensor_leaves(bound_inputs(model, args, kwargs))]
    if all(k.startswith("x") and k[1:].isdigit() for k in axes):  # positional inputs
        names = [f"x{i}" for i in range(len(names))]
    path = tmp / f"{exporter}.onnx"
    start = time.perf_counter()
    if exporter == "pt2onnx":
        import pt2onnx

        pt2onnx.export(model, args, path, kwargs=kwargs, input_names=names, dynamic_axes=axes)
    else:
        torch.onnx.export(model, args, str(path), kwargs=kwargs, input_names=names,
                          dynamic_axes=axes, dynamo=True)
    seconds = time.perf_counter() - start
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        torch.manual_seed(batch)
        args, kwargs = inputs(batch)
        feeds = [to_numpy(t).copy() for t in flatten_tensors((args, kwargs))]
        with torch.no_grad():
            expected = flatten_tensors(model(*args, **kwargs))
        try:
            got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], feeds)))
        except Exception as exc:
            return {"ok": False, "wrong_file": True, "export_s": seconds,
                    "error": f"at batch {batch}: {str(exc)[:120]}"}
        if not compare([f"out{i}" for i in range(len(got))], expected, got).ok:
            return {"ok": False, "wrong_file": True, "export_s": seconds,
                    "error": f"mismatch at batch {batch}"}
    return {"ok": True, "export_s": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="*", default=["hf", "timm", "torchvision"])
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("--dynamic", action="store_true",
                        help="batch-1 examples with dynamic axes, run again at batch 3")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    results: dict[str, dict[str, dict[str, Any]]] = {}
    cases = _dynamic_cases(args.family) if args.dynamic else _cases(args.family)
    run = _one_dynamic if args.dynamic else _one
    for name, factory in cases:
        if args.k not in name:
            continue
        results[name] = {}
        for exporter in ("torch.onnx", "pt2onnx"):
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    r = run(exporter, factory, Path(tmp))
                except Exception as exc:
                    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                    r = {"ok": False, "error": last[:160]}
            results[name][exporter] = r
        ours, theirs = results[name]["pt2onnx"], results[name]["torch.onnx"]
        print(f"{name}: pt2onnx {'pass' if ours['ok'] else 'FAIL'}, "
              f"torch.onnx {'pass' if theirs['ok'] else 'FAIL'}"
              + "".join(f" [{k}: {r['error']}]" for k, r in results[name].items() if "error" in r),
              flush=True)
    if args.dynamic:
        n = len(results)
        for e in ("pt2onnx", "torch.onnx"):
            ok = sum(r[e]["ok"] for r in results.values())
            wrong = sum(bool(r[e].get("wrong_file")) for r in results.values())
            print(f"{e}: {ok}/{n} pass at batch 1 and 3; {wrong} wrote a file that fails at "
                  "batch 1 or 3")
        behind = [k for k, r in results.items() if r["torch.onnx"]["ok"] and not r["pt2onnx"]["ok"]]
        print(f"torch.onnx passes, pt2onnx does not: {behind or 'none'}")
        return 0
    _summary(results)
    return 0


def _summary(results: dict[str, dict[str, dict[str, Any]]]) -> None:
    n = len(results)
    passed = {e: sum(r[e]["ok"] for r in results.values()) for e in ("pt2onnx", "torch.onnx")}
    print(f"\npassed: pt2onnx {passed['pt2onnx']}/{n}, torch.onnx {passed['torch.onnx']}/{n}")
    print("\n| model | export time | nodes | ORT latency |   (ratio pt2onnx / torch.onnx)")
    print("|---|---|---|---|")
    logs: dict[str, list[float]] = {"export_s": [], "nodes": [], "latency": []}
    for name, r in results.items():
        ours, theirs = r["pt2onnx"], r["torch.onnx"]
        if not (ours["ok"] and theirs["ok"]):
            continue
        cells = []
        for key in logs:
            ratio = ours[key] / theirs[key]
            logs[key].append(math.log(ratio))
            cells.append(f"{ratio:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if logs["nodes"]:
        geo = {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}
        print(f"| geometric mean ({len(logs['nodes'])} models both pass) | "
              + " | ".join(f"{geo[k]:.2f}" for k in logs) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
