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
                 "pt2onnx.cli", "pt2onnx.testing"]
        print("after export", [h for h in heavy if h in sys.modules])
        assert prog.verify().ok
        print("verified", "onnxruntime" in sys.modules)
        print("names", pt2onnx.errors.CaptureError.__name__, pt2onnx.__version__ != "")
    """)
    assert "at import ['pt2onnx', 'pt2onnx._lazy', 'pt2onnx._version']" in out
    assert "after export []" in out
    assert "verified True" in out
    assert "names CaptureError True" in out
