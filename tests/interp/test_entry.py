"""`main` in every form upstream writes it (verimim.interp.entry), on the interpreter and as
compiled host code; a `main` of another type is E-TYPE at its declaration."""
from __future__ import annotations

import pytest

from tests.plug.c_programs import load
from verimim.interp.machine import Machine, find_main
from verimim.interp.values import RuntimeFault

ARGV = "%mem.Ptr («⊤:Nat; %mem.Ptr («⊤:Nat; I8», 0)», 0)"
HEADER = "plugin core;\nplugin mem;\n"

FORMS = {
    "fun with memory": f"fun extern main (mem: %mem.M 0, argc: I32, argv: {ARGV}): [%mem.M 0, I32] =\n"
                       "    return (mem, %core.wrap.add 0 (argc, 40I32));\n",
    "con": f"con extern main (mem: %mem.M 0, argc: I32, argv: {ARGV}, return: Cn [%mem.M 0, I32]) =\n"
           "    return (mem, %core.wrap.add 0 (argc, 40I32));\n",
    "con with a bracketed domain": f"con extern main [mem: %mem.M 0, argc: I32, argv: {ARGV}, return: Cn [%mem.M 0, I32]] =\n"
                                   "    return (mem, %core.wrap.add 0 (argc, 40I32));\n",
    "fun without memory": f"fun extern main (argc: I32, argv: {ARGV}): I32 =\n"
                          "    return (%core.wrap.add 0 (argc, 40I32));\n",
}
NO_ARGS = {
    "fun of memory only": "fun extern main (mem: %mem.M 0): [%mem.M 0, I32] = return (mem, 42I32);\n",
    "con of memory only": "con extern main (mem: %mem.M 0, return: Cn [%mem.M 0, I32]) = return (mem, 42I32);\n",
}


def _interp(src: str, argv: list[str]) -> int:
    world = load(HEADER + src)
    return Machine(world).run_main(find_main(world), argv)


def _native(src: str, argv: list[str]) -> int:
    pytest.importorskip("llvmlite.binding")
    from verimim.runtime.hostrt import compile_program, jit, run_jitted

    return run_jitted(jit(compile_program(load(HEADER + src))), argv)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_main_form_gets_argc(name: str) -> None:
    argv = ["prog", "a"]
    assert _interp(FORMS[name], argv) == _native(FORMS[name], argv) == 42


@pytest.mark.parametrize("name", sorted(NO_ARGS))
def test_main_form_without_arguments(name: str) -> None:
    assert _interp(NO_ARGS[name], ["prog"]) == _native(NO_ARGS[name], ["prog"]) == 42


@pytest.mark.parametrize("src", [
    "fun extern main (mem: %mem.M 0, argc: I64): [%mem.M 0, I32] = return (mem, 1I32);\n",  # argc not an int
    "fun extern main (mem: %mem.M 0): [%mem.M 0, I64] = return (mem, 1I64);\n",            # result not I32
    "fun extern main (mem: %mem.M 0): %mem.M 0 = return mem;\n",                            # no result
    # argc of the empty type `Idx 0` (its width once computed as a shift by -1: E-INTERNAL)
    f"fun extern main (mem: %mem.M 0, argc: Idx 0, argv: {ARGV}): [%mem.M 0, I32] = return (mem, 1I32);\n",
])
def test_other_main_types_are_type_errors_at_main(src: str) -> None:
    with pytest.raises(RuntimeFault) as e:
        _interp(src, ["prog"])
    assert e.value.code == "E-TYPE" and e.value.loc is not None and e.value.loc.line == 3
    assert "main must be" in e.value.message


@pytest.mark.parametrize("command", [["run"], ["diff"], ["compile", "-o", "OUT"]])
def test_a_program_without_an_entry_point_is_told_where(tmp_path, command: list[str]) -> None:
    """No `main` at all: E-NAME at the file's start; a `main` that is not `extern`: E-NAME at
    it. Never an error without a position (CLI.md: every error has file:line:col)."""
    from verimim import driver

    none = tmp_path / "none.mim"
    none.write_text(HEADER + "let x = 1;\n")
    local = tmp_path / "local.mim"
    local.write_text(HEADER + FORMS["fun with memory"].replace("fun extern main", "fun main"))
    for path, line, found in ((none, 1, "found no `main`"), (local, 3, "not `extern`")):
        if command[0] == "run":
            report = driver.run(str(path), [], [])
        elif command[0] == "diff":
            report = driver.diff(str(path), [], [])
        else:
            report = driver.compile_to(str(path), [], str(tmp_path / "out"))
        errors = [d for d in report.diagnostics if d.severity == "error"]
        assert [d.code for d in errors] == ["E-NAME"] and report.exit_code == 1
        assert errors[0].loc is not None and (errors[0].loc.file, errors[0].loc.line, errors[0].loc.col) == (str(path), line, 1)
        assert found in errors[0].message
