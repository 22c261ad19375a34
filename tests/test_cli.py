"""The command-line contract of spec/CLI.md: exit codes, exactly one JSON object with the
documented keys, diagnostics with code and position, no traceback without --debug."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from verimim import driver


def verimim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "verimim.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_check_demo_without_file_succeeds() -> None:
    p = verimim("check")
    assert p.returncode == 0, p.stderr
    assert "demo" in p.stderr


def test_check_json_keys_on_success() -> None:
    p = verimim("check", str(driver.DEMO_PROGRAM), "--json")
    assert p.returncode == 0
    obj = json.loads(p.stdout)
    assert obj["ok"] is True and obj["file"] == str(driver.DEMO_PROGRAM)
    assert obj["diagnostics"] == [] and isinstance(obj["phases"], list)


def test_type_error_json_and_exit_1() -> None:
    path = PROGRAMS / "ill_typed" / "store_wrong_value_type.mim"
    p = verimim("check", str(path), "--json")
    assert p.returncode == 1
    obj = json.loads(p.stdout)
    assert obj["ok"] is False
    (diag,) = obj["diagnostics"]
    assert set(diag) == {"severity", "code", "message", "file", "line", "col", "related"}
    assert diag["code"] == "E-TYPE" and diag["severity"] == "error"
    assert diag["file"] == str(path) and isinstance(diag["line"], int) and isinstance(diag["col"], int)
    assert "expected" in diag["message"] and "found" in diag["message"]
    assert "Traceback" not in p.stderr


def test_human_output_names_position() -> None:
    path = PROGRAMS / "ill_typed" / "unknown_name.mim"
    p = verimim("check", str(path))
    assert p.returncode == 1 and p.stdout == ""
    assert f"{path}:" in p.stderr and "E-NAME" in p.stderr and "did you mean" in p.stderr


def test_unreadable_file_is_exit_2(tmp_path: Path) -> None:
    p = verimim("check", str(tmp_path / "missing.mim"), "--json")
    assert p.returncode == 2
    assert json.loads(p.stdout)["ok"] is False


def test_bad_option_is_exit_2_with_json() -> None:
    p = verimim("check", "--no-such-option", "--json")
    assert p.returncode == 2
    assert json.loads(p.stdout)["diagnostics"][0]["code"] == "E-USAGE"


def test_parse_error_exit_1(tmp_path: Path) -> None:
    f = tmp_path / "bad.mim"
    f.write_text("plugin core;\nlet x = (1, ;\n", encoding="utf-8")
    p = verimim("check", str(f), "--json")
    assert p.returncode == 1
    diag = json.loads(p.stdout)["diagnostics"][0]
    assert diag["code"] == "E-PARSE" and (diag["line"], diag["col"]) == (2, 13)


def test_dump_prints_mim_and_json_carries_it() -> None:
    p = verimim("dump", str(driver.DEMO_PROGRAM))
    assert p.returncode == 0 and "con square" in p.stdout
    pj = verimim("dump", str(driver.DEMO_PROGRAM), "--json")
    assert json.loads(pj.stdout)["output"] == p.stdout


def test_dump_after_takes_a_phase_without_its_plugin_where_the_name_is_unambiguous() -> None:
    """CLI.md's own JSON example names the phase `remove_double_syncs`; `--after` takes that
    spelling and an upstream alias, and still rejects a name no phase has (exit 2)."""
    kernel = str(PROGRAMS / "valid" / "manual_stream.mim")
    full = verimim("dump", kernel, "--after", "gpu.remove_double_syncs")
    bare = verimim("dump", kernel, "--after", "remove_double_syncs")
    alias = verimim("dump", kernel, "--after", "compile.cleanup_phase")
    assert full.returncode == 0 and "con extern" in full.stdout, full.stderr
    assert bare.returncode == 0 and bare.stdout == full.stdout, bare.stderr
    assert alias.returncode == 0, alias.stderr
    wrong = verimim("dump", kernel, "--after", "double_syncs", "--json")
    assert wrong.returncode == 2 and json.loads(wrong.stdout)["diagnostics"][0]["code"] == "E-USAGE"


@pytest.mark.parametrize("name, phase", [("manual_stream.mim", "gpu.split_apply"),
                                         ("helper_with_a_loop_called_by_host_and_kernel.mim",
                                          "gpu.remove_double_syncs")])
def test_a_dump_after_the_split_is_one_program_that_runs_to_the_same_result(tmp_path: Path, name: str,
                                                                             phase: str) -> None:
    # The host and device Worlds were printed one after the other (two `plugin` headers, the
    # kernel declared in the first and defined in the second): E-PARSE. Now one module: the
    # device's kernels, then the host, one name space.
    path = PROGRAMS / "valid" / name
    dumped = verimim("dump", str(path), "--after", phase)
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout.count("plugin gpu;") == 1
    out = tmp_path / "dumped.mim"
    out.write_text(dumped.stdout, encoding="utf-8")
    want = json.loads(verimim("run", str(path), "--json").stdout)
    got = json.loads(verimim("run", str(out), "--json").stdout)
    assert got["ok"] and got["result"] == want["result"], got["diagnostics"]


def test_dump_after_takes_a_side_as_pipeline_ran_names_it() -> None:
    # `pipeline.ran` says `gpu.remove_double_syncs[device]`; `--after` refused that name
    path = str(PROGRAMS / "valid" / "manual_stream.mim")
    device = verimim("dump", path, "--after", "gpu.remove_double_syncs[device]")
    assert device.returncode == 0, device.stderr
    assert device.stdout == verimim("dump", path, "--after", "gpu.remove_double_syncs").stdout
    host = verimim("dump", path, "--after", "gpu.host_malloc2gpualloc_repl[host]")
    assert host.returncode == 0 and "con extern kernel" in host.stdout, host.stderr
    wrong_side = verimim("dump", path, "--after", "gpu.host_malloc2gpualloc_repl[device]", "--json")
    diag = json.loads(wrong_side.stdout)["diagnostics"][0]
    assert wrong_side.returncode == 2 and "not a phase of this program's pipeline" in diag["message"]
    assert "gpu.host_malloc2gpualloc_repl[host]" in diag["message"]
    folds = verimim("dump", path, "--after", "core.normalize[host]", "--json")
    assert folds.returncode == 2 and "has no side" in json.loads(folds.stdout)["diagnostics"][0]["message"]
    bad = verimim("dump", path, "--after", "gpu.remove_double_syncs[dev]", "--json")
    assert bad.returncode == 2 and "`[host]` or `[device]`" in json.loads(bad.stdout)["diagnostics"][0]["message"]


def test_dump_after_a_phase_the_pipeline_never_reaches_is_a_usage_error(tmp_path: Path) -> None:
    """A program without kernels is never split, so `remove_double_syncs` (a device-side phase)
    never runs: printing the final program under its name would be a false claim. The folds
    (`core.normalize`, a `phases` entry of `check`) happen while loading: after them is the
    program as loaded."""
    f = tmp_path / "host_only.mim"
    f.write_text("plugin core;\nfun extern main(mem: %mem.M 0, argc: I32, argv: %mem.Ptr0 (%mem.Ptr0 I8)): "
                 "[%mem.M 0, I32] =\n    return (mem, %core.wrap.add 0 (argc, 1I32));\n", encoding="utf-8")
    never = verimim("dump", str(f), "--after", "gpu.remove_double_syncs", "--json")
    assert never.returncode == 2, never.stdout
    diag = json.loads(never.stdout)["diagnostics"][0]
    assert diag["code"] == "E-USAGE" and "not a phase of this program's pipeline" in diag["message"]
    assert "mem.alloc2malloc_repl" in diag["message"]  # what did run
    folds = verimim("dump", str(f), "--after", "core.normalize")
    assert folds.returncode == 0 and folds.stdout == verimim("dump", str(f)).stdout
    ran = verimim("dump", str(f), "--after", "mem.alloc2malloc_repl")
    assert ran.returncode == 0 and "fun extern main" in ran.stdout


def test_dump_after_takes_the_steps_of_the_programs_own_plan(tmp_path: Path) -> None:
    """`check` lists `compile.prefix_cleanup_phase` (a step with its prefix, not a registered
    phase) and upstream passes verimim skips; `--after` takes each name `check` shows."""
    f = tmp_path / "own_plan.mim"
    f.write_text("import mem;\nimport core;\nimport compile;\n"
                 "con extern main(mem: %mem.M 0, argc: I32, argv: %mem.Ptr (%mem.Ptr (I8, 0), 0), "
                 "return : Cn [%mem.M 0, I32]) = return (mem, 42I32);\n"
                 "lam extern _compile(): %compile.Phase =\n"
                 "    %compile.phases ff (%compile.internal_cleanup_phase, optimization_phase);\n", encoding="utf-8")
    shown = [e["name"] for e in json.loads(verimim("check", str(f), "--json").stdout)["phases"]]
    assert "compile.prefix_cleanup_phase" in shown and "compile.eta_red_pass" in shown
    for name in ("compile.prefix_cleanup_phase", "compile.eta_red_pass"):
        p = verimim("dump", str(f), "--after", name)
        assert p.returncode == 0 and "con extern main" in p.stdout, (name, p.stderr)
    unknown = verimim("dump", str(f), "--after", "no_such_phase", "--json")
    assert unknown.returncode == 2
    assert "compile.prefix_cleanup_phase" in json.loads(unknown.stdout)["diagnostics"][0]["message"]


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e12"])
def test_a_time_limit_must_be_a_finite_number_of_seconds(value: str) -> None:
    p = verimim("check", str(driver.DEMO_PROGRAM), "--timeout", value, "--json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert json.loads(p.stdout)["diagnostics"][0]["code"] == "E-USAGE"


def test_internal_error_is_exit_3_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(path: str, include: list[str]) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(driver, "load", boom)
    report = driver.check(str(driver.DEMO_PROGRAM), [])
    assert report.exit_code == 3
    assert report.diagnostics[0].code == "E-INTERNAL"
    assert report.traceback is not None and "simulated bug" in report.traceback


@pytest.mark.parametrize("command", ["run", "dump", "compile"])
def test_every_exit_3_prints_a_reproducer(command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """CLI.md, exit 3: "Always prints a reproducer command" — for an internal error of any
    command too, on stderr and in the JSON (the command line, where there is no narrower one)."""
    from verimim import cli

    def boom(path: str, include: list[str]) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(driver, "load", boom)
    argv = [command, str(driver.DEMO_PROGRAM), "--json"] + (["-o", str(tmp_path / "out")] if command == "compile" else [])
    monkeypatch.setattr(sys, "argv", ["verimim", *argv])
    with pytest.raises(SystemExit) as out:
        cli.main(argv)
    assert out.value.code == 3
    captured = capsys.readouterr()
    expected = " ".join(["verimim", *argv])
    assert json.loads(captured.out)["reproducer"] == expected
    assert f"reproduce with: {expected}" in captured.err and "Traceback" not in captured.err


def test_include_directory_finds_a_user_plugin(tmp_path: Path) -> None:
    (tmp_path / "mylib.mim").write_text("plugin core;\naxm widget: Nat → Nat;\n", encoding="utf-8")
    prog = tmp_path / "prog.mim"
    prog.write_text("plugin mylib;\nlet y = mylib.widget 3;\n", encoding="utf-8")
    assert verimim("check", str(prog)).returncode == 1  # E-IMPORT without -I
    p = verimim("check", str(prog), "-I", str(tmp_path))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("command", ["run", "diff"])
def test_run_and_diff_take_the_pipeline_overrides_check_takes(command: str) -> None:
    # They run the program's plan too; `run --host-phases …` was "No such option" (exit 2).
    path = PROGRAMS / "valid" / "asyn_copy_default_stream_read.mim"
    p = verimim(command, str(path), "--host-phases", "compile.cleanup", "--device-phases", "", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["result"] == 101
    ran = out["pipeline"]["ran"]
    assert "compile.cleanup[host]" in ran and not any(r.endswith("[device]") for r in ran), ran
    assert verimim(command, str(path), "--host-phases", "no.such_phase").returncode == 2


def test_a_pipeline_file_that_is_not_utf8_is_placed_as_a_program_is(tmp_path: Path) -> None:
    bad = tmp_path / "pipe.mim"
    bad.write_bytes(b"plugin core;\nlet x = 1; // \x80\n")
    p = verimim("check", str(driver.DEMO_PROGRAM), "--pipeline", str(bad), "--json")
    assert p.returncode == 1, p.stdout
    diag = json.loads(p.stdout)["diagnostics"][0]
    assert diag["code"] == "E-PARSE" and diag["file"] == str(bad) and (diag["line"], diag["col"]) == (2, 15)


def test_compile_checks_its_outputs_before_any_work(tmp_path: Path) -> None:
    """docs/cli.md: exit 2 is found before any work starts; a directory where OUT.ptx goes left a
    lone OUT.ll behind, and `-o ''` wrote hidden `.ll` and `.ptx` files."""
    (tmp_path / "out.ptx").mkdir()
    ill_typed = str(PROGRAMS / "ill_typed" / "unknown_name.mim")
    for out, why in ((str(tmp_path / "out"), "is a directory"), ("", "give the output files' name"),
                     (str(tmp_path / "no" / "such" / "out"), "no directory")):
        p = verimim("compile", ill_typed, "-o", out, "--json")
        assert p.returncode == 2, (out, p.stdout)
        assert why in json.loads(p.stdout)["diagnostics"][0]["message"]
    assert not (tmp_path / "out.ll").exists()


@pytest.mark.parametrize("command", ["run", "diff"])
def test_a_negative_number_is_a_program_argument_and_a_misspelt_option_is_not(command: str, tmp_path: Path) -> None:
    # argv[1] read by atoi: `-5` reaches the program (it was "No such option '-5'", exit 2)
    src = tmp_path / "neg.mim"
    src.write_text("plugin core;\nplugin mem;\n\nccon atoi [[mem.M 0, mem.Ptr («⊤:Nat; I8», 0)], Cn [mem.M 0, I32]];\n\n"
                   "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)\n"
                   "              : [mem.M 0, I32] =\n"
                   "    let (m0, s) = mem.load (m0, mem.lea (argv, 1_16));\n"
                   "    ret (m0, v) = atoi $ (m0, s);\n"
                   "    return (m0, core.wrap.mul 0 (v, 10I32));\n", encoding="utf-8")
    r = verimim(command, str(src), "-5", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["result"] == -50
    r = verimim(command, str(src), "-5", "--jsno")
    assert r.returncode == 2 and "--jsno" in r.stdout + r.stderr
    r = verimim(command, str(src), "--json", "--", "-7")
    assert r.returncode == 0 and json.loads(r.stdout)["result"] == -70
    # what click reads as a group of short options: `-hello` printed the help (`-h`), exit 0, no
    # JSON, nothing run; `-5I/tmp` was the argument -5 and the include directory /tmp
    for arg in ("-hello", "-xh", "-5h", "-5I/tmp"):
        r = verimim(command, str(src), arg, "--json")
        assert r.returncode == 2, (arg, r.stdout)
        assert f"No such option '{arg}'" in json.loads(r.stdout)["diagnostics"][0]["message"]
    # a lone `-` (stdin to many C programs) is an argument; options keep their spellings
    for args, result in ((("-",), 0), (("--fuel=100000", "-3"), -30), (("-I", str(tmp_path), "-2"), -20),
                         ((f"-I{tmp_path}", "-1"), -10)):
        r = verimim(command, str(src), *args, "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["result"] == result, (args, r.stdout)


def test_compile_takes_the_pipeline_overrides_check_takes(tmp_path: Path) -> None:
    # So that it compiles the plan `check` verified: `compile --device-phases …` was "No such option".
    path = PROGRAMS / "valid" / "asyn_copy_default_stream_read.mim"
    out = str(tmp_path / "out")
    p = verimim("compile", str(path), "-o", out, "--host-phases", "compile.cleanup", "--device-phases", "", "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    ran = json.loads(p.stdout)["pipeline"]["ran"]
    assert "compile.cleanup[host]" in ran and not any(r.endswith("[device]") for r in ran), ran
    assert verimim("compile", str(path), "-o", out, "--host-phases", "no.such_phase").returncode == 2


def test_run_writes_what_the_program_printed_byte_for_byte(tmp_path: Path) -> None:
    # putchar 255 writes the byte 0xFF, no UTF-8: text mode wrote U+FFFD (EF BF BD) for it;
    # the JSON string can carry no raw byte and keeps U+FFFD
    prog = tmp_path / "pc.mim"
    prog.write_text("plugin core;\ncfun putchar [mem.M 0, I32]: [mem.M 0, I32];\n"
                    "fun extern main (mem: mem.M 0): [mem.M 0, I32] =\n"
                    "    ret (mem, a) = putchar $ (mem, 255I32);\n    return (mem, a);\n", encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "verimim.cli", "run", str(prog)], capture_output=True, timeout=120)
    assert p.returncode == 0 and p.stdout == b"\xff\n255\n", (p.stdout, p.stderr)
    assert json.loads(verimim("run", str(prog), "--json").stdout)["stdout"] == "\ufffd"


def test_a_spec_or_diff_reproducer_keeps_the_pipeline_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The reproducer of an E-SPEC runs the same pipeline: without `--device-phases`/`--pipeline`
    (and `-I`) it ran another one, which said ok (probe)."""
    import shlex

    from verimim.smt import specs
    from verimim.smt.solver import Outcome

    monkeypatch.setitem(specs.SPECS, "gpu.remove_double_syncs", lambda res, ctx: Outcome("refuted", "simulated"))
    path = str(PROGRAMS / "valid" / "session_closed.mim")
    report = driver.check(path, [str(tmp_path)], timeout_ms=2500, host_phases=[],
                          device_phases=["gpu.remove_double_syncs"])
    assert any(d.code == "E-SPEC" for d in report.diagnostics)
    assert shlex.split(report.data["reproducer"]) == [
        "verimim", "check", path, "-I", str(tmp_path), "--host-phases", "", "--device-phases",
        "gpu.remove_double_syncs", "--timeout", "2.5", "--json"]
    words = shlex.split(driver.reproducer("diff", "p.mim", [], None, None, "pipe line.mim", ["--fuel", "9"],
                                          ["-v", "a b"]))
    assert words == ["verimim", "diff", "p.mim", "--pipeline", "pipe line.mim", "--fuel", "9", "--", "-v", "a b"]
