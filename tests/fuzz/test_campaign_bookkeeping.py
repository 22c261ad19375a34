"""The campaign's bookkeeping without a cluster (fuzz/campaign.py, fuzz/task.py): where jobs go
while a worker is restarted or never takes them, what a reduced program says, a reduce budget of
0, and the causes a crash's signature names."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from verimim.fuzz.campaign import _check_placement, _Job, _queue_reduction, _reduced, _View
from verimim.fuzz.reduce import Reduction
from verimim.fuzz.task import crash_cause


def test_a_job_its_worker_never_takes_is_placed_again_and_the_worker_restarted() -> None:
    # A worker connected but wedged outside any program never starts what it is given: without
    # this the campaign waited for it past its budget (no hang is journaled: it never ran).
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
    view = _View({"tcp://a:1": 1, "tcp://b:1": 2}, {})
    assert view.free({}, restarting={"tcp://b:1"}) == ["tcp://a:1"]
    assert sorted(view.free({})) == ["tcp://a:1", "tcp://b:1", "tcp://b:1"]


@pytest.mark.parametrize("kind, kept", [("spec", False), ("internal", False), ("missed-defect", True)])
def test_a_reduced_program_says_expect_error_only_for_a_missed_defect(tmp_path: Path, kind: str, kept: bool) -> None:
    # A phase's failure reduced from a racy program may have lost its race: its reduced.mim said
    # EXPECT-ERROR: E-RACE all the same (a corpus test made of it expected a fault it no longer has).
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
    assert crash_cause(message) == cause


def test_a_failure_a_killed_run_found_is_new_to_the_next_run(tmp_path: Path) -> None:
    # A nightly job killed after it journaled a new failure never reported it, and the resumed
    # run counted it as known: exit 0, a bug never announced.
    from verimim.fuzz.campaign import run
    from verimim.fuzz.journal import Journal
    from verimim.fuzz.signature import Signature
    from verimim.fuzz.task import Checked, Settings

    d = tmp_path / "c"
    j = Journal.open(d, Settings(seed=3, verify=False))
    killed = j.start_run(1.0, 1, None, "")  # (never ended)
    sig = Signature("internal", "E-INTERNAL", "gpu.split_apply", "KeyError@verimim.phases.split:f")
    row = Checked(10_000, 1, (1,), defect=None, features=(), ops=0, kernels=0, launches=0, size=13, verdict="internal",
                  signature=sig, message="KeyError: 'x'", text="plugin core;\n")
    assert j.record(killed, row, failure_dir=f"failures/{sig.key}")
    j.close()
    first = run(d, 600.0, workers=1, processes=False, max_programs=1, reduce_budget=0)
    assert first.new_failures == 1, first.failures
    (entry,) = [f for f in first.failures if f["signature"] == sig.to_json()]
    assert entry["new"] and entry["message"] == "KeyError: 'x'" and "run 1" in entry["found_by"]
    again = run(d, 600.0, workers=1, processes=False, max_programs=1, reduce_budget=0)
    assert again.new_failures == 0 and not again.failures, "reported once, by the run after the killed one"


_PROGRAM = """plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =
    return (m0, 0I32);
