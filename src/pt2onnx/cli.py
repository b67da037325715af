"""The ``pt2onnx`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


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
    from pt2onnx._support import support_matrix, to_json, to_markdown

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


def build_parser() -> argparse.ArgumentParser:
    from pt2onnx._version import __version__

    parser = argparse.ArgumentParser(prog="pt2onnx", description="Export PyTorch models to ONNX.")
    parser.add_argument("--version", action="version", version=f"pt2onnx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="export the bundled example models and verify them")
    demo.add_argument("--output-dir", help="where to write the .onnx files (default: a temp dir)")
    demo.set_defaults(fn=_cmd_demo)
    ops = sub.add_parser("ops", help="print the operator support matrix")
    ops.add_argument("--json", action="store_true", help="machine-readable output")
    ops.add_argument("--markdown", action="store_true", help="the docs/ops.md table")
    ops.set_defaults(fn=_cmd_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 success, 1 verification mismatch, 2 usage error, 3 export error."""
    args = build_parser().parse_args(argv)
    from pt2onnx.errors import ExportError

    try:
        return int(args.fn(args))
    except ExportError as exc:
        print(f"pt2onnx: error: {exc}", file=sys.stderr)
        return 3
