"""fuzz/kernel_oracle.py: the comparison of check's kernel verdicts with runs, on programs
where it must pass and on deliberately wrong verdicts it must catch."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from verimim.fuzz import kernel_oracle as ko


def test_agreeing_program_passes(tmp_path: Path) -> None:
    res = ko.compare(kp.write(tmp_path, "rn", kp.program(kp.READ_NEIGHBOUR)), [[]], race_free=False)
    assert res.ok and res.run_codes == {"E-RACE"} and res.check is not None and res.check.refutes("E-RACE")


def test_a_missed_race_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kp.write(tmp_path, "rn", kp.program(kp.READ_NEIGHBOUR))
    real = ko.kernel_verdicts

    def blind(p: str, timeout_ms: int = 5_000) -> ko.KernelVerdicts:  # a verifier that proves everything
        v = real(p, timeout_ms)
        return ko.KernelVerdicts([dict(e, races="proved", divergence="proved") for e in v.entries], set())

    monkeypatch.setattr(ko, "kernel_verdicts", blind)
    res = ko.compare(path, [[]])
    assert not res.ok and res.kind == "missed"


def test_a_false_alarm_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kp.write(tmp_path, "own", kp.program(kp.OWN_CELL))
    real = ko.kernel_verdicts
    monkeypatch.setattr(ko, "kernel_verdicts", lambda p, timeout_ms=5_000: ko.KernelVerdicts(
        [dict(e, races="refuted") for e in real(p, timeout_ms).entries], {"E-RACE"}))
    res = ko.compare(path, [[]], race_free=True)
    assert not res.ok and res.kind == "false-alarm"


def test_a_wrong_reproducer_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The race needs argc < 9; a counterexample claiming argc = 9 does not reproduce.
    path = kp.write(tmp_path, "arg", kp.arg_program(kp.GUARDED_BY_ARG))
    real = ko.kernel_verdicts

    def wrong(p: str, timeout_ms: int = 5_000) -> ko.KernelVerdicts:
        v = real(p, timeout_ms)
        for e in v.entries:
            e["counterexample"]["run"] = f"verimim run {p}" + " a" * 8 + " --schedule 0"
        return v

    assert ko.compare(path, [[]]).ok
    monkeypatch.setattr(ko, "kernel_verdicts", wrong)
    res = ko.compare(path, [[]])
    assert not res.ok and res.kind == "reproducer"


def test_short_campaign_has_no_failure(tmp_path: Path) -> None:
    # The campaign runner with the kernel mix (what `fuzz --oracle kernels` runs): every
    # generated kernel verified, nothing missed, no false alarm.
    from verimim.fuzz.strategies import run_campaign

    res = run_campaign(12, seed=3, out_dir=str(tmp_path), verify=False, defect_kinds=("race", "divergence"),
                       defect_ratio=0.5)
    assert res.programs >= 1 and res.failures == [], res.failures
    assert res.kernel_programs >= 1 and sum(res.kernels.values()) > 0 and res.false_alarms == 0