"""


def test_reproduce_sh_imports_the_preloads_the_workers_imported(tmp_path: Path) -> None:
    # A failure found on workers that a `--preload` patched (a phase broken on purpose, a
    # plugin registered) did not show from its reproduce.sh: its plain `verimim` had no preload,
    # and `verimim check original.mim` passed.
    import os
    import subprocess

    from verimim.fuzz.campaign import _write_failure
    from verimim.fuzz.signature import Signature
    from verimim.fuzz.task import Checked

    mark = tmp_path / "imported"
    preload = tmp_path / "my preload.py"  # (a path that needs quoting)
    preload.write_text(f"open({str(mark)!r}, 'a').write('x')\n", encoding="utf-8")
    sig = Signature("internal", "E-INTERNAL", "gpu.split_apply", "RuntimeError@verimim.phases.pipeline")
    row = Checked(3, 1, (1,), defect=None, features=(), ops=0, kernels=0, launches=0, size=40, verdict="internal",
                  signature=sig, message="RuntimeError: broken", text=_PROGRAM)
    run: Any = SimpleNamespace(journal=SimpleNamespace(dir=tmp_path), preload=(str(preload),))
    _write_failure(run, row, sig)
    d = tmp_path / "failures" / sig.key
    assert json.loads((d / "failure.json").read_text())["preload"] == [str(preload)]
    out = subprocess.run(["sh", str(d / "reproduce.sh")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NO_COLOR": "1"})
    assert mark.read_text() == "x", out.stderr[-2000:]  # imported once, by the one verimim command
    assert out.returncode == 0, out.stderr[-2000:]  # (check of the program itself: the preload breaks nothing)


def test_reproduce_sh_of_a_reproducer_failure_runs_the_counterexample_command(tmp_path: Path) -> None:
    # A `reproducer` failure is a counterexample whose `verimim run` line does not report its
    # code; reproduce.sh ran `verimim check` alone, which shows the (right) refutation only.
    import os
    import subprocess

    from verimim.fuzz.campaign import _write_failure
    from verimim.fuzz.signature import Signature
    from verimim.fuzz.task import Checked

    racy = (Path(__file__).parent.parent / "programs" / "runtime_errors" / "race_global_groups.mim").read_text()
    sig = Signature("reproducer", "", "kernels", "")
    row = Checked(4, 1, (1,), defect=None, features=(), ops=0, kernels=1, launches=1, size=len(racy),
                  verdict="reproducer", signature=sig, message="`verimim run prog.mim --schedule 0` does not report E-RACE",
                  text=racy)
    run: Any = SimpleNamespace(journal=SimpleNamespace(dir=tmp_path), preload=())
    _write_failure(run, row, sig)
    out = subprocess.run(["sh", str(tmp_path / "failures" / sig.key / "reproduce.sh")], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert "+ verimim run original.mim --schedule 0" in out.stderr, out.stderr[-2000:]
    assert out.stderr.count("error[E-RACE]") == 2, out.stderr[-3000:]  # check's, and the run's


def test_the_counterexample_runs_of_reproduce_sh_import_the_preloads_too(tmp_path: Path) -> None:
    # reproduce.sh of a `reproducer` failure piped the counterexamples' `verimim run` lines into
    # a child `sh`, which has no `verimim` shell function: the runs went without the workers'
    # --preload (a phase broken on purpose was whole again there).
    import os
    import subprocess

    from verimim.fuzz.campaign import _write_failure
    from verimim.fuzz.signature import Signature
    from verimim.fuzz.task import Checked

    mark = tmp_path / "imported"
    preload = tmp_path / "preload.py"
    preload.write_text(f"open({str(mark)!r}, 'a').write('x')\n", encoding="utf-8")
    racy = (Path(__file__).parent.parent / "programs" / "runtime_errors" / "race_global_groups.mim").read_text()
    sig = Signature("reproducer", "", "kernels", "")
    row = Checked(4, 1, (1,), defect=None, features=(), ops=0, kernels=1, launches=1, size=len(racy),
                  verdict="reproducer", signature=sig, message="`verimim run prog.mim --schedule 0` does not report E-RACE",
                  text=racy)
    run: Any = SimpleNamespace(journal=SimpleNamespace(dir=tmp_path), preload=(str(preload),))
    _write_failure(run, row, sig)
    out = subprocess.run(["sh", str(tmp_path / "failures" / sig.key / "reproduce.sh")], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert out.stderr.count("error[E-RACE]") == 2, out.stderr[-3000:]  # check's, and the run's
    # check, check --json (which names the runs), and the counterexample's run
    assert mark.read_text() == "xxx", out.stderr[-3000:]
