"""`fuzz report` (verimim.fuzz.report) on a journal written here: every program counted once,
coverage of every seed operation (the never generated ones included), every phase by status,
every verdict, the failure table, and the comparison of the last run with the one before."""
from __future__ import annotations

import json
import time
from pathlib import Path

from verimim.fuzz.journal import Journal
from verimim.fuzz.report import STATUSES, VERDICTS, seed_operations, write_report
from verimim.fuzz.signature import Signature
from verimim.fuzz.task import Checked, Settings

SPEC = Signature("spec", "E-SPEC", "gpu.remove_double_syncs")
CRASH = Signature("crash")


def _c(index: int, features: tuple[str, ...], sig: Signature | None = None,
       phases: tuple[tuple[str, str], ...] = (("gpu.split_apply", "proved"),)) -> Checked:
    return Checked(index, index, (0,), defect=None, features=features, ops=2, kernels=1, launches=1, size=50,
                   verdict=sig.kind if sig else "ok", signature=sig, message=f"m{index}", phases=phases,
                   text="plugin core;\nlet x = 1;\n", finished=time.time() + index)


def _campaign(d: Path) -> None:
    j = Journal.open(d, Settings(seed=1))
    r1 = j.start_run(10, 1, None, "first")
    j.record(r1, _c(0, ("gpu.launch", "mem.load")))
    j.record(r1, _c(1, ("gpu.launch",), SPEC, (("gpu.split_apply", "proved"), ("gpu.remove_double_syncs", "refuted"))),
             failure_dir=str(d / "failures" / SPEC.key))
    j.end_run(r1)
    r2 = j.start_run(10, 2, None, "second")
    j.record(r2, _c(2, ("gpu.launch", "gpu.sync_work_items"), SPEC))
    j.record(r2, _c(3, ("gpu.launch",), CRASH, ()), failure_dir=str(d / "failures" / CRASH.key))
    j.record(r2, _c(4, ("gpu.launch", "branch.item")))
    j.reduced(SPEC.key, 10, 1, 2.0, "fixpoint")
    j.end_run(r2)
    j.close()


def test_report_counts_and_compares(tmp_path: Path) -> None:
    _campaign(tmp_path)
    summary, html_path, json_path = write_report(tmp_path)
    assert summary["programs"] == 5 and json.loads(json_path.read_text())["programs"] == 5
    assert [r["programs"] for r in summary["runs"]] == [2, 3]
    ops = summary["coverage"]["operations"]
    assert set(ops) == set(seed_operations()), "every seed operation is listed"
    assert ops["gpu.launch"] == 5 and ops["mem.load"] == 1 and ops["gpu.sync_work_items"] == 1
    assert ops["gpu.with_streams"] == 0 and ops["core.wrap.shl"] == 0, "never generated: listed with 0"
    assert "branch.item" in summary["coverage"]["features"] and "branch.item" not in ops
    assert summary["verdicts"] == {**{v: 0 for v in VERDICTS}, "ok": 2, "spec": 2, "crash": 1}
    assert summary["phases"]["gpu.remove_double_syncs"]["refuted"] == 1
    assert set(summary["phases"]["gpu.split_apply"]) == set(STATUSES)
    assert summary["phases"]["gpu.split_apply"]["proved"] == 4
    failures = {f["kind"]: f for f in summary["failures"]}
    assert failures["spec"]["count"] == 2 and failures["spec"]["size_after"] == 10
    assert failures["spec"]["first_run"] == 1 and failures["crash"]["count"] == 1
    c = summary["comparison"]
    assert c["programs"] == [2, 3] and c["failures"] == [1, 2]
    assert c["new_signatures"] == [CRASH.key], "a signature of the previous run is not new"
    assert c["newly_covered"] == ["branch.item", "gpu.sync_work_items"] and c["no_longer_covered"] == ["mem.load"]
    page = html_path.read_text()
    for needle in ("<svg id='throughput'", "<table id='failures'>", "<table id='coverage'>", "<table id='phases'>",
                   "<svg id='verdicts'", SPEC.key, "Comparison with the previous run"):
        assert needle in page
    assert page.count("<polyline class='run'") == 2, "one line per run"


def test_report_of_a_single_run_has_no_comparison(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=1))
    run = j.start_run(1, 1, None, "")
    j.record(run, _c(0, ("gpu.launch",)))
    j.close()  # killed: the run never ended
    summary, html_path, _ = write_report(tmp_path)
    assert summary["comparison"] is None and summary["runs"][0]["complete"] is False
    assert "nothing to compare" in html_path.read_text() and "(killed)" in html_path.read_text()
