"""A kernel argument main chooses by comparing argc with a literal: the race it causes only from
argc = 3 on is refuted by `check`, as `run` shows it at argc = 3 — chosen by a select, it is tied
to argc (smt.bv encodes a run-time extract of a tuple of integers); chosen on a branch (a join's
parameter), it is not, and a run at the argcs around the literal the host compares with shows it
(both were `unknown`: "no run shows it (argc = 1, 2)")."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from verimim import driver

HEAD = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
        group_id: Idx 1, item_id: Idx 4, (), (d: gpu.GlobalPtr «8; I32», s: I32),
        return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let j = core.bit2.and_ 0 (core.wrap.mul 0 (core.bitcast I32 item_id, s), 7I32);
    let m1 = mem.store (m1, mem.lea (d, core.bitcast (Idx 8) j), core.wrap.add 0 (core.bitcast I32 item_id, 100I32));
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («8; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹j: 8; core.bitcast I32 j›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
"""
TAIL = """    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let m1 = gpu.free.block (m1, d);
    let (m0, v) = mem.load (m0, mem.lea (h, 0_8));
    let m0 = mem.free (m0, h);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""
# s = 4 (argc > LIMIT): items 0 and 2 store 100 and 102 into d[0]; s = 2: cells 0, 2, 4, 6.
SELECT = HEAD + """    let s = (2I32, 4I32)#(core.icmp.ug (argc, LIMIT));
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, s) $ (m0, m1, m4);
""" + TAIL
JOIN = HEAD + """    (small, big)#(core.icmp.ug (argc, LIMIT)) (m0, m1, m4)
    where
        con small (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM) = go (m0, m1, m4, 2I32);
        con big (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM) = go (m0, m1, m4, 4I32);
        con go (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM, s: I32) =
            ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, s) $ (m0, m1, m4);
""" + "\n".join("        " + ln if ln else ln for ln in TAIL.splitlines()) + "\n    end;\n"


@pytest.mark.parametrize("text", [SELECT, JOIN], ids=["select", "branch join"])
def test_a_race_only_from_argc_3_on_is_refuted(tmp_path: Path, text: str) -> None:
    path = kp.write(tmp_path, "chosen", text.replace("LIMIT", "2I32"))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted" and "E-RACE" in {d.code for d in report.diagnostics}, entry
    assert {d.code for d in driver.run(path, [], ["a", "b"]).diagnostics} >= {"E-RACE"}
    assert driver.run(path, [], []).data["result"] == 100  # item 0 stores 100 into d[0]


def test_the_twin_whose_threshold_no_argc_passes_is_not_refuted(tmp_path: Path) -> None:
    # argc > INT_MAX (unsigned) never holds: s is always 2, race-free (tied: proved)
    path = kp.write(tmp_path, "never", SELECT.replace("LIMIT", "4294967295I32"))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "proved" and report.ok, entry


def test_a_race_only_from_argc_40_on_has_a_run_line(tmp_path: Path) -> None:
    """No argc up to 16 races: the counterexample's argc is 40 or more, and its `verimim run`
    line gives it (there was none past argc = 16: kernel prober p31)."""
    path = kp.write(tmp_path, "late", SELECT.replace("LIMIT", "39I32"))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted", entry
    line = entry["counterexample"]["run"]
    assert line is not None and 40 <= len(line.split()) - 5 + 1 <= 64, line  # verimim run FILE a… --schedule 0
