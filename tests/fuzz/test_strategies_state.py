"""The stateful kernel shapes (fuzz/shapes_state.py, issue 13 item 6): each is generated, round-
trips and is counted; generated programs pass the oracle; and the oracle, on these shapes, tells
apart the wrong variants that once gave unsound verdicts (a helper with a shared slot copied into
two call sites, shared slots numbered per path)."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from verimim.driver import run_with_big_stack
from verimim.fuzz import shapes_state
from verimim.fuzz import strategies as S
from verimim.fuzz.kernel_oracle import KernelVerdicts, judge

SETTINGS = settings(deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))

SHAPES = {"loop.slot_acc", "loop.cont_carried", "branch.uneven_slot", "helper.shared_twice",
          "store.value_guarded", "launch.argc_guarded_race"}


def _collect(strategy: Any, n: int) -> list[S.GeneratedProgram]:
    out: list[S.GeneratedProgram] = []

    @settings(SETTINGS, max_examples=n)
    @given(strategy)
    def run(p: S.GeneratedProgram) -> None:
        out.append(p)
    run_with_big_stack(run)
    return out


def _only(monkeypatch: pytest.MonkeyPatch, shape: str | None = None) -> None:
    """Every kernel operation one of the stateful shapes (or the one named)."""
    if shape is None:
        monkeypatch.setattr(S._KernelGen, "op", lambda self: self.op_stateful())
    else:
        monkeypatch.setattr(S._KernelGen, "op", lambda self: getattr(shapes_state, shape)(self))


def _first_with(progs: list[S.GeneratedProgram], feature: str) -> S.GeneratedProgram:
    hit = next((p for p in progs if feature in p.features_used), None)
    assert hit is not None, f"no program with {feature} among {len(progs)}"
    return hit


def test_every_stateful_shape_is_generated_counted_and_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch)
    progs = _collect(S.kernels(max_ops=3), 40)
    seen: set[str] = set()
    for p in progs:
        assert S.canonical(p.text) == p.text
        seen |= p.features_used & SHAPES
    assert seen == SHAPES, f"never generated: {sorted(SHAPES - seen)}"


def test_stateful_shapes_switch_off_with_their_feature() -> None:
    for p in _collect(S.programs(max_kernels=2, max_ops=4, stateful_shapes=False), 20):
        assert not p.features_used & (SHAPES | {"race.shared", "branch.value_guarded", "loop.past_bound"})


@pytest.mark.parametrize("defect", [None, "race", "divergence"])
def test_stateful_shapes_pass_the_oracle(monkeypatch: pytest.MonkeyPatch, defect: str | None) -> None:
    _only(monkeypatch)
    for p in _collect(S.kernels(defect=defect, max_ops=2), 6):
        v = S.check_generated(p, verify=defect is None, schedules=2)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"


def test_the_races_in_shared_memory_and_behind_a_loop_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S._KernelGen, "op", lambda self: None)
    for inject in (shapes_state.shared_race, lambda kg: shapes_state.value_guarded_store(kg, race=True)):
        monkeypatch.setattr(S._KernelGen, "inject", inject)
        for p in _collect(S.kernels(defect="race", max_ops=0), 4):
            v = S.check_generated(p, verify=False, schedules=2)
            assert v.ok, f"{v.kind}: {v.message}\n{p.text}"
            assert v.kernels["refuted"] >= 1, (v.kernels, p.text)


def test_a_loop_result_the_generator_computes_is_what_the_interpreter_computes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The race-free store writes the work-item's own cell only where the loop's result is the
    # value the generator computed: a wrong computation would be a race (E-RACE in the runs,
    # a failure of the oracle), as long loops (past the verifier's bound) included.
    # (the shape stores to the kernel's `out` argument: a kernel drawn without one gets none)
    monkeypatch.setattr(S._KernelGen, "op",
                        lambda self: shapes_state.value_guarded_store(self) if "out" in self.argv else None)
    progs = _collect(S.kernels(max_ops=2), 16)
    assert any("loop.past_bound" in p.features_used for p in progs)
    assert any("loop.cont_carried" in p.features_used for p in progs)
    for p in progs[:8]:
        v = S.check_generated(p, verify=False, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"


def test_the_oracle_refutes_an_inliner_that_copies_a_helper_with_a_shared_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # compile.lam_spec before 4e8a4dd: a helper holding a shared slot was copied into each call
    # site (two blocks): the second call's read of what the first wrote read a block never
    # written. The helper shape's second call reads without writing (half of the time).
    from verimim.phases import inline

    _only(monkeypatch, "helper_with_shared_slot")
    # (host loops off: the program set in which the second call reads without writing)
    progs = [p for p in _collect(S.kernels(max_ops=1, host_loops=False), 12) if "helper.shared_twice" in p.features_used]
    assert all(S.check_generated(p, verify=False, schedules=1).ok for p in progs[:4])
    monkeypatch.setattr(inline, "_maybe_shared_slot", lambda d: False)
    failed = [v for v in (S.check_generated(p, verify=False, schedules=1) for p in progs[:6]) if not v.ok]
    assert failed, "copies of the helper went unnoticed"
    assert all(v.kind == "diff" and "lam_spec" in v.phase for v in failed), [(v.kind, v.phase) for v in failed]


def test_the_oracle_refutes_shared_slots_numbered_per_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # check before fd51b50: a path's shared slots were numbered in the order it allocated them,
    # so the slots of two arms were one object: a false race on a race-free program.
    from verimim.smt import kernel_model

    _only(monkeypatch, "uneven_slot_branch")
    progs = _collect(S.kernels(max_ops=3, loops=False), 80)
    assert all(S.check_generated(p, verify=False, schedules=1).ok for p in progs[:6])

    def path_order(tr: Any, d: Any, number: int | None, space: int) -> Any:
        n = tr.slot_runs.get((-1, None), 0)
        tr.slot_runs[(-1, None)] = n + 1
        return (-1, None, n)

    monkeypatch.setattr(kernel_model, "_slot_key", path_order)
    kinds = [v.kind for v in (S.check_generated(p, verify=False, schedules=1) for p in progs) if not v.ok]
    assert "false-positive" in kinds, kinds


def test_past_the_bound_a_bounded_verdict_is_no_miss_but_a_proof_is() -> None:
    entry = {"name": "k", "races": "bounded", "divergence": "proved", "counterexample": None}
    bounded = KernelVerdicts([entry], set())
    assert judge(bounded, {"E-RACE"}, False, lambda a, s: set(), past_bound=True) is None
    assert judge(bounded, {"E-RACE"}, False, lambda a, s: set())[0] == "missed"
    proved = KernelVerdicts([{**entry, "races": "proved"}], set())
    assert judge(proved, {"E-RACE"}, False, lambda a, s: set(), past_bound=True)[0] == "missed"


def test_an_e_stream_no_run_reports_is_a_false_alarm() -> None:
    # check's E-STREAM (an operation on an ended stream) is compared with the runs as its races are
    entry = {"name": "k", "races": "proved", "divergence": "proved", "counterexample": None}
    misuse = KernelVerdicts([entry], {"E-STREAM"})
    assert judge(misuse, set(), True, lambda a, s: set())[0] == "false-alarm"
    assert judge(misuse, {"E-STREAM"}, False, lambda a, s: set()) is None
    assert judge(KernelVerdicts([entry], set()), set(), True, lambda a, s: set()) is None


def test_past_the_bound_a_bounded_stream_note_is_no_miss_for_a_race_between_streams() -> None:
    # A program without a launch has its stream verdict as a note only (no entry): a race
    # between streams after a host loop past the bound left check saying "bounded" there, and
    # the oracle, reading entries only, saw nothing ("check says {}") and called it missed.
    from verimim.diagnostics import Diagnostic
    from verimim.verdicts import STREAM_NOTE

    def note(status: str) -> Diagnostic:
        return Diagnostic("E-RACE", f"{STREAM_NOTE}: {status}, proved up to there only: host loops …", severity="note")

    bounded = KernelVerdicts.of([], [note("bounded")])
    assert bounded.bounded("E-RACE") and not bounded.bounded("E-BARRIER-DIVERGENCE")
    assert judge(bounded, {"E-RACE"}, False, lambda a, s: set(), past_bound=True) is None
    assert judge(bounded, {"E-RACE"}, False, lambda a, s: set())[0] == "missed"
    unknown = KernelVerdicts.of([], [note("unknown")])
    assert judge(unknown, {"E-RACE"}, False, lambda a, s: set(), past_bound=True)[0] == "missed"
    assert judge(bounded, {"E-BARRIER-DIVERGENCE"}, False, lambda a, s: set(), past_bound=True)[0] == "missed"


def _argc_race_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def op(self: Any) -> None:
        if "argc" in self.argv and "out" in self.argv and self.N >= 2:
            shapes_state.argc_race(self)
    monkeypatch.setattr(S._KernelGen, "op", op)


def test_the_oracle_refutes_a_verifier_that_checks_launches_for_inputs_that_never_issue_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # check before 83e06f5 verified a launch for every argc, also those for which main never
    # issues it: the kernel racing only when argc is K, launched under argc != K, was refuted.
    from verimim.smt import kernel_streams, kernel_verify

    _argc_race_only(monkeypatch)
    progs = [p for p in _collect(S.programs(max_ops=2, max_kernels=2), 50) if "launch.argc_guarded" in p.features_used]
    assert len(progs) >= 3, f"{len(progs)} guarded launches in 50 programs"
    for p in progs[:3]:
        v = S.check_generated(p, verify=False, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"
    with monkeypatch.context() as m:
        # where main is not modelled (no reach), a race for an argc alone needs a run: no alarm
        m.setattr(kernel_streams.HostRun, "launch_reach", lambda self: None)
        for p in progs[:3]:
            v = S.check_generated(p, verify=False, schedules=1)
            assert v.ok, f"{v.kind}: {v.message}"
    real = kernel_verify.bind_launch

    def ignoring_reach(host: Any, site: Any, inp: Any, issued: Any = None) -> Any:
        launch = real(host, site, inp, None)  # the wrong verifier: every argc, taken as issued
        launch.reach_known = True
        return launch
    monkeypatch.setattr(kernel_verify, "bind_launch", ignoring_reach)
    for p in progs[:3]:
        v = S.check_generated(p, verify=False, schedules=1)
        assert (v.ok, v.kind) == (False, "false-positive"), (v.kind, v.message)


def test_a_gpu_campaign_draws_loops_carrying_a_continuation() -> None:
    # They were left out of GPU campaigns while the GPU backend did not compile a continuation
    # chosen at run time (E-UNSUPPORTED: 2 of 41 `fuzz --target gpu` programs differed on an
    # H100); it compiles them as device-heap records now (runtime/cps_dyn.py).
    from verimim.fuzz.task import generate

    gpu = [run_with_big_stack(lambda i=i: generate(i, gpu=True))[0] for i in range(150)]
    assert any("loop.cont_carried" in p.features_used for p in gpu)
    assert any("loop.slot_acc" in p.features_used for p in gpu)


def test_a_kernel_with_an_injected_defect_is_not_launched_behind_an_argc_guard(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Run with argc = K, such a launch never happens and the defect never shows: the oracle
    # reported a missed race (`fuzz --oracle kernels --budget 300 --seed 2027`).
    _argc_race_only(monkeypatch)
    clean = _collect(S.kernels(max_ops=2), 40)
    assert any("launch.argc_guarded" in p.features_used for p in clean)
    for defect in ("race", "divergence"):
        progs = _collect(S.kernels(defect=defect, max_ops=2), 30)
        assert not any("launch.argc_guarded" in p.features_used for p in progs), defect
