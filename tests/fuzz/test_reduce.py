"""The Mim-aware delta reducer (verimim.fuzz.reduce) and failure signatures
(verimim.fuzz.signature): each rewrite on its own, a whole reduction that keeps the failure
and shrinks the program, a failure that does not reproduce, and signatures of a broken phase."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from verimim.driver import run_with_big_stack
from verimim.fuzz import reduce as red
from verimim.fuzz.signature import Signature, of_verdict
from verimim.fuzz.strategies import check_generated, canonical, count_ops, reparse
from verimim.fuzz.task import generate, program_seed


def _canon(text: str) -> str | None:
    try:
        return canonical(text)
    except Exception:  # noqa: BLE001
        return None


def _program(index: int):  # type: ignore[no-untyped-def]
    return run_with_big_stack(lambda: generate(program_seed(11, index))[0])


def _first_with(op: str):  # type: ignore[no-untyped-def]
    for i in range(40):
        prog = _program(i)
        if prog.defect is None and op in prog.text and prog.stat("kernels") >= 2:
            return prog
    pytest.fail(f"no generated program with {op} and two kernels among the first 40")


def test_rewrites_do_what_they_say() -> None:
    launch = ["    gpu.launch @(0, ()) (1, 2, gpu.default_stream, ff, ()) k () ((m0, m1, m4), after)"]
    assert list(red._skip_calls(launch)) == [["    after (m0, m1, m4)"]]
    branch = ["    (else, then)#(core.icmp.e @256 (a, b)) (m1, m3)"]
    assert list(red._pick_branches(branch)) == [["    then (m1, m3)"], ["    else (m1, m3)"]]
    lets = ["    let _1 = mem.store @(I32, 0) (m0, p, 3I32);", "    f (_1, _2#1)"]
    assert ["    f (m0, _2#1)"] in list(red._bypass_lets(lets))
    hoist = ["    let x = core.wrap.add @4294967296 0 (a, core.wrap.mul @4294967296 0 (b, c));"]
    got = {ln[0] for ln in red._hoist_operands(hoist)}
    assert "    let x = a;" in got and "    let x = core.wrap.add @4294967296 0 (a, b);" in got
    assert ["    f (0I16, 4)"] in list(red._shrink_literals(["    f (37I16, 4)"]))
    assert not list(red._shrink_literals(["    core.wrap.add @4294967296 0 (a, b)"])), "types are not literals"


def test_reduction_keeps_the_failure_and_shrinks_the_program() -> None:
    prog = _first_with("core.wrap.mul")

    def keeps(text: str) -> bool:  # a stand-in for "the same signature": a multiplication survives
        return "core.wrap.mul" in text

    r = run_with_big_stack(lambda: red.reduce_text(prog.text, keeps, _canon, budget_s=60))
    assert r.status in ("fixpoint", "budget") and r.accepted > 0
    assert keeps(r.text) and _canon(r.text) == r.text, "the result type-checks and round-trips"
    assert r.size_after * 3 <= r.size_before, (r.size_before, r.size_after)
    assert (r.size_before, r.lines_before) == red.size(prog.text)
    assert sum(count_ops(run_with_big_stack(lambda: reparse(r.text))).values()) < prog.ops


def test_a_failure_that_does_not_reproduce_is_left_alone() -> None:
    prog = _program(0)
    r = run_with_big_stack(lambda: red.reduce_text(prog.text, lambda t: False, _canon, budget_s=5))
    assert r.status == "not reproducible" and r.text == prog.text and r.accepted == 0


@pytest.fixture
def broken_phase(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from verimim.phases.pipeline import PHASES

    phase = PHASES["gpu.split_apply"]

    def broken(self, prog):  # type: ignore[no-untyped-def]
        raise KeyError("broken on purpose")

    monkeypatch.setattr(type(phase), "apply", broken)
    yield "gpu.split_apply"


def test_signature_of_a_broken_phase(broken_phase: str) -> None:
    sigs = set()
    for i in range(3):
        prog = _program(i)
        v = run_with_big_stack(lambda: check_generated(prog, verify=False, schedules=1))
        sigs.add(of_verdict(v))
    (sig,) = sigs  # three programs, one bug, one signature
    assert sig.kind == "internal" and sig.code == "E-INTERNAL" and sig.phase == broken_phase
    assert sig.where.startswith("KeyError@verimim.")


def test_passing_program_has_no_signature() -> None:
    prog = _program(0)
    v = run_with_big_stack(lambda: check_generated(prog, verify=False, schedules=1))
    if v.ok:
        assert of_verdict(v) is None and "pipeline" in v.times and v.phases
    else:  # a real verimim bug on this program: it has a signature all the same
        assert isinstance(of_verdict(v), Signature)


def test_what_keeps_a_failure_the_same_besides_its_signature() -> None:
    from verimim.fuzz.task import evidence

    # two parts of verimim disagree on the program itself: the signature is enough
    assert evidence(Signature("spec", "E-SPEC", "gpu.split_apply")) == "signature"
    assert evidence(Signature("diff", "E-DIFF", "compile.beta_red")) == "signature"
    assert evidence(Signature("internal", "E-INTERNAL", "gpu.mem_checks", "KeyError@verimim.x:f")) == "signature"
    assert evidence(Signature("missed-defect", "E-RACE", "kernels")) == "signature"  # a run reported it
    # what the generator built into the program: only regenerated programs have it again
    assert evidence(Signature("missed-defect", "E-DOUBLE-FREE", "interp")) == "construction"
    assert evidence(Signature("missed-defect", "E-ADDR-SPACE", "check")) == "construction"
    assert evidence(Signature("false-positive", "E-OOB", "interp")) == "construction"
    # check's error on a well-defined program: the interpreter witnesses that an edit is still well-defined
    assert evidence(Signature("false-positive", "E-RACE", "kernels")) == "clean runs"
    assert evidence(Signature("false-positive", "E-MEM-CROSSING", "gpu.mem_checks")) == "clean runs"


def _first_defect(kind: str):  # type: ignore[no-untyped-def]
    for i in range(200):
        prog, choices = run_with_big_stack(lambda: generate(program_seed(1, i)))
        if prog.defect == kind:
            return prog, choices
    pytest.fail(f"no {kind} program among the first 200 of seed 1")


def test_runs_clean_is_the_interpreter_finding_no_fault() -> None:
    from verimim.fuzz.strategies import runs_clean

    clean = _program(0)
    assert clean.defect is None and run_with_big_stack(lambda: runs_clean(clean.text, clean.args))
    bad, _ = _first_defect("double_free")
    assert not run_with_big_stack(lambda: runs_clean(bad.text, bad.args))
    assert not run_with_big_stack(lambda: runs_clean("fun extern main", ())), "a text that does not load is no witness"


def test_a_missed_defect_is_reduced_to_a_program_that_still_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter patched to overlook a second free: the double_free program is a missed
    defect. Its reduction must still free a block twice (the unpatched interpreter says so); a
    text reducer left alone cut the frees out and kept a program with none (the same signature:
    nothing reported)."""
    from verimim.fuzz.strategies import runs_clean
    from verimim.fuzz.task import Settings, _reduce
    from verimim.interp import memory

    prog, choices = _first_defect("double_free")
    strict = memory.Memory.free

    def lenient(self, p, loc):  # type: ignore[no-untyped-def]
        if not p.block.live:
            return None
        return strict(self, p, loc)

    monkeypatch.setattr(memory.Memory, "free", lenient)
    v = run_with_big_stack(lambda: check_generated(prog))
    sig = of_verdict(v)
    assert sig == Signature("missed-defect", "E-DOUBLE-FREE", "interp"), v.message
    r = run_with_big_stack(lambda: _reduce(Settings(seed=1), choices, sig, 30.0))
    assert r.status in ("fixpoint", "budget") and r.accepted > 0 and r.size_after < r.size_before, r
    assert run_with_big_stack(lambda: runs_clean(r.text, r.args)), "patched, the reduced program still misses it"
    monkeypatch.setattr(memory.Memory, "free", strict)
    assert not run_with_big_stack(lambda: runs_clean(r.text, r.args)), "unpatched, it frees a block twice"
    from verimim.fuzz.strategies import _interpret
    from verimim.phases.base import Program

    obs = run_with_big_stack(lambda: _interpret(Program(reparse(r.text)), ["prog.mim", *r.args], 0))
    assert obs.code == "E-DOUBLE-FREE"


