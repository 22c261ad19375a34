"""What a program prints through C functions: `"stdout"` in `run --json` (the JSON stays one
object), shown before the result line in text mode, kept when the program then faults, and
compared by `diff`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plug.c_programs import cfun, program, string
from verimim import driver
from verimim.plug import c_interp

HELLO = program(cfun("puts") + cfun("print_i32"), string("s", b"hello")
                + "    ret (mem, r) = %c.puts $ (mem, s);\n"
                + "    ret mem = %c.print_i32 $ (mem, 4294967291I32);\n"
                + "    return (mem, r);\n")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "verimim.cli", *args], capture_output=True, text=True, timeout=300)


def test_run_json_carries_stdout(tmp_path: Path) -> None:
    f = tmp_path / "hello.mim"
    f.write_text(HELLO)
    p = _cli("run", str(f), "--target", "interp", "--json")
    obj = json.loads(p.stdout)  # exactly one JSON object: the program's output is inside it
    assert p.returncode == 0 and obj["stdout"] == "hello\n-5" and obj["result"] == 6


def test_run_text_prints_output_then_result(tmp_path: Path) -> None:
    f = tmp_path / "hello.mim"
    f.write_text(HELLO)
    p = _cli("run", str(f), "--target", "interp")
    assert p.stdout == "hello\n-5\n6\n"


def test_output_before_a_fault_is_kept(tmp_path: Path) -> None:
    src = program(cfun("puts"), string("s", b"first") + string("t", b"oops", nul=False)
                  + "    ret (mem, r) = %c.puts $ (mem, s);\n    ret (mem, r) = %c.puts $ (mem, t);\n"
                  + "    return (mem, r);\n")
    f = tmp_path / "fault.mim"
    f.write_text(src)
    rep = driver.run(str(f), [], [], target="interp")
    assert rep.exit_code == 1 and [d.code for d in rep.diagnostics] == ["E-OOB"]
    assert rep.data["stdout"] == "first\n"


def test_program_without_c_calls_has_empty_stdout(tmp_path: Path) -> None:
    f = tmp_path / "plain.mim"
    f.write_text(program("", "    return (mem, 3I32);\n"))
    rep = driver.run(str(f), [], [], target="interp")
    assert rep.data["stdout"] == "" and rep.data["result"] == 3


def test_diff_compares_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "hello.mim"
    f.write_text(HELLO)
    rep = driver.diff(str(f), [], [], use_gpu=False)
    assert rep.ok, [d.render() for d in rep.diagnostics]
    # A target that prints something else with the same result and memory is a disagreement.
    runs = [0]
    real = c_interp.SEMANTICS["puts"]

    def puts_differently_after_the_first_run(c: c_interp.Call, a: list[object]) -> object:
        runs[0] += 1
        if runs[0] > 1:
            c.write(b"!")
        return real(c, a)
    monkeypatch.setitem(c_interp.SEMANTICS, "puts", puts_differently_after_the_first_run)
    rep = driver.diff(str(f), [], [], use_gpu=False)
    diffs = [d.message for d in rep.diagnostics if d.code == "E-DIFF"]
    assert diffs and all("with other output" in m for m in diffs)


def test_diff_does_not_compare_clock_dependent_output(tmp_path: Path) -> None:
    void = "%mem.Ptr («⊤:Nat; []», 0)"
    src = program(f"""ccon time [mem: %mem.M 0, return: Cn [%mem.M 0, {void}]];
ccon print_time_diff [mem: %mem.M 0, t1: {void}, t2: {void}, return: Cn [%mem.M 0]];
""", f"""    time (mem, k1)
    where
        con k1 (mem: %mem.M 0, t1: {void}) = time (mem, k2)
        where
            con k2 (mem: %mem.M 0, t2: {void}) = print_time_diff (mem, t1, t2, k3)
            where
                con k3 (mem: %mem.M 0) = return (mem, 0I32);
            end
        end
    end;
""")
    f = tmp_path / "time.mim"
    f.write_text(src)
    rep = driver.diff(str(f), [], [], use_gpu=False)
    assert rep.ok and not [d for d in rep.diagnostics if d.code == "E-DIFF"]
    assert [d.code for d in rep.diagnostics if d.severity == "warning"].count("W-UNSUPPORTED") == 1
    # lib.c's time() mallocs what it returns and nothing frees it: the leak is reported
    assert "W-LEAK" in [d.code for d in driver.run(str(f), [], [], target="interp").diagnostics]


def test_upstream_declarations_checked_and_run(tmp_path: Path) -> None:
    """`ccon`/`cfun` as upstream writes them: a call with the wrong argument type is the
    checker's E-TYPE at the call; an unknown function E-UNSUPPORTED at its declaration."""
    decls = "cfun println_char[%mem.M 0, I8]: %mem.M 0;\nccon dont_know [%mem.M 0, Cn [%mem.M 0, Bool]];\n"
    ok = program(decls, "    ret mem = println_char $ (mem, 120I8);\n    return (mem, 1I32);\n")
    f = tmp_path / "ok.mim"
    f.write_text(ok)
    rep = driver.run(str(f), [], [], target="interp")
    assert (rep.data["result"], rep.data["stdout"]) == (1, "x\n")
    bad = program(decls, "    ret mem = println_char $ (mem, 120I32);\n    return (mem, 1I32);\n")
    f.write_text(bad)
    rep = driver.run(str(f), [], [], target="interp")
    assert [(d.code, d.loc.line if d.loc else None) for d in rep.diagnostics] == [("E-TYPE", 6)]
    unknown = program(decls, "    dont_know (mem, k)\n    where\n        con k (mem: %mem.M 0, b: Bool) = "
                             "return (mem, 0I32);\n    end;\n")
    f.write_text(unknown)
    rep = driver.run(str(f), [], [], target="interp")
    assert [(d.code, d.loc.line if d.loc else None) for d in rep.diagnostics] == [("E-UNSUPPORTED", 4)]
    assert "`dont_know`" in rep.diagnostics[0].message
