"""The kernel verifier follows recursion that returns (smt/kernel_eval.py: one activation per
entry, closures that resume the caller's): verdicts on the corpus's recursive kernels, each
against what `verimim run` does, and the wrong models of recursion the programs tell apart."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.smt import kernel_programs as kp
from tests.smt.test_kernel_verify import codes, verify
from verimim import driver
from verimim.smt import kernel_eval, kernel_model

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
SUM = PROGRAMS / "valid" / "kernel_recursive_sum_returns.mim"
RACE_AFTER = PROGRAMS / "runtime_errors" / "race_after_a_recursive_call_returns.mim"
RACE_DEEPEST = PROGRAMS / "runtime_errors" / "race_in_the_deepest_recursive_call.mim"
AS_DEEP_AS_ARGC = PROGRAMS / "valid" / "kernel_recursion_as_deep_as_argc.mim"
LOCAL_SLOT = PROGRAMS / "valid" / "kernel_recursion_local_slot_per_activation.mim"


def verdicts(path: Path) -> tuple[list[dict[str, Any]], set[str]]:
    entries, diags = verify(str(path))
    return entries, codes(diags)


def run_codes(path: Path, args: list[str] | None = None) -> set[str]:
    return {d.code for d in driver.run(str(path), [], args or []).diagnostics}


def refuted_by_the_model(entry: dict[str, Any]) -> bool:
    """Refuted by two symbolic work-items whose paths reach the race, not by a run that shows
    it past where the paths were cut (which a model that cuts recursion gets too)."""
    cex = entry["counterexample"] or {}
    return entry["races"] == "refuted" and "work_items" in cex and "shown_by_run" not in cex


def assert_proved_and_runs_to(path: Path, result: int) -> None:
    """check proves races and divergence away, and `run` returns `result`."""
    entries, found = verdicts(path)
    assert [(e["races"], e["divergence"]) for e in entries] == [("proved", "proved")], entries
    assert not found
    run = driver.run(str(path), [], [])
    assert run.ok and run.data["result"] == result


def test_a_recursion_that_returns_is_followed_back_to_its_caller() -> None:
    # sum 5 = 15 through five returns, each adding its own activation's n: the store after the
    # call is the work-item's own cell only with the right sum. Proved (it was `bounded`).
    assert_proved_and_runs_to(SUM, 18)


def test_a_race_after_the_recursion_returns_is_refuted_by_the_model() -> None:
    entries, found = verdicts(RACE_AFTER)
    assert refuted_by_the_model(entries[0]), entries
    assert entries[0]["divergence"] == "proved" and "E-RACE" in found
    assert {a["line"] for a in entries[0]["counterexample"]["accesses"]} == {26}
    assert "E-RACE" in run_codes(RACE_AFTER)


def test_a_race_in_the_deepest_activation_is_refuted_by_the_model() -> None:
    entries, found = verdicts(RACE_DEEPEST)
    assert refuted_by_the_model(entries[0]), entries
    assert {a["line"] for a in entries[0]["counterexample"]["accesses"]} == {16}  # in `base`
    assert "E-RACE" in run_codes(RACE_DEEPEST)


def test_a_recursion_as_deep_as_argc_is_bounded_never_proved() -> None:
    # The race is in the activation at depth 20, past the 16 entries a path unrolls: the
    # verdicts are `bounded` (cut in `walk`), not `proved`; a run with 20 arguments shows it.
    entries, found = verdicts(AS_DEEP_AS_ARGC)
    assert [(e["races"], e["divergence"]) for e in entries] == [("bounded", "bounded")], entries
    assert "cut in `walk`" in entries[0]["detail"] and not found
    assert not run_codes(AS_DEEP_AS_ARGC)
    assert "E-RACE" in run_codes(AS_DEEP_AS_ARGC, [str(k) for k in range(20)])


def test_each_activation_has_its_own_local_slot() -> None:
    # Each activation's `mem.slot (I32, 5)` is a new block (interp: a stack block per run):
    # what the inner activations store does not reach the outer ones' slots.
    assert_proved_and_runs_to(LOCAL_SLOT, 18)


MUTUAL = """fun even (n: I32): I32 =
    (deeper, base)#(core.icmp.e (n, 0I32)) ()
    where
        con base () = return 0I32;
        con deeper () =
            ret r = odd $ (core.wrap.sub 0 (n, 1I32));
            return (core.wrap.add 0 (r, core.wrap.mul 0 (n, 10I32)));
    end;

fun odd (n: I32): I32 =
    (deeper, base)#(core.icmp.e (n, 0I32)) ()
    where
        con base () = return 0I32;
        con deeper () =
            ret r = even $ (core.wrap.sub 0 (n, 1I32));
            return (core.wrap.add 0 (r, n));
    end;

