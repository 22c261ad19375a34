"""A kernel argument main keeps in a host cell, passes to a join's parameter or counts in a host
loop is read off main's symbolic paths (smt.kernel_host.bind_from_paths): where every path
computes it from argc, the launch is tied, so a race-free twin is proved (it was `unknown`: Z3
found a race for an argument the program never passes, and no run showed it) and a racy one
is refuted for the argument that races. One computed from argv's contents stays untied."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from tests.smt.test_argument_chosen_by_argc import HEAD, JOIN, TAIL
from verimim import driver

# s is 2 or 4: with 4 items 0 and 2 store into d[0] (see test_argument_chosen_by_argc)
CELL = HEAD + """    let (m0, c) = mem.slot (I32, 0) (m0, 0);
    let m0 = mem.store (m0, c, (2I32, 4I32)#(core.icmp.ug (argc, LIMIT)));
    let (m0, s) = mem.load (m0, c);
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, s) $ (m0, m1, m4);
""" + TAIL
# s = 1, 2, …, LIMIT: item k stores into d[(k·s) & 7]; s = 4 is the first that races
LOOP = HEAD + """    loop (m0, m1, m4, 1I32)
    where
        con loop (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM, s: I32) =
            (done, step)#(core.icmp.ule (s, LIMIT)) (m0, m1, m4)
            where
                con step (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM) =
                    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, s) $ (m0, m1, m4);
                    loop (m0, m1, m4, core.wrap.add 0 (s, 1I32));
            end;
        con done (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM) =
""" + "\n".join("        " + ln if ln else ln for ln in TAIL.splitlines()) + "\n    end;\n"
# s from the first byte of the program's name: a value main's paths do not know
ARGV = HEAD + """    let (m0, a0) = mem.load (m0, mem.lea (argv, core.idx_unsafe 0));
    let (m0, c) = mem.load (m0, mem.lea (a0, core.idx_unsafe 0));
    let s = core.conv.u 4294967296 (core.bit2.and_ 0 (c, 3I8));
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, s) $ (m0, m1, m4);
""" + TAIL
NEVER = "4294967295I32"  # argc > INT_MAX (unsigned) never holds: s is always 2


def _entry(tmp_path: Path, name: str, text: str) -> tuple[dict[str, object], set[str]]:
    report = driver.check(kp.write(tmp_path, name, text), [])
    [entry] = report.data["kernels"]
    return entry, {d.code for d in report.diagnostics}


@pytest.mark.parametrize("text", [JOIN, CELL], ids=["branch join", "host cell"])
def test_a_race_free_twin_is_proved(tmp_path: Path, text: str) -> None:
    entry, codes = _entry(tmp_path, "never", text.replace("LIMIT", NEVER))
    assert entry["races"] == "proved" and not codes, entry
    assert "as main computes them each time it issues the launch" in str(entry["detail"])


def test_a_host_cell_argument_that_races_from_argc_3_is_refuted(tmp_path: Path) -> None:
    path = kp.write(tmp_path, "cell", CELL.replace("LIMIT", "2I32"))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted" and "E-RACE" in {d.code for d in report.diagnostics}, entry
    assert {d.code for d in driver.run(path, [], ["a", "b"]).diagnostics} >= {"E-RACE"}
    assert driver.run(path, [], []).data["result"] == 100


def test_a_host_loop_counter_proves_the_launches_it_makes_and_refutes_the_fourth(tmp_path: Path) -> None:
    entry, codes = _entry(tmp_path, "three", LOOP.replace("LIMIT", "3I32"))
    assert entry["races"] == "proved" and not codes, entry
    assert "each time it issues the launch (3 on its paths)" in str(entry["detail"])
    path = kp.write(tmp_path, "four", LOOP.replace("LIMIT", "4I32"))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted" and "E-RACE" in {d.code for d in report.diagnostics}, entry
    assert "E-RACE" in {d.code for d in driver.run(path, [], []).diagnostics}


def test_an_argument_from_argv_contents_stays_untied(tmp_path: Path) -> None:
    entry, _codes = _entry(tmp_path, "argv", ARGV)
    assert entry["races"] != "proved", entry
    assert "not known on the host" in str(entry["detail"]), entry
