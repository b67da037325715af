"""The command line as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pt2onnx", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def test_demo_exports_and_verifies(tmp_path):
    proc = _run("demo", "--output-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "tiny_resnet: ok" in proc.stdout and "tiny_transformer: ok" in proc.stdout
    assert "capture" in proc.stdout and "translate" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny_resnet.onnx",
                                                          "tiny_transformer.onnx"]


def test_ops_json():
    proc = _run("ops", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    add = next(r for r in rows if r["op"] == "aten::add.Tensor")
    assert add["supported"] is True and add["opsets"] and "xfail" in add


def test_version():
    proc = _run("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("pt2onnx ")


def test_usage_error_exit_code():
    assert _run("no-such-command").returncode == 2


def test_doctor_reports_tested_versions():
    proc = _run("doctor")
    assert proc.returncode == 0, proc.stderr
    assert "torch" in proc.stdout and "tested" in proc.stdout
