"""Loops the kernel verifier cannot unroll to their end (smt/kernel_loops.py): summarized by
inductive invariants for proofs, never for refutations, and `bounded` where neither decides."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from tests.smt.test_kernel_verify import verify


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


def test_streams_past_a_host_loop_cut_by_the_bound_are_bounded_without_a_launch() -> None:
    # A 20-iteration host loop, then a host read of a pending copy's buffer (a race `run` shows):
    # the paths are cut before it. With no launch there is no `kernels` entry to say `bounded`:
    # `check` said ok, 7 proved, nothing else; now a note says so, and --strict fails.
    from verimim import driver
    from verimim.verdicts import from_stream_notes

    path = LOOPS / "s06_long_host_loop_then_stream_race_no_launch.mim"
    rep = driver.check(str(path), [])
    assert rep.ok and [v.status for v in from_stream_notes(rep.diagnostics)] == ["bounded"], rep.diagnostics
    assert "E-RACE" in {d.code for d in driver.run(str(path), [], []).diagnostics}
