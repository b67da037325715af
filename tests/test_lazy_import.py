"""``import pt2onnx`` and a static export do not import sympy (pt2onnx._lazy); anything
that reads from sympy still gets the real module."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _run(code: str, **env: str) -> str:
    full = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **env}
    if "PT2ONNX_EAGER_IMPORTS" not in env:
        full.pop("PT2ONNX_EAGER_IMPORTS", None)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _kind() -> str:
    return "type(sys.modules.get('sympy')).__name__"


def test_static_export_never_loads_sympy_and_sympy_still_works() -> None:
    out = _run(f"""
        import sys, torch
        import pt2onnx
        print("after import", {_kind()})
        m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
        prog = pt2onnx.export(m, (torch.randn(2, 4),))
        assert prog.report.capture_strategy.startswith("recorded"), prog.report.fallbacks
        assert prog.verify().ok
        print("after static export", {_kind()})
        import inspect
        inspect.getmodule(inspect)  # reads every module's __file__
        print("after inspect", {_kind()})
        import sympy
        from sympy import S, Symbol
        import sympy.core.numbers
        x = Symbol("x")
        assert str(sympy.expand((x + 1) ** 2)) == "x**2 + 2*x + 1" and S.One == 1
        print("after use", {_kind()}, sys.modules["sympy"] is sympy or hasattr(sympy, "Max"))
    """)
    assert "after import _DeferredModule" in out
    assert "after static export _DeferredModule" in out
    assert "after inspect _DeferredModule" in out
    assert "after use module True" in out


def test_dynamic_export_loads_sympy_when_torch_needs_it() -> None:
    out = _run(f"""
        import sys, torch
        import pt2onnx
        m = torch.nn.Linear(4, 3)
        prog = pt2onnx.export(m, (torch.randn(2, 4),),
                              dynamic_shapes=({{0: torch.export.Dim("b")}},))
        assert prog.verify(torch.randn(5, 4)).ok
        print("after dynamic export", {_kind()})
    """)
    assert "after dynamic export module" in out


def test_switch_turns_it_off() -> None:
    out = _run(f"""
        import sys, torch
        import pt2onnx
        print("after import", {_kind()})
    """, PT2ONNX_EAGER_IMPORTS="1")
    assert "after import module" in out


def test_import_defers_the_exporter_and_a_static_export_loads_no_runtime(tmp_path: Path) -> None:
    """``import pt2onnx`` loads only its facade; the first export loads the exporter and
    the rules it needs, and a static export to a file never loads onnxruntime, the ONNX
    reference evaluator, transformers, the LLM exporter or the CLI."""
    out = _run(f"""
        import sys, torch
        before = set(sys.modules)
        import pt2onnx
        print("at import", sorted(n for n in set(sys.modules) - before  # not sympy's stand-ins
                                  if type(sys.modules[n]).__name__ != "_DeferredModule"))
        m = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
            torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2)).eval()
        prog = pt2onnx.export(m, (torch.randn(1, 3, 8, 8),), {str(tmp_path / "m.onnx")!r})
        heavy = ["onnxruntime", "onnx.reference", "transformers", "pt2onnx.llm",
                 "pt2onnx.cli", "pt2onnx.testing", "torch.onnx",
                 "torch.ao.quantization.fx._decomposed", "pt2onnx.rules.quantized_pt2e"]
        print("after export", [h for h in heavy if h in sys.modules])
        assert prog.verify().ok
        print("verified", "onnxruntime" in sys.modules)
        print("names", pt2onnx.errors.CaptureError.__name__, pt2onnx.__version__ != "")
    """)
    assert "at import ['pt2onnx', 'pt2onnx._lazy', 'pt2onnx._version']" in out
    assert "after export []" in out
    assert "verified True" in out
    assert "names CaptureError True" in out


def test_errors_subclass_torch_onnx_s_when_it_is_imported_after_pt2onnx() -> None:
    """pt2onnx loads torch/onnx/errors.py alone (not torch.onnx's exporters); importing
    torch.onnx later reuses that module, so there is one OnnxExporterError."""
    out = _run("""
        import sys, torch
        import pt2onnx
        from pt2onnx.errors import CaptureError, ExportError
        print("loaded", "torch.onnx" in sys.modules)
        import torch.onnx
        import torch.onnx.errors as errors
        assert errors is sys.modules["torch.onnx.errors"] is torch.onnx.errors
        assert torch.onnx.OnnxExporterError is errors.OnnxExporterError
        assert issubclass(ExportError, torch.onnx.OnnxExporterError)
        try:
            raise CaptureError("x")
        except torch.onnx.OnnxExporterError as e:
            print("caught", type(e).__name__)
        assert callable(torch.onnx.export) and torch.onnx.errors.UnsupportedOperatorError
    """)
    assert "loaded False" in out
    assert "caught CaptureError" in out


def test_errors_base_is_the_same_class_when_torch_onnx_came_first() -> None:
    out = _run("""
        import torch.onnx
        import pt2onnx
        assert issubclass(pt2onnx.errors.ExportError, torch.onnx.errors.OnnxExporterError)
        print("ok")
    """)
    assert "ok" in out


def test_deferred_pt2e_rules_load_on_first_use_and_a_user_rule_still_wins() -> None:
    """PT2E's rules (rules/quantized_pt2e.py) are imported when a program first holds a
    quantized_decomposed op; a rule a user registers for one of those ops replaces the
    built-in one, as it does for every other built-in rule."""
    out = _run("""
        import sys, torch
        import pt2onnx
        import torch.ao.quantization.fx._decomposed  # defines the ops, as PT2E does
        qd = torch.ops.quantized_decomposed
        assert "pt2onnx.rules.quantized_pt2e" not in sys.modules

        @pt2onnx.translation(qd.dequantize_per_tensor.default)
        def mine(g, x, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None):
            return g.op.Mul(g.op.Cast(x, to=1), g.const(2.0))

        print("loaded", "pt2onnx.rules.quantized_pt2e" in sys.modules)

        class M(torch.nn.Module):
            def forward(self, x):
                q = qd.quantize_per_tensor(x, 0.5, 0, -128, 127, torch.int8)
                return qd.dequantize_per_tensor(q, 0.5, 0, -128, 127, torch.int8)

        prog = pt2onnx.export(M(), (torch.randn(2, 3),))
        ops = [n.op_type for n in prog.model.graph]
        print("ops", "QuantizeLinear" in ops, "DequantizeLinear" in ops, "Mul" in ops)
    """)
    assert "loaded True" in out
    assert "ops True False True" in out
