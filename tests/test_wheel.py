"""The wheel builds, installs on its own and exports a model."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_installs_and_exports(tmp_path):
    dist = tmp_path / "dist"
    # `python -m build` makes the sdist, then the wheel from it (hatchling is in the dev extra).
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = dist.glob("pt2onnx-*.whl")
    assert list(dist.glob("pt2onnx-*.tar.gz")), "no sdist was built"
    names = zipfile.ZipFile(wheel).namelist()
    assert "pt2onnx/py.typed" in names and "pt2onnx/rules/elementwise.py" in names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)], check=True, capture_output=True, timeout=300,
    )
    code = (
        "import pt2onnx, torch; "
        "print(pt2onnx.__file__); "
        "p = pt2onnx.export(torch.nn.Linear(3, 2), (torch.randn(4, 3),)); "
        "print(p.verify(torch.randn(4, 3)).ok)"
    )
    # The wheel's copy comes first on the path, ahead of the editable dev install.
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=300).stdout.split()
    assert out[0].startswith(str(target)), f"imported {out[0]}, not the installed wheel"
    assert out[-1] == "True"
