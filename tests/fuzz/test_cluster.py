"""The campaign's Dask cluster (verimim.fuzz.cluster): a GPU campaign's local workers each see
one GPU of their own (checked through the environment CUDA reads; no GPU needed)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from verimim.fuzz.cluster import connect, gpu_ids


def _visible() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_each_local_worker_sees_its_own_gpu() -> None:
    cluster = connect(workers=2, gpus=("7", "9"))
    try:
        seen = cluster.client.run(_visible)
    finally:
        cluster.close()
    assert sorted(seen.values()) == ["7", "9"]


def test_gpu_ids_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert gpu_ids() == ("2", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_ids() == ()


def test_a_job_its_worker_never_takes_is_placed_again_and_the_worker_restarted() -> None:
    # A worker connected but wedged outside any program never starts what it is given: without
    # this the campaign waited for it past its budget (no hang is journaled: it never ran).
    from types import SimpleNamespace
    from typing import Any

    from verimim.fuzz.campaign import _check_placement, _Job, _View

    restarted: list[str] = []
    cancelled: list[bool] = []

    class Future:
        key, status = "verimim-generate-1-7-1", "pending"

        def cancel(self) -> None:
            cancelled.append(True)

    run: Any = SimpleNamespace(program_timeout=10.0, reduce_budget=5.0,
                               cluster=SimpleNamespace(restart_worker=lambda a: restarted.append(a) or True))
    job = _Job("generate", 7, submitted=100.0, worker="tcp://w:1")
    fut: Any = Future()
    inflight: dict[Any, _Job] = {fut: job}
    pending: list[_Job] = []
    view = _View({"tcp://w:1": 1}, {"tcp://w:1": frozenset()})
    _check_placement(run, inflight, pending, view, now=105.0)
    assert inflight and not pending, "within its time limit it waits"
    _check_placement(run, inflight, pending, view, now=111.0)
    assert not inflight and pending == [job] and restarted == ["tcp://w:1"] and cancelled == [True]


def test_a_worker_being_restarted_is_given_nothing() -> None:
    from verimim.fuzz.campaign import _View

    view = _View({"tcp://a:1": 1, "tcp://b:1": 2}, {})
    assert view.free({}, restarting={"tcp://b:1"}) == ["tcp://a:1"]
    assert sorted(view.free({})) == ["tcp://a:1", "tcp://b:1", "tcp://b:1"]


@pytest.mark.parametrize("kind, kept", [("spec", False), ("internal", False), ("missed-defect", True)])
def test_a_reduced_program_says_expect_error_only_for_a_missed_defect(tmp_path: Path, kind: str, kept: bool) -> None:
    # A phase's failure reduced from a racy program may have lost its race: its reduced.mim said
    # EXPECT-ERROR: E-RACE all the same (a corpus test made of it expected a fault it no longer has).
    import json
    from types import SimpleNamespace
    from typing import Any

    from verimim.fuzz.campaign import _Job, _reduced
    from verimim.fuzz.reduce import Reduction

    d = tmp_path / "failures" / "sig"
    d.mkdir(parents=True)
    (d / "original.mim").write_text("// EXPECT-ERROR: E-RACE\nplugin core;\n", encoding="utf-8")
    (d / "failure.json").write_text(json.dumps({"signature": {"kind": kind, "code": "E-SPEC"}}), encoding="utf-8")
    journal: Any = SimpleNamespace(dir=tmp_path, reduced=lambda *a: None)
    run: Any = SimpleNamespace(journal=journal)
    red = Reduction("plugin core;\n", 40, 13, 2, 1, 5, 1, 0.5, "fixpoint")
    _reduced(run, _Job("reduce", 3, 0.0, "sig"), red, None)
    assert ("// EXPECT-ERROR: E-RACE" in (d / "reduced.mim").read_text()) == kept


def test_a_reduce_budget_of_0_reduces_nothing_now() -> None:
    # `--reduce-budget 0` still reduced (for a second and more: the reducer checks its clock
    # between candidates); the failure stays pending, for a resume with a budget
    from types import SimpleNamespace
    from typing import Any

    from verimim.fuzz.campaign import _Job, _queue_reduction

    run: Any = SimpleNamespace(reduce_budget=0.0, journal=None)  # (the journal is not asked)
    pending: list[_Job] = []
    _queue_reduction(run, pending, "sig", 3)
    assert pending == []


@pytest.mark.parametrize("message, cause", [
    ("Worker process 4242 exited with status 13; KilledWorker: attempted to run task 'x' on 1 different workers", "status 13"),
    ("Worker process 7 was killed by signal 9; its worker died while checking it", "signal 9"),
    ("Worker tcp://1.2.3.4:5 (pid=9) exceeded 95% memory budget. Restarting...; KilledWorker: ...", "memory"),
    ("RecursionError: maximum recursion depth exceeded", "RecursionError"),
    ("KilledWorker: attempted to run task 'x' on 1 different workers", ""),
])
def test_a_crash_signature_names_its_cause(message: str, cause: str) -> None:
    # Every crash had one signature (and every hang another): a second cause was never saved.
    from verimim.fuzz.task import crash_cause

    assert crash_cause(message) == cause
