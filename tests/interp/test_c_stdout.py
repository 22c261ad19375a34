"""What a program prints through C functions: `"stdout"` in `run --json` (the JSON stays one
object), shown before the result line in text mode, kept when the program then faults, and
compared by `diff`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.plug.c_programs import cfun, program, string
from verimim import driver

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


def test_diff_compares_output(tmp_path: Path) -> None:
    f = tmp_path / "hello.mim"
    f.write_text(HELLO)
    rep = driver.diff(str(f), [], [], use_gpu=False)
    assert rep.ok, [d.render() for d in rep.diagnostics]
    assert rep.data["stdout"] == "hello\n-5"
