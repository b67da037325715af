"""The sdist and wheel build, and the wheel installs into a fresh venv and exports a model.

The fresh venv gets only the wheel (``--no-deps``); torch, onnx and the rest come from
the running interpreter's site-packages through a ``.pth`` line, which puts them after
the venv's own site-packages and, being no site dir of its own, does not run the
editable install's ``.pth``: so ``src/`` is never on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_wheel_installs_into_a_fresh_venv_and_exports(tmp_path):
    dist = tmp_path / "dist"
    # `python -m build` makes the sdist, then the wheel from it (hatchling is in the dev extra).
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, ROOT)
    (wheel,) = dist.glob("pt2onnx-*.whl")
    (sdist,) = dist.glob("pt2onnx-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pt2onnx/py.typed" in names and "pt2onnx/rules/elementwise.py" in names
    # Data files the passes read (onnxruntime's CPU kernel table) travel with the code.
    assert "pt2onnx/passes/ort_cpu_kernels.json" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/"))]

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index",
         "-q", wheel)
    site = Path(_run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .strip())
    (site / "zz_dev_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    code = (
        "import pt2onnx, torch; print(pt2onnx.__file__, pt2onnx.__version__); "
        "p = pt2onnx.export(torch.nn.Linear(3, 2), (torch.randn(4, 3),)); "
        "from pt2onnx.passes._ort_cpu_kernels import KERNELS; assert 'Add' in KERNELS; "
        "print(p.verify(torch.randn(4, 3)).ok)"
    )
    location, version, ok = _run(py, "-c", code, cwd=tmp_path).split()
    assert Path(location).is_relative_to(site), f"imported {location}, not the installed wheel"
    assert version in wheel.name and version in sdist.name
    assert ok == "True"
    # The console script comes with the wheel.
    assert _run(env_dir / "bin" / "pt2onnx", "--version").strip() == f"pt2onnx {version}"
