"""Loops the kernel verifier cannot unroll to their end (smt/kernel_loops.py): summarized by
inductive invariants for proofs, never for refutations, and `bounded` where neither decides."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from tests.smt.test_kernel_verify import codes, verify


def _loop(tmp: Path, name: str, stride: int, extra: str = "") -> str:
    body = kp.ARG_LOOP.replace("STRIDE", str(stride))
    if extra:
        body = body.replace("                    loop (m1, core.wrap.add 0 (k, 1I32));", extra)
    return kp.write(tmp, name, kp.arg_program(body, n=1024))


def test_symbolic_trip_count_is_proved_by_an_invariant(tmp_path: Path) -> None:
    entries, diags = verify(_loop(tmp_path, "s8", 8))
    e = entries[0]
    assert (e["races"], e["divergence"]) == ("proved", "proved"), e
    assert "inductive invariants" in e["detail"] and not diags


def test_overlapping_stride_is_refuted_by_unrolling(tmp_path: Path) -> None:
    # t + 7k: work-item 7 at k = 0 and work-item 0 at k = 1 write out[7].
    path = _loop(tmp_path, "s7", 7)
    entries, diags = verify(path)
    assert entries[0]["races"] == "refuted" and "E-RACE" in {d.code for d in diags}
    cex = entries[0]["counterexample"]
    assert cex["main_inputs"]["argc"] >= 3 and cex["kernel_args"]["n"] == cex["main_inputs"]["argc"] - 1


def test_main_initialising_an_array_from_its_indices_is_modelled(tmp_path: Path) -> None:
    # `mem.store (m0, arr, ‹j: 1024; core.bitcast I32 j›)`: main's model stopped at the pack
    # (its body depends on the index), and without main's model a refutation needs a run (the
    # run's counterexample, not Z3's with the kernel's arguments, in the test above).
    from verimim.smt.kernel_verify import host_run
    from verimim.smt.solver import SpecContext

    prog = kp.device_program(_loop(tmp_path, "s7", 7))
    assert "‹j: 1024; core.bitcast" in (tmp_path / "s7.mim").read_text()
    run = host_run(prog.host, SpecContext(), 16)
    assert not isinstance(run, str), run
    assert {p.status for p in run.paths} == {"done", "ub"}  # argc - 1 indexes the array: out of range is UB


def test_race_past_the_unrolling_bound_is_bounded_not_proved(tmp_path: Path) -> None:
    # Only iteration k = 20 (past 16 unrolled entries) writes the common cell out[1000]: the
    # unrolled paths never get there and the summary, which does, only counts for proofs.
    late = """                    (next, clash)#(core.icmp.e (k, 20I32)) m1
                    where
                        con clash (m1: gpu.GlobalM) =
                            let m1 = mem.store (m1, mem.lea (out, 1000_1024), core.bitcast I32 t);
                            next m1;
                        con next (m1: gpu.GlobalM) = loop (m1, core.wrap.add 0 (k, 1I32));
                    end;"""
    entries, diags = verify(_loop(tmp_path, "late", 8, late))
    assert entries[0]["races"] == "bounded", entries[0]
    assert "unrolled up to 16" in entries[0]["detail"] and "E-RACE" not in {d.code for d in diags}


def test_a_loop_whose_body_heads_a_loop_too_is_summarized_once() -> None:
    # The kernel of a 16-step btensor reduction: the unrolling bound cuts it, so its loop is
    # summarized, and a continuation of the loop's body heads a loop as well (it reaches itself
    # through the header). Summarizing the header again inside its own summary recursed without
    # end; bounding that, the nested explorations still took 4 minutes, now bounded by the
    # summaries' time budget. The invariant found proves both verdicts.
    path = Path(__file__).resolve().parents[1] / "programs" / "valid" / "btensor_reduce_16_steps.mim"
    entries, diags = verify(str(path))
    assert [(e["races"], e["divergence"]) for e in entries] == [("proved", "proved")], [e["detail"] for e in entries]
    assert not [d for d in diags if d.severity == "error"]


LOOPS = Path(__file__).resolve().parent / "loops"


@pytest.mark.parametrize("name, code", [("l01_local_var_loop_argc3_race", "E-RACE"),
                                        ("k01_cont_param_loop_argc3", "E-RACE"),
                                        ("k02_cont_param_barrier_div_argc3", "E-BARRIER-DIVERGENCE")])
def test_a_summary_covers_only_integer_loop_variables(name: str, code: str) -> None:
    # A 40-iteration loop whose iteration 30 (with argc = 3) changes what the summary's "any
    # iteration" does not cover: the work-item's local memory (l01), the continuation the loop
    # carries (k01, k02: one with a barrier). Such a loop is not summarized: its verdicts stay
    # `bounded`. They were `proved` "with loops summarized by inductive invariants", while
    # `verimim run FILE a b` faults.
    from verimim import driver

    path = LOOPS / f"{name}.mim"
    entries, diags = verify(str(path))
    assert all(e["races"] != "proved" and e["divergence"] != "proved" for e in entries), entries
    assert all("bounded" in (e["races"], e["divergence"]) for e in entries), entries
    run = driver.run(str(path), [], ["a", "b"])
    assert code in {d.code for d in run.diagnostics}


S06 = LOOPS / "s06_long_host_loop_then_stream_race_no_launch.mim"


@pytest.mark.parametrize("count, verdict", [("20", "refuted"), ("300", "bounded"),
                                            ("core.nat.add (core.bitcast Nat argc, 20)", "bounded")],
                         ids=["fixed 20", "fixed past 256", "argc + 20"])
def test_streams_past_a_host_loop_are_refuted_where_the_path_fixes_it_else_bounded(
        tmp_path: Path, count: str, verdict: str) -> None:
    # A host loop, then a host read of a pending copy's buffer (a race `run` shows). A loop of
    # 20 iterations was cut by the unrolling bound of 16, and `check` said bounded; the host model
    # now follows a loop whose every iteration decides nothing on unknown values (a count the
    # path fixes) up to 256 entries and finds the race. Past 256, or with a count that depends on
    # argc (every iteration decides on it: the bound of 16), the paths are cut before the race:
    # with no launch there is no `kernels` entry to say `bounded`, so a note says so (`check` said
    # ok, 7 proved, nothing else before the note) and --strict fails.
    from verimim import driver
    from verimim.verdicts import from_stream_diagnostics

    text = S06.read_text()
    assert "spin $ (m0, 20);" in text
    path = tmp_path / "s06.mim"
    path.write_text(text.replace("spin $ (m0, 20);", f"spin $ (m0, {count});"))
    rep = driver.check(str(path), [])
    if verdict == "refuted":
        assert not rep.ok and "E-RACE" in {d.code for d in rep.diagnostics if d.severity == "error"}, rep.diagnostics
    else:
        assert rep.ok and [v.status for v in from_stream_diagnostics(rep.diagnostics, launches=False)] == ["bounded"], rep.diagnostics
        assert any("up to 256 where the path decides nothing" in d.message for d in rep.diagnostics)
    assert "E-RACE" in {d.code for d in driver.run(str(path), [], []).diagnostics}


# A loop past the unrolling bound (n = argc - 1) with a barrier after it: what follows the
# loop's exit is no part of its body. Its summary's exploration ran every path on to the
# kernel's end, so the barrier there kept the loop from being summarized (`bounded`).
LOOP_THEN_BARRIER = kp.ARG_LOOP.replace("STRIDE", "8").replace(
    "        con exit (m1: gpu.GlobalM) = return (m1, m3, m4, m5);",
    "        con exit (m1: gpu.GlobalM) =\n"
    "            let (m1, m3) = gpu.sync_work_items (m1, m3);\n"
    "            return (m1, m3, m4, m5);")

# The loop's body calls a helper declared outside the loop, passing it a continuation back into
# the loop: the helper's body names no part of the loop, yet the path returns to the header.
# (Verified as written: the pipeline would copy the helper into its call site.)
# Only iteration 20 (past the bound) writes the common cell out[1000].
LOOP_THROUGH_A_HELPER = """    let t = {T};
    loop (m1, 0I32)
    where
        con put (m1: gpu.GlobalM, k: I32, back: Cn gpu.GlobalM) =
            (next, clash)#(core.icmp.e (k, 20I32)) m1
            where
                con clash (m1: gpu.GlobalM) =
                    let m1 = mem.store (m1, mem.lea (out, 1000_1024), core.bitcast I32 t);
                    back m1;
                con next (m1: gpu.GlobalM) = back m1;
            end;
        con loop (m1: gpu.GlobalM, k: I32) =
            (exit, body)#(core.icmp.ul (k, n)) m1
            where
                con body (m1: gpu.GlobalM) =
                    put (m1, k, again)
                    where
                        con again (m1: gpu.GlobalM) = loop (m1, core.wrap.add 0 (k, 1I32));
                    end;
            end;
        con exit (m1: gpu.GlobalM) = return (m1, m3, m4, m5);
    end;"""


def test_what_follows_a_loops_exit_does_not_keep_it_from_being_summarized(tmp_path: Path) -> None:
    entries, diags = verify(kp.write(tmp_path, "then_barrier", kp.arg_program(LOOP_THEN_BARRIER, n=1024)))
    assert (entries[0]["races"], entries[0]["divergence"]) == ("proved", "proved"), entries[0]
    assert "inductive invariants" in entries[0]["detail"] and not diags


def test_a_path_through_a_helper_back_into_the_loop_has_not_left_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from verimim.smt import kernel_loops

    from verimim.driver import load
    from verimim.phases.base import Program
    from verimim.smt.kernel_verify import verify_kernels
    from verimim.smt.specs import SpecContext

    path = kp.write(tmp_path, "helper", kp.arg_program(LOOP_THROUGH_A_HELPER, n=1024))

    def verify(path: str) -> tuple[list[dict], list]:
        rep = verify_kernels(Program(load(path, [])[0]), SpecContext(timeout_ms=10_000), path)
        return rep.entries, rep.diagnostics

    entries, diags = verify(path)
    assert entries[0]["races"] == "bounded" and "E-RACE" not in codes(diags), entries[0]
    # A wrong variant: a path that enters a mutable not naming the header has left the loop
    # (the continuation it was passed not looked at). The back edge through the helper is then
    # never seen, the invariant `k = entry` survives, and the race at k = 20 is "proved" absent.
    original = kernel_loops.LoopSummaries.left_loop
    monkeypatch.setattr(kernel_loops.LoopSummaries, "left_loop",
                        lambda self, ev, q, arg: original(self, ev, q, ()) and ev.stop_at not in self._reach(q))
    entries, _ = verify(path)
    assert entries[0]["races"] == "proved", entries[0]


# A short loop (two iterations: acc = 5 · 3 · 3 = 45) whose result guards a store: out[t] when
# acc = 45, else out[0] (a race). Then the loop to n = argc - 1, which the bound cuts.
SHORT_LOOP_GUARD_THEN_LONG_LOOP = """    let t = {T};
    short (m1, 0I32, 5I32)
    where
        con short (m1: gpu.GlobalM, i: I32, acc: I32) =
            (done, step)#(core.icmp.ul (i, 2I32)) (m1, acc)
            where
                con step (m1: gpu.GlobalM, a: I32) = short (m1, core.wrap.add 0 (i, 1I32), core.wrap.mul 0 (a, 3I32));
            end;
        con done (m1: gpu.GlobalM, acc: I32) =
            let cell = (0_1024, core.bitcast (Idx 1024) t)#(core.icmp.e (acc, 45I32));
            let m1 = mem.store (m1, mem.lea (out, cell), core.bitcast I32 t);
            loop (m1, 0I32)
            where
                con loop (m1: gpu.GlobalM, k: I32) =
                    (exit, body)#(core.icmp.ul (k, n)) m1
                    where
                        con body (m1: gpu.GlobalM) =
                            let j = core.nat.add (t, core.nat.mul (core.bitcast Nat k, 8));
                            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 1024) j), core.bitcast I32 t);
                            loop (m1, core.wrap.add 0 (k, 1I32));
                    end;
                con exit (m1: gpu.GlobalM) = return (m1, m3, m4, m5);
            end;
    end;"""


def test_only_the_loops_the_bound_cut_are_summarized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The short loop is unrolled, as without summaries: its result stays 45, and the guarded
    # store writes the work-item's own cell. Summarized too ("any iteration" of it: acc any
    # value its invariants allow), the store might write out[0]: the races stayed `bounded`.
    from verimim.smt import kernel_verify

    path = kp.write(tmp_path, "short_then_long", kp.arg_program(SHORT_LOOP_GUARD_THEN_LONG_LOOP, n=1024))
    entries, diags = verify(path)
    assert (entries[0]["races"], entries[0]["divergence"]) == ("proved", "proved"), entries[0]
    assert "`loop`" in entries[0]["detail"] and "`short`" not in entries[0]["detail"], entries[0]["detail"]
    monkeypatch.setattr(kernel_verify, "_cut_loops", lambda kp: frozenset())  # summarize every loop
    entries, diags = verify(path)
    assert entries[0]["races"] == "bounded", entries[0]


@pytest.mark.parametrize("name, refuted", [("valid/launches_in_a_host_loop.mim", False),
                                           ("runtime_errors/race_in_iteration_18_of_a_host_loop.mim", True)])
def test_launches_in_a_host_loop_the_path_fixes_are_decided_to_its_end(name: str, refuted: bool) -> None:
    # 20 iterations, a launch in each: the launch of iteration 18 goes to a stream that is not
    # synced before iteration 19's launch (the race twin) or not (the valid one). Both were
    # `bounded` (the host paths cut at 16 entries of the loop); now the race is refuted and the
    # valid twin proved, as `run` agrees.
    from verimim import driver

    path = Path(__file__).resolve().parents[1] / "programs" / name
    entries, diags = verify(str(path))
    errors = {d.code for d in diags if d.severity == "error"}
    run = driver.run(str(path), [], [])
    if refuted:
        assert "E-RACE" in errors and [e["races"] for e in entries] == ["refuted"], entries
        assert "E-RACE" in {d.code for d in run.diagnostics}
    else:
        assert not errors and [(e["races"], e["divergence"]) for e in entries] == [("proved", "proved")], entries
        assert "unrolled" not in entries[0]["detail"], entries[0]["detail"]
        assert not [d for d in run.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("name", ["race_of_two_launches_past_the_kernel_unrolling_bound.mim",
                                  "race_of_a_copy_with_a_kernel_iteration_past_the_bound.mim"])
def test_a_streams_race_past_a_kernels_unrolling_bound_is_found(name: str) -> None:
    # The kernel writes a[0..39] in a loop, cut at 16 entries; the other operation (a launch, a
    # copy) writes a[30] on another stream. The streams check took the kernel's accesses from its
    # cut paths and said `proved`; a pair decided only up to the cut is run now, which shows it.
    from tests.conftest import PROGRAMS
    from verimim import driver

    got = driver.check(str(PROGRAMS / "runtime_errors" / name), [])
    assert "E-RACE" in {d.code for d in got.diagnostics if d.severity == "error"}, got.diagnostics
    assert any(k["races"] == "refuted" for k in got.data["kernels"]), got.data["kernels"]


def test_a_streams_pair_past_a_kernels_unrolling_bound_no_run_shows_is_bounded() -> None:
    # The same with the copy's target past the bound only for argc = 3: not proved, `bounded`,
    # the detail naming the pair and the cut kernel; `run` with argc = 3 shows the race.
    from verimim import driver

    path = LOOPS / "s07_kernel_loop_past_the_bound_against_a_copy_argc3.mim"
    entries, diags = verify(str(path))
    assert [e["races"] for e in entries] == ["bounded"], entries
    assert "decided over the unrolled paths of `kernel` only" in entries[0]["detail"], entries[0]["detail"]
    assert not [d for d in diags if d.severity == "error"]
    assert "E-RACE" in {d.code for d in driver.run(str(path), [], ["a", "b"]).diagnostics}
