"""The ``pt2onnx`` command line.

Exit codes: 0 success, 1 verification mismatch, 2 usage error, 3 export error.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pt2onnx.cli import _io as io


def _cmd_export(args: argparse.Namespace) -> int:
    import pt2onnx

    model, inputs, names = io.load_model_and_inputs(args)
    out = Path(args.output or "model.onnx")
    dynamic_axes = io.parse_dynamic(args.dynamic, names)
    report: Any = False
    if args.report:
        report = True if args.report is True else args.report
    with io.progress(quiet=args.quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a mismatch is printed below, with its bisection
        try:
            prog = pt2onnx.export(
                model, inputs, out, input_names=names or None,
                dynamic_axes=dynamic_axes or None, opset=args.opset, report=report,
                verify=args.verify, dynamic=args.dynamic_all, precision=args.precision,
                precision_io=args.precision_io,
                export_modules_as_functions=_functions(args.modules_as_functions),
                optimize=args.optimize,
            )
        except pt2onnx.VerificationError as exc:
            print(f"verify: MISMATCH, {out} not written")
            print(exc.result)
            return 1
    print(f"wrote {out} ({sum(prog.report.op_histogram.values())} ONNX nodes, "
          f"opset {prog.report.opset}): {prog.report.timing_line()}")
    if report:
        print(f"report: {out.with_suffix('.report.md') if report is True else report}")
    for line in prog.report.dynamic_refinements:
        print(f"dynamic shapes refined: {line}")
    for line in prog.report.fixed_axes:
        print(f"static: {line}")
    result = prog.report.verification
    if result is not None:
        print(f"verified at: {'; '.join(result.runs)}")
        print(result)
        return 0 if result.ok else 1
    return 0


def _cmd_export_llm(args: argparse.Namespace) -> int:
    from pt2onnx.llm import export_llm

    folder = Path(args.model_dir)
    if not (folder / "config.json").is_file():
        raise io.UsageError(f"{folder} is not a transformers checkpoint folder (no config.json)")
    with io.progress(quiet=args.quiet):
        result = export_llm(folder, Path(args.output), precision=args.precision,
                            opset=args.opset, int4_accuracy_level=args.int4_accuracy_level,
                            fused_ops=not args.no_fused_ops, image_size=args.image_size)
    # The process ends next: its last cyclic collection would scan every object the
    # model, torch.export and the graph made (about a second), only to free them at exit.
    import gc

    gc.freeze()
    lay = result.layout
    files = ", ".join(result.files or [result.model_path.name])
    print(f"wrote {result.out_dir}: {files} ({lay.model_type}, "
          f"{lay.num_layers} layers, {args.precision}), genai_config.json (type "
          f"{lay.genai_type!r})" + (f", tokenizer: {', '.join(result.tokenizer_files)}"
                                    if result.tokenizer_files else ", no tokenizer files")
          + f" in {result.seconds:.1f}s")
    if result.quantized:
        print(f"int4: {len(result.quantized)} Linear weight(s) as MatMulNBits")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    import pt2onnx

    model, inputs, names = io.load_model_and_inputs(args)
    if args.onnx:
        result = io.verify_file(Path(args.onnx), model, inputs,
                                1e-4 if args.atol is None else args.atol,
                                1e-3 if args.rtol is None else args.rtol)
    else:
        with io.progress(quiet=args.quiet):
            prog = pt2onnx.export(model, inputs, input_names=names or None, opset=args.opset)
        result = prog.verify(*inputs, atol=args.atol, rtol=args.rtol, bisect=True)
    print(result)
    print("verify: ok" if result.ok else "verify: MISMATCH")
    return 0 if result.ok else 1


def _cmd_inspect(args: argparse.Namespace) -> int:
    import json

    summary = io.summarize(Path(args.path))
    print(json.dumps(summary, indent=1) if args.json else io.format_summary(summary))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    import pt2onnx
    from pt2onnx.examples import EXAMPLES

    out_dir = Path(args.output_dir or tempfile.mkdtemp(prefix="pt2onnx-demo-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, factory in EXAMPLES.items():
        model, inputs = factory()
        path = out_dir / f"{name}.onnx"
        prog = pt2onnx.export(model, inputs, path, verify=False)
        result = prog.verify(*inputs)
        status = "ok" if result.ok else "MISMATCH"
        failed += not result.ok
        nodes = sum(prog.report.op_histogram.values())
        print(f"{name}: {status}  ->  {path}  ({nodes} ONNX nodes, opset {prog.report.opset})")
        print(f"  stages: {prog.report.timing_line()}")
        for o in result.outputs:
            print(f"  {o.name}: max abs err {o.max_abs_error:.2e} (tolerance {o.tolerance:.2e})")
    print("demo: all models match eager PyTorch in onnxruntime" if not failed
          else f"demo: {failed} model(s) do not match")
    return 1 if failed else 0


def _cmd_ops(args: argparse.Namespace) -> int:
    from pt2onnx.cli._support import support_matrix, to_json, to_markdown

    rows = support_matrix()
    if args.json:
        print(to_json(rows))
    elif args.markdown:
        print(to_markdown(rows), end="")
    else:
        for row in rows:
            mark = "yes" if row["supported"] else "no "
            print(f"{mark}  {row['op']}  {row['opsets'] or ''}")
    return 0


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path/to/file.py:factory or package.module:factory; the "
                   "factory returns a module, or (module, example_inputs)")
    p.add_argument("--input", action="append", default=[], metavar="NAME:SHAPE:DTYPE",
                   help="an input as name:1x3x224x224:float32 (repeatable, in order)")
    p.add_argument("--inputs-factory", metavar="MODULE:FN",
                   help="a function returning the example inputs (a tuple)")
    p.add_argument("--inputs", metavar="FILE.pt", help="example inputs saved with torch.save")
    p.add_argument("--opset", type=int, help="target ONNX opset (17-26)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _optimize(value: str) -> bool | str:
    """--optimize: standard (True), onnxruntime, or none (False)."""
    choices: dict[str, bool | str] = {"standard": True, "onnxruntime": "onnxruntime",
                                      "none": False}
    if value not in choices:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not one of standard, onnxruntime or none")
    return choices[value]


def _functions(value: Any) -> Any:
    """--modules-as-functions: True (no value), or the comma-separated class names."""
    if value is True or not value:
        return bool(value)
    return {name.strip() for name in str(value).split(",") if name.strip()}


def _add_commands(sub: Any) -> None:
    export = sub.add_parser("export", help="export a model to ONNX")
    _model_options(export)
    export.add_argument("-o", "--output", help="the .onnx file to write (default: model.onnx)")
    export.add_argument("--dynamic", action="append", default=[], metavar="NAME:AXIS=DIM",
                        help="a dynamic axis, e.g. x:0=batch (repeatable)")
    export.add_argument("--dynamic-all", action="store_true",
                        help="every axis of every input dynamic where the model allows it "
                        "(the report lists the axes the model fixed, and why)")
    export.add_argument("--verify", action="store_true",
                        help="compare onnxruntime with eager PyTorch at the example and at a "
                        "second size of each dynamic dim (exit 1 on mismatch)")
    export.add_argument("--report", nargs="?", const=True, metavar="PATH",
                        help="write the Markdown export report (default: beside the model)")
    export.add_argument("--precision", default="keep",
                        choices=["keep", "float32", "float16", "bfloat16", "fp32", "fp16",
                                 "bf16"],
                        help="the weights' and compute's dtype in the file: keep (default: "
                        "the model's), float32, float16 or bfloat16 (softmax, norms and "
                        "reductions in float32); the model is converted on a copy")
    export.add_argument("--precision-io", default="keep", choices=["keep", "convert"],
                        help="with --precision, the floating inputs' and outputs' dtypes: keep "
                        "(default: the example's and the model's) or convert (the precision's)")
    export.add_argument("--modules-as-functions", nargs="?", const=True, default=False,
                        metavar="TYPE,...",
                        help="each call of a module becomes a call of an ONNX function: "
                        "every module type, or the listed classes (names such as "
                        "TransformerEncoderLayer, or qualified names)")
    export.add_argument("--optimize", default=True, type=_optimize,
                        metavar="{standard,onnxruntime,none}",
                        help="standard (default): the standard ONNX passes; onnxruntime: "
                        "also onnxruntime's fused ops (MultiHeadAttention, "
                        "SkipLayerNormalization) where they compute the "
                        "same; none: only the rewrites every file needs")
    export.set_defaults(fn=_cmd_export)
    llm = sub.add_parser(
        "export-llm", help="export a transformers decoder checkpoint for onnxruntime-genai")
    llm.add_argument("model_dir", help="a local checkpoint folder (config.json plus weights)")
    llm.add_argument("-o", "--output", required=True,
                     help="the folder to write model.onnx, genai_config.json and the "
                     "tokenizer files into")
    llm.add_argument("--precision", default="fp32",
                     choices=["fp32", "fp16", "bf16", "int4", "float32", "float16", "bfloat16"],
                     help="fp32 (default); fp16 / bf16: weights and compute in float16 / "
                     "bfloat16 (softmax, norms and reductions in float32); int4: Linear "
                     "weights as MatMulNBits (round to nearest, block 32); float32, float16 "
                     "and bfloat16 name fp32, fp16 and bf16")
    llm.add_argument("--int4-accuracy-level", type=int, default=0, choices=[0, 1, 2, 3, 4],
                     help="MatMulNBits accuracy_level: 0 (default) computes in float32, exactly "
                     "the dequantized weights; 4 lets onnxruntime quantize activations to int8 "
                     "(faster on CPU, not exact)")
    llm.add_argument("--opset", type=int, help="target ONNX opset (17-26)")
    llm.add_argument("--no-fused-ops", action="store_true",
                     help="standard ONNX ops only: no onnxruntime GroupQueryAttention or "
                     "SimplifiedLayerNormalization (slower in onnxruntime, runs elsewhere)")
    llm.add_argument("--image-size", metavar="HxW",
                     help="Qwen2.5-VL: write the image pipeline (vision.onnx, embedding.onnx "
                     "and model.onnx on inputs_embeds, genai type qwen2_5_vl) for images "
                     "resized to this size, e.g. 448x448 (multiples of 28)")
    llm.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    llm.set_defaults(fn=_cmd_export_llm)
    verify = sub.add_parser("verify", help="run a model in onnxruntime against its PyTorch source")
    _model_options(verify)
    verify.add_argument("--onnx", help="an exported .onnx file (default: export in memory and "
                        "bisect a mismatch to the first diverging node)")
    verify.add_argument("--atol", type=float, default=None,
                        help="default: 1e-4, or 4 units of rounding of a float16 / bfloat16 "
                        "model's type")
    verify.add_argument("--rtol", type=float, default=None,
                        help="of max|eager|; default: 1e-3, or as --atol's")
    verify.set_defaults(fn=_cmd_verify)
    inspect = sub.add_parser("inspect", help="summarise an .onnx file")
    inspect.add_argument("path", help="the .onnx file")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(fn=_cmd_inspect)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from pt2onnx import _tested
    from pt2onnx.report import versions

    found = versions()
    untested = []
    for name, version in found.items():
        tested = _tested.is_tested(name, version)
        if tested is None:
            note = ""
        elif tested:
            note = "tested"
        else:
            untested.append(name)
            nearest = _tested.nearest_tested(name, version)
            note = (f"not tested; nearest tested {nearest}" if nearest else "not tested")
            note += f" (CI runs {', '.join(_tested.TESTED[name])})"
        print(f"{name:12s} {version:16s} {note}")
    if not untested:
        print("all versions are tested combinations")
        return 0
    print(f"{len(untested)} version(s) outside the tested set; see docs/compatibility.md. "
          "To check this combination, in a pt2onnx checkout:")
    if "torch" in untested:
        release = found["torch"].split("+")[0]
        print(f"  make test-torch VERSION={release}    # a venv with torch {release}, "
              "then the fast tier")
    print("  PYTHONPATH=src python -m pytest -n 2 -m 'not models and not slow' tests"
          "    # the fast tier in this environment")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from pt2onnx import __version__

    parser = argparse.ArgumentParser(prog="pt2onnx", description="Export PyTorch models to ONNX.")
    parser.add_argument("--version", action="version", version=f"pt2onnx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_commands(sub)
    demo = sub.add_parser("demo", help="export the bundled example models and verify them")
    demo.add_argument("--output-dir", help="where to write the .onnx files (default: a temp dir)")
    demo.set_defaults(fn=_cmd_demo)
    ops = sub.add_parser("ops", help="print the operator support matrix")
    ops.add_argument("--json", action="store_true", help="machine-readable output")
    ops.add_argument("--markdown", action="store_true", help="the docs/ops.md table")
    ops.set_defaults(fn=_cmd_ops)
    doctor = sub.add_parser("doctor", help="print the versions in use and whether CI tests them")
    doctor.set_defaults(fn=_cmd_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 success, 1 verification mismatch, 2 usage error, 3 export error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from pt2onnx.errors import ExportError

    try:
        return int(args.fn(args))
    except io.UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"pt2onnx: error: {exc}", file=sys.stderr)
        return 2
    except ExportError as exc:
        print(f"pt2onnx: error: {exc}", file=sys.stderr)
        return 3
