"""smt/differential.py: the one observation-and-compare of the differential specs."""
from __future__ import annotations

import pytest

from verimim.driver import run_with_big_stack
from verimim.frontend.loader import load_text
from verimim.phases.base import PhaseResult, Program
from verimim.smt.differential import compare

LEAKY = """plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, p) = mem.alloc (I32, 0) m0;
    let m0 = mem.store (m0, p, VALUE);
    return (m0, 0I32);
"""


def _res(before: str, after: str) -> PhaseResult:
    w0, _ = load_text(LEAKY.replace("VALUE", before))
    w1, _ = load_text(LEAKY.replace("VALUE", after))
    return PhaseResult("test", Program(w0), Program(w1))


def test_the_same_program_is_not_refuted() -> None:
    out, seen = run_with_big_stack(lambda: compare(_res("1I32", "1I32")))
    assert out is None and "argc = 1: 0" in seen and "argc = 2: 0" in seen


def test_a_store_only_the_final_heap_shows_is_refuted() -> None:
    # same result, same warnings (W-LEAK), the same one store: only the heap's bytes differ
    out, _ = run_with_big_stack(lambda: compare(_res("1I32", "2I32")))
    assert out is not None and out.status == "refuted" and "final host heap differs" in out.detail, out


def test_effects_can_be_left_out_for_a_lowering() -> None:
    out, seen = run_with_big_stack(lambda: compare(_res("argc", "argc"), (["prog"],), effects=False))
    assert out is None and "state-changing" not in seen


def test_runs_the_interpreter_cannot_finish_are_inconclusive_not_a_refutation(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both runs stopped with E-UNSUPPORTED, at different places (their heaps differ): neither says
    # what the program does, so the phase is not refuted (a false E-SPEC of buffer.lower_ptr).
    import verimim.smt.differential as differential
    from verimim.interp.observe import Observation

    seen = iter([Observation(("fault", "E-UNSUPPORTED"), b"", (b"\x01",), (), ()),
                 Observation(("fault", "E-UNSUPPORTED"), b"", (b"\x01", b"\x02"), (), ())])
    monkeypatch.setattr(differential, "run", lambda prog, argv, effects: next(seen))
    out, _ = compare(_res("1I32", "1I32"), (["prog"],))
    assert out is not None and out.status == "unknown" and "inconclusive" in out.detail, out
