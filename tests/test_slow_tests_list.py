"""tests/slow_tests.txt names tests by node id (tests/conftest.py marks them `slow`). A
line that no longer names a test (the test or a parameter renamed) would put that test
back into the fast tier without a word, so every line must name a collected test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_test_exists() -> None:
    listed = [line.strip() for line in (ROOT / "tests" / "slow_tests.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert len(listed) == len(set(listed)), "a node id is listed twice"
    files = sorted({nodeid.split("::", 1)[0] for nodeid in listed})
    missing_files = [f for f in files if not (ROOT / f).is_file()]
    assert not missing_files, f"tests/slow_tests.txt names files that do not exist: {missing_files}"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])})
    collected = {line.strip() for line in out.stdout.splitlines() if "::" in line}
    assert collected, out.stdout[-2000:] + out.stderr[-2000:]
    # A file skipped whole where its library is missing (transformers) has nothing to
    # compare with there.
    seen = {nodeid.split("::", 1)[0] for nodeid in collected}
    stale = [nodeid for nodeid in listed
             if nodeid not in collected and nodeid.split("::", 1)[0] in seen]
    assert not stale, (
        "tests/slow_tests.txt names tests that are not collected (renamed?); write each "
        "as its node id now (pytest --collect-only -q <file>) or remove it:\n"
        + "\n".join(stale))
