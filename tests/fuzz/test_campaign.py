"""The campaign driver: child processes, and a program that crashes its process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from pt2onnx.testing.fuzz import campaign


def _fake_spawn(crash_at: int | None, exporters: list[str]) -> Any:
    """A stand-in child: every program is ok, and program ``crash_at`` kills the
    process with SIGSEGV after its start record, as an onnxruntime crash does."""

    def spawn(seed: int, start: int, end: int, exps: list[str], every: int,
              workdir: str, version: int = 2) -> campaign._Child:
        path = f"{workdir}/records-{seed}-{start}.jsonl"
        script = textwrap.dedent(f"""
            import json, os, signal, sys
            for i in range({start}, {end}):
                for e in {exporters!r}:
                    if e != {exporters[0]!r} and i % {every} != 0:
                        continue
                    print(json.dumps({{"i": i, "exporter": e, "cls": "start"}}), flush=True)
                    if i == {crash_at!r} and e == {exporters[0]!r}:
                        os.kill(os.getpid(), signal.SIGSEGV)
                    print(json.dumps({{"i": i, "exporter": e, "cls": "ok", "ops": ["aten.x"]}}),
                          flush=True)
        """)
        log = open(path, "w")  # the driver closes it
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=log, text=True)
        return campaign._Child(proc, start, end, log, path)

    return spawn


@pytest.mark.parametrize("jobs", [1, 2])
def test_crash_is_a_runtime_failure_and_the_campaign_goes_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any, jobs: int) -> None:
    exporters = ["pt2onnx", "torch.onnx"]
    monkeypatch.setattr(campaign, "_spawn", _fake_spawn(7, exporters))
    seen: list[dict[str, Any]] = []
    out = campaign.run_campaign(0, 0, 20, exporters, jobs=jobs, compare_every=5, chunk=6,
                                workdir=str(tmp_path), report=seen.append)
    assert out["programs"] == 20 and out["runtime"] == 1 and out["ops_covered"] == 1
    first = [r for r in seen if r["exporter"] == "pt2onnx"]
    assert sorted(r["i"] for r in first) == list(range(20))  # none lost, none twice
    crash = [r for r in seen if r["cls"] == "runtime"]
    assert [(r["i"], r["exporter"]) for r in crash] == [(7, "pt2onnx")]
    assert "SIGSEGV" in crash[0]["detail"]
    # torch.onnx ran on programs 0, 5, 10 and 15; pt2onnx's counts on the same four.
    assert out["torch.onnx"]["programs"] == 4
    assert out["pt2onnx_on_torch.onnx_programs"]["programs"] == 4
    assert not list(tmp_path.iterdir())  # the record files are removed


def test_real_children_agree_with_the_in_process_run(tmp_path: Any) -> None:
    from pt2onnx.testing.fuzz import check, generate, program_seed

    seen: list[dict[str, Any]] = []
    out = campaign.run_campaign(5, 10, 2, ["pt2onnx"], jobs=2, compare_every=1, chunk=1,
                                workdir=str(tmp_path), report=seen.append)
    assert out["programs"] == 2 and len(seen) == 2
    for rec in seen:
        direct = check(generate(program_seed(5, rec["i"])), "pt2onnx")
        assert (rec["i"], rec["cls"]) == (rec["i"], direct.cls), json.dumps(rec)
