"""A phase that says it had nothing to do must show there was nothing (verimim.smt.spec_skips):
right skips are `skipped (checked)`, skips of phases with work to do are refuted."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from verimim.driver import run_with_big_stack
from verimim.frontend.loader import load_program
from verimim.phases.base import Phase, PhaseResult, Program
from verimim.phases.btensor import LowerBtensor
from verimim.phases.inline import BetaRed, LamSpec
from verimim.phases.lower_ptr import LowerPtr
from verimim.phases.rewriter import Rewriter
from verimim.phases.runner import run_pipeline
from verimim.phases.split import SplitApply
from verimim.phases.witness import Inlining
from verimim.smt.spec_skips import check_skip

VALID = PROGRAMS / "valid"


def _before(path: Path, phase: str) -> Program:
    def go() -> Program:
        world, _ = load_program(str(path), [])
        run = run_pipeline(world, verify=False, until=phase)
        assert not run.stopped, run.diagnostics
        return run.results[-1].before
    return run_with_big_stack(go)


class _Idle(Phase):
    """Wrong: says it had nothing to do, whatever the program."""

    def __init__(self, of: Phase) -> None:
        self.name = of.name
        self.mode = getattr(of, "mode", None)

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog, skipped="nothing to do")
        if self.mode is not None:  # an inlining phase's log, claiming nothing was inlined or left
            res.witness = Inlining(mode=self.mode)
        return res


@pytest.mark.parametrize("phase,path", [
    (LowerPtr(), VALID / "buffer_roundtrip.mim"),
    (SplitApply(), VALID / "kernel_no_args.mim"),
    (BetaRed(), VALID / "dependent_fun.mim"),
    (LamSpec(), VALID / "curried_lam.mim"),
    (LowerBtensor(), VALID / "btensor_sum.mim"),
])
def test_a_false_claim_of_nothing_to_do_is_refuted(phase: Phase, path: Path) -> None:
    prog = _before(path, phase.name)
    right = run_with_big_stack(lambda: phase.apply(prog))
    assert right.skipped is None  # the real phase has work here
    out = check_skip(run_with_big_stack(lambda: _Idle(phase).apply(prog)))
    assert out.status == "refuted" and "nothing to do" in out.detail, out.detail


@pytest.mark.parametrize("phase,path", [
    (LowerPtr(), VALID / "kernel_no_args.mim"),
    (SplitApply(), VALID / "host_loop_sum.mim"),
    (BetaRed(), VALID / "host_loop_sum.mim"),
    (LowerBtensor(), VALID / "kernel_no_args.mim"),
])
def test_a_true_claim_is_checked(phase: Phase, path: Path) -> None:
    prog = _before(path, phase.name) if phase.name != "buffer.lower_ptr" else _before(path, "gpu.split_apply")
    res = run_with_big_stack(lambda: phase.apply(prog))
    assert res.skipped is not None
    out = check_skip(res)
    assert out.status == "skipped" and out.detail.endswith("(checked)"), out.detail


def test_a_skip_that_changes_the_program_is_refuted() -> None:
    prog = _before(VALID / "kernel_no_args.mim", "buffer.lower_ptr")
    res = PhaseResult("buffer.lower_ptr", prog, Program(Rewriter(prog.host).run(), prog.device),
                      skipped="the program uses no buffer")
    out = check_skip(res)
    assert out.status == "refuted" and "changed the program" in out.detail


def test_check_reports_checked_skips() -> None:
    world, _ = run_with_big_stack(lambda: load_program(str(VALID / "host_loop_sum.mim"), []))
    run = run_with_big_stack(lambda: run_pipeline(world, timeout_ms=10_000))
    split = next(p for p in run.phases if p["name"] == "gpu.split_apply")
    assert split["status"] == "skipped" and split["detail"].endswith("(checked)")