"""
# even 4 = 40 + odd 3 = 40 + 3 + even 2 = 43 + 20 + odd 1 = 64; the cell is the work-item's own
# only when the sum is SUM.
MUTUAL_KERNEL = """    ret s = even $ 4I32;
    let cell = core.select (core.icmp.e (s, {SUM}I32), core.bitcast (Idx 16) (core.bitcast Nat item_id), 0_16);
    let m1 = mem.store (m1, mem.lea (out, cell), core.wrap.add 0 (s, core.bitcast I32 item_id));
    return (m1, m3, m4, m5);"""


@pytest.mark.parametrize("total, races", [(64, "proved"), (63, "refuted")])
def test_a_mutual_recursion_resumes_each_caller(tmp_path: Path, total: int, races: str) -> None:
    # Each function's return continuation is passed to the other: the closure a call passes
    # resumes its own caller's activation (n and return), through both functions.
    text = kp.program(MUTUAL_KERNEL.replace("{SUM}", str(total)), groups=1, items=4)
    path = Path(kp.write(tmp_path, f"mutual{total}", text.replace("con kernel", MUTUAL + "con kernel", 1)))
    entries, found = verdicts(path)
    assert [(e["races"], e["divergence"]) for e in entries] == [(races, "proved")], entries
    assert ("E-RACE" in found) == (races == "refuted") == ("E-RACE" in run_codes(path))


SUM_HELPER = """fun sum (n: I32): I32 =
    (deeper, base)#(core.icmp.e (n, 0I32)) ()
    where
        con base () = return 0I32;
        con deeper () =
            ret r = sum $ (core.wrap.sub 0 (n, 1I32));
            return (core.wrap.add 0 (r, n));
    end;

"""
# A loop to the kernel's argument n (argc - 1) calling `sum 3` in each iteration; the cell is
# the work-item's own only when the sum is 6.
LOOP_CALLS_SUM = """    loop (m1, 0I32)
    where
        con loop (m1: gpu.GlobalM, k: I32) =
            (exit, body)#(core.icmp.sl (k, n)) m1
            where
                con exit (m1: gpu.GlobalM) = return (m1, m3, m4, m5);
                con body (m1: gpu.GlobalM) =
                    ret s = sum $ 3I32;
                    let cell = core.select (core.icmp.e (s, 6I32), item_id, 0_4);
                    let m1 = mem.store (m1, mem.lea (out, cell), core.wrap.add 0 (s, k));
                    loop (m1, core.wrap.add 0 (k, 1I32));
            end;
    end;"""


def test_a_loop_whose_body_calls_a_recursive_helper_is_summarized(tmp_path: Path) -> None:
    # A loop of argc iterations (past the unrolling bound) calls `sum 3` in each: the recursion
    # is followed inside the loop body's exploration too (it leaves the loop's activation
    # alone), so the loop is summarized and the kernel proved. It was `bounded`: every path was
    # cut at the recursive call, in the summary's exploration too.
    text = kp.arg_program(LOOP_CALLS_SUM, groups=1, items=4, n=4)
    path = Path(kp.write(tmp_path, "loop_calls_sum", text.replace("con kernel", SUM_HELPER + "con kernel", 1)))
    entries, found = verdicts(path)
    assert [(e["races"], e["divergence"]) for e in entries] == [("proved", "proved")], entries
    assert "inductive invariants" in entries[0]["detail"] and not found


# ------------------------------------------------------------------ wrong models


def _one_frame_per_mutable(self: kernel_eval.Evaluator, c: kernel_eval.Closure) -> None:
    """Wrong: a return continuation reads whatever activation of its function came last."""


def _recomputed_after_return(self: kernel_eval.Evaluator, resumed: list[Any]) -> None:
    """Wrong: the caller's frame comes back, what it computed does not (a slot runs again)."""


def _slot_per_operation(tr: Any, d: Any, number: int | None, space: int) -> kernel_model.SlotKey:
    """Wrong: one object per slot operation, as for a static shared slot."""
    return (d.gid, number, 0)


@pytest.mark.parametrize("owner, name, wrong", [
    (kernel_eval.Evaluator, "_resume", _one_frame_per_mutable),
    (kernel_eval.Evaluator, "_recall", _recomputed_after_return),
    (kernel_model, "_slot_key", _slot_per_operation),
], ids=["one-frame-per-mutable", "recomputed-after-return", "slot-per-operation"])
def test_wrong_models_of_recursion_are_caught(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                                              wrong: Any) -> None:
    # Each wrong model loses a verdict the programs above have (a proof, or a refutation by the
    # model itself) or claims a false race: the tests above fail with it.
    monkeypatch.setattr(owner, name, wrong)
    total, after, slot = (verdicts(p)[0][0] for p in (SUM, RACE_AFTER, LOCAL_SLOT))
    assert not (total["races"] == "proved" and refuted_by_the_model(after) and slot["races"] == "proved"), \
        (total, after, slot)
