"""`pt2onnx export / inspect / verify` as a user runs them: a subprocess, exit codes, files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import onnx
import pytest
import torch

MODEL = textwrap.dedent("""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)

        def forward(self, x):
            return torch.relu(self.fc(x))

    def make():
        return Net()

    def make_with_inputs():
        return Net(), (torch.randn(4, 3),)

    def inputs():
        return (torch.randn(4, 3),)

    def broken():
        return Net(), (torch.randn(4, 5),)

    class Wrong(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    def wrong():
        return Wrong()
""")


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pt2onnx", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "usermodel.py").write_text(MODEL)
    return tmp_path


def test_export_with_shapes_dynamic_verify_report_then_inspect(workdir):
    proc = _run("export", "usermodel.py:make", "--input", "x:4x3:float32", "--dynamic",
                "x:0=batch", "-o", "net.onnx", "--verify", "--report", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "wrote net.onnx" in proc.stdout and "| output |" in proc.stdout
    assert "capture" in proc.stderr  # the progress display
    assert sorted(p.name for p in workdir.iterdir() if p.suffix in (".onnx", ".md")) == [
        "net.onnx", "net.report.md"]
    report = (workdir / "net.report.md").read_text()
    for part in ("## Versions", "torch:", "onnxruntime:", "| capture |", "strategy:",
                 "| Gemm | 1 |", "## Verification", "| batch |"):
        assert part in report
    onnx.checker.check_model(str(workdir / "net.onnx"), full_check=True)

    proc = _run("inspect", "net.onnx", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "x  float32  [batch, 3]" in proc.stdout
    assert "output  float32  [batch, 2]" in proc.stdout
    assert "ai.onnx 21" in proc.stdout and "parameters: 8 (32 B)" in proc.stdout
    assert "Gemm" in proc.stdout and "Relu" in proc.stdout

    proc = _run("inspect", "net.onnx", "--json", cwd=workdir)
    summary = json.loads(proc.stdout)
    assert summary["inputs"][0]["shape"] == ["batch", 3]
    assert summary["ops"] == {"Gemm": 1, "Relu": 1} and summary["parameters"] == 8

    proc = _run("verify", "usermodel.py:make", "--inputs-factory", "usermodel:inputs",
                "--onnx", "net.onnx", cwd=workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify: ok" in proc.stdout


def test_export_from_module_path_with_factory_inputs_and_saved_pt(workdir):
    proc = _run("export", "usermodel:make_with_inputs", "-o", "a.onnx", "--opset", "18", "-q",
                cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert onnx.load(str(workdir / "a.onnx")).opset_import[0].version == 18


def test_export_with_saved_pt_inputs(workdir, monkeypatch, capsys):
    torch.save((torch.randn(2, 3),), workdir / "inputs.pt")
    code, _, err = _main(["export", "usermodel.py:make", "--inputs", "inputs.pt", "-o",
                          "b.onnx", "-q"], workdir, monkeypatch, capsys)
    assert code == 0, err
    assert "x" in [i.name for i in onnx.load(str(workdir / "b.onnx")).graph.input]


def _main(argv, workdir, monkeypatch, capsys):
    """In-process, for speed: the same main() the console script runs."""
    from pt2onnx.cli import main

    monkeypatch.chdir(workdir)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_mismatch_exits_1(workdir, monkeypatch, capsys):
    # Exports Wrong, breaks the file by hand, then verifies the file against eager.
    code, _, err = _main(["export", "usermodel.py:wrong", "--input", "x:4x3", "-o", "w.onnx",
                          "-q"], workdir, monkeypatch, capsys)
    assert code == 0, err
    model = onnx.load(str(workdir / "w.onnx"))
    model.graph.node[0].op_type = "Abs"
    onnx.save(model, str(workdir / "w.onnx"))
    code, out, _ = _main(["verify", "usermodel.py:wrong", "--input", "x:4x3", "--onnx",
                          "w.onnx"], workdir, monkeypatch, capsys)
    assert code == 1 and "MISMATCH" in out


@pytest.mark.parametrize("argv, words", [
    (["export", "usermodel.py"], "MODULE:NAME"),
    (["export", "usermodel.py:nope", "--input", "x:4x3"], "no attribute 'nope'"),
    (["export", "missing.py:make", "--input", "x:4x3"], "no such file"),
    (["export", "usermodel.py:make"], "needs example inputs"),
    (["export", "usermodel.py:make", "--input", "x:4by3"], "ints joined by 'x'"),
    (["export", "usermodel.py:make", "--input", "x:4x3:float99"], "unknown dtype"),
    (["export", "usermodel.py:make", "--input", "x:4x3", "--dynamic", "y:0=b"], "not an input"),
    (["export", "usermodel.py:make", "--input", "x:4x3", "--inputs", "a.pt"], "one way"),
    (["inspect", "nothing.onnx"], "no such file"),
])
def test_usage_errors_exit_2(workdir, monkeypatch, capsys, argv, words):
    code, out, err = _main(argv, workdir, monkeypatch, capsys)
    assert code == 2, out + err
    assert words in err
    assert not list(workdir.glob("*.onnx"))


def test_usage_error_from_argparse_exits_2(workdir):
    proc = _run("export", "usermodel.py:make", "--opset", "nine", cwd=workdir)
    assert proc.returncode == 2 and "invalid int" in proc.stderr


def test_export_errors_exit_3_and_leave_no_file(workdir, monkeypatch, capsys):
    code, _, err = _main(["export", "usermodel:broken", "-o", "m.onnx", "-q"], workdir,
                         monkeypatch, capsys)
    assert code == 3
    assert "pt2onnx: error:" in err and "torch.export" in err
    code, _, err = _main(["export", "usermodel.py:make", "--input", "x:4x3", "--opset", "30",
                          "-q"], workdir, monkeypatch, capsys)
    assert code == 3 and "outside the range" in err
    assert sorted(p.name for p in workdir.iterdir() if p.name != "__pycache__") == [
        "usermodel.py"]


@pytest.mark.parametrize("flag", [["--modules-as-functions"], ["--modules-as-functions", "Linear"]])
def test_export_modules_as_functions(workdir, monkeypatch, capsys, flag):
    code, _, err = _main(["export", "usermodel.py:make", "--input", "x:4x3", "-o", "f.onnx",
                          "-q", *flag], workdir, monkeypatch, capsys)
    assert code == 0, err
    proto = onnx.load(str(workdir / "f.onnx"))
    assert [f.name for f in proto.functions] == ["Linear"]
    assert [n.op_type for n in proto.graph.node] == ["Linear", "Relu"]
    code, out, _ = _main(["inspect", "f.onnx"], workdir, monkeypatch, capsys)
    assert code == 0 and "functions (1, nodes in each body):" in out
    assert "torch.nn.modules.linear::Linear" in out