def test_choice_shrinking_ends_at_a_fixed_point() -> None:
    # A replay that normalises every candidate back to the same program keeps nothing (a
    # candidate that is not smaller is not kept: the passes used to keep it and spin until the
    # budget ran out).
    same = (3, True, 7)
    _, text, _, kept, out_of_time = red.shrink_choices(same, "f (1, 2)\n", lambda cs: ("f (1, 2)\n", same),
                                                       lambda t: True, 30)
    assert (text, kept, out_of_time) == (None, 0, False)

    # Choices that decide the program's size shrink to the smallest that still fails: here,
    # a count of at least 5 operations (halving finds 5 from 40, the simplest value 0 fails).
    def regen(cs: tuple[object, ...]) -> tuple[str, tuple[object, ...]]:
        n = max(0, int(cs[0]))  # type: ignore[call-overload]
        return "op;\n" * n, (n, *cs[1:])

    best, text, _, kept, out_of_time = red.shrink_choices((40, "xyz"), "op;\n" * 40, regen,
                                                          lambda t: t.count("op") >= 5, 30)
    assert not out_of_time and kept >= 2 and best[1] == "" and 5 <= int(best[0]) < 10  # type: ignore[call-overload]
    assert text == "op;\n" * int(best[0])  # type: ignore[call-overload]


def test_a_check_that_no_longer_fits_the_budget_is_not_begun() -> None:
    # Each stage looked at the clock before a check only: a check of a large program (seconds)
    # begun at the budget's last moment ran it over by 25-90 % in campaigns. With checks of
    # 0.4 s and a budget of 1 s, the third check (begun at 0.8 s) would end at 1.2 s.
    import time

    def slow_refusal(text: str) -> bool:
        time.sleep(0.4)
        return False

    def regen(cs: tuple[object, ...]) -> tuple[str, tuple[object, ...]]:  # ten counts of operations
        return "op;\n" * sum(max(0, int(c)) for c in cs), cs  # type: ignore[call-overload]

    t0 = time.monotonic()
    _, text, tries, _, out_of_time = red.shrink_choices((100,) * 10, "op;\n" * 1000, regen, slow_refusal, 1.0)
    assert out_of_time and text is None and tries == 2 and time.monotonic() - t0 < 1.0

    # the stages share one Budget: the text stage knows a check's cost before its first
    prog = _program(0)
    clock = red.Budget(1.0)
    red.shrink_choices((100,) * 10, "op;\n" * 1000, regen, slow_refusal, clock)
    clock.seconds = 1.9
    r = run_with_big_stack(lambda: red.reduce_text(prog.text, slow_refusal, _canon, clock, known_to_fail=True))
    assert r.status == "budget" and r.tries >= 1 and time.monotonic() - clock.start < clock.seconds
