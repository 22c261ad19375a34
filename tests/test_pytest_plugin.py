"""The verimim pytest plugin (verimim/pytest_plugin.py), run on small projects with `pytester`."""
from __future__ import annotations

from pathlib import Path

import pytest
import z3  # noqa: F401

from verimim.runtime.lowering import llvm_binding

pytest_plugins = ["pytester"]

# pytester's in-process runs drop the modules they import when they end. verimim keeps some it
# imports lazily (llvmlite's binding, initialised once: `llvm_binding`; z3 through the
# specifications), so a run after the first mixed two copies of them (`expected LP_LLVMType
# instance instead of LP_LLVMType`) whenever an earlier test file had imported verimim but not
# them. Imported here, they are in every run's snapshot and never dropped.
llvm_binding()


@pytest.fixture(autouse=True)
def _as_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outcome counts below are those of a machine without a GPU (run[gpu] items skip); on
    a GPU machine the run[gpu] items are exercised by the corpus itself."""
    monkeypatch.setenv("VERIMIM_NO_GPU", "1")

HEADER = "plugin core;\nplugin mem;\n\n"
MAIN = "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =\n"

# main returns argc + 41: 42 without ARGS.
ANSWER = HEADER + MAIN + "    return (m0, core.wrap.add 0 (argc, 41I32));\n"
# line 7, column 17 is the ill-typed 0I64 (after two annotation lines).
ILL_TYPED = HEADER + MAIN + "    return (m0, 0I64);\n"
# division by argc - 1 = 0 at line 8, column 19 (after two annotation lines).
DIV_BY_ZERO = HEADER + MAIN + """    let divisor = core.wrap.sub 0 (argc, 1I32);
    let (m0, q) = core.div.udiv (m0, (100I32, divisor));
    return (m0, q);
"""
# mem.malloc in the constant address space at line 9, column 19 (after two annotation lines):
# `verimim check` rejects it in gpu.check_addr_spaces_repl.
CONST_MALLOC = "plugin core;\nplugin mem;\nplugin gpu;\n\n" + MAIN + """    let (m0, m1, m4) = gpu.init m0;
    let (m4, c) = mem.malloc (I32, 4) (m4, core.trait.size I32);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, argc);
"""
SLOT = HEADER + MAIN + """    let (m0, p) = mem.slot (I32, 0) (m0, 0);
    let m0 = mem.store (m0, p, argc);
    let (m0, v) = mem.load (m0, p);
    return (m0, core.wrap.add 0 (v, 41I32));
"""


def mim(pytester: pytest.Pytester, name: str, annotations: str, body: str) -> None:
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(annotations + body, encoding="utf-8")


def item_names(result: pytest.RunResult) -> list[str]:
    return sorted(line.strip() for line in result.outlines if "::" in line)


def test_expect_file_passes(pytester: pytest.Pytester) -> None:
    mim(pytester, "answer.mim", "// EXPECT: 42\n", ANSWER)
    result = pytester.runpytest("answer.mim", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*no CUDA device*"])


def test_args_annotation(pytester: pytest.Pytester) -> None:
    mim(pytester, "answer.mim", "// ARGS: a b\n// EXPECT: 44\n", ANSWER)
    pytester.runpytest("answer.mim").assert_outcomes(passed=2, skipped=1)


def test_items_have_readable_names(pytester: pytest.Pytester) -> None:
    mim(pytester, "progs/answer.mim", "// EXPECT: 42\n", ANSWER)
    result = pytester.runpytest("progs/answer.mim", "--collect-only", "-q")
    assert item_names(result) == ["progs/answer.mim::check", "progs/answer.mim::run[gpu]",
                                  "progs/answer.mim::run[interp]"]


def test_wrong_expect_fails_with_expected_and_found(pytester: pytest.Pytester) -> None:
    mim(pytester, "answer.mim", "// EXPECT: 43\n", ANSWER)
    result = pytester.runpytest("answer.mim")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*verimim run answer.mim --target interp*", "*expected: result 43*",
                                 "*found:    result 42*"])
    # the one-line summary says what differs (the node id names the command)
    result.stdout.fnmatch_lines(["FAILED answer.mim::run[[]interp[]] - expected result 43, found result 42"])
    assert "Traceback" not in result.stdout.str() and "pytest_plugin.py" not in result.stdout.str()


def test_junit_failure_message_is_the_summary(pytester: pytest.Pytester) -> None:
    import xml.etree.ElementTree as ET
    mim(pytester, "answer.mim", "// EXPECT: 43\n// CHECK: no_such_text\n", ANSWER)
    pytester.runpytest("answer.mim", "--junitxml=out.xml")
    failures = {case.get("name"): case.find("failure") for case in ET.parse(pytester.path / "out.xml").iter("testcase")}
    run, dump = failures["run[interp]"], failures["filecheck"]
    assert run is not None and run.get("message") == "expected result 43, found result 42"
    assert "verimim run answer.mim --target interp" in (run.text or "")  # the whole report is the body
    assert dump is not None and (dump.get("message") or "").startswith("the dump does not match CHECK line 2: ")


def test_unexpected_warning_fails(pytester: pytest.Pytester) -> None:
    mim(pytester, "answer.mim", "// EXPECT: 42\n// EXPECT-WARNING: W-LEAK\n", ANSWER)
    result = pytester.runpytest("answer.mim")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*expected: warnings W-LEAK*", "*found:    warnings none*"])


def test_type_error_at_its_location(pytester: pytest.Pytester) -> None:
    mim(pytester, "bad.mim", "// EXPECT-ERROR: E-TYPE\n// EXPECT-LOC: 7:17\n", ILL_TYPED)
    result = pytester.runpytest("bad.mim", "-v")
    result.assert_outcomes(passed=1)  # only `check`: an ill-typed program never runs
    result.stdout.fnmatch_lines(["*bad.mim::check PASSED*"])


def test_type_error_at_a_wrong_location_fails(pytester: pytest.Pytester) -> None:
    mim(pytester, "bad.mim", "// EXPECT-ERROR: E-TYPE\n// EXPECT-LOC: 7:3\n", ILL_TYPED)
    result = pytester.runpytest("bad.mim")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected: E-TYPE at 7:3*", "*found:    E-TYPE at 7:17*", "*error[[]E-TYPE[]]*"])


def test_wrong_error_code_fails(pytester: pytest.Pytester) -> None:
    mim(pytester, "bad.mim", "// EXPECT-ERROR: E-NAME\n", ILL_TYPED)
    result = pytester.runpytest("bad.mim")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected: error E-NAME*", "*found:    error E-TYPE*"])


def test_runtime_error_file(pytester: pytest.Pytester) -> None:
    mim(pytester, "div.mim", "// EXPECT-ERROR: E-OOB\n// EXPECT-LOC: 8:19\n", DIV_BY_ZERO)
    result = pytester.runpytest("div.mim", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*div.mim::check PASSED*", "*div.mim::run[[]interp[]] PASSED*"])


def test_runtime_error_not_raised_fails(pytester: pytest.Pytester) -> None:
    mim(pytester, "div.mim", "// ARGS: x\n// EXPECT-ERROR: E-OOB\n", DIV_BY_ZERO)  # divisor 1: no error
    result = pytester.runpytest("div.mim")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*expected: error E-OOB*", "*found:    success, result 100*"])


def test_filecheck_against_plain_dump(pytester: pytest.Pytester) -> None:
    mim(pytester, "ok.mim", "// EXPECT: 42\n// CHECK: fun extern main\n// CHECK: return (m0, core.wrap.add\n",
        ANSWER)
    mim(pytester, "ko.mim", "// CHECK: fun extern main\n// CHECK-NEXT: no such line\n", ANSWER)
    result = pytester.runpytest("ok.mim", "ko.mim", "-v")
    result.assert_outcomes(passed=4, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*ok.mim::filecheck PASSED*", "*ko.mim::filecheck FAILED*",
                                 "*verimim dump ko.mim does not match its CHECK lines*", "*no such line*",
                                 "*--- the dump ---*"])


def test_check_lines_anywhere_are_filechecked(pytester: pytest.Pytester) -> None:
    # FileCheck reads a directive anywhere on a line: after code, in a block comment (no
    # filecheck item was made for them, so they checked nothing)
    mim(pytester, "trailing.mim", "", ANSWER.replace("    return", "    return // CHECK: no_such_text\n   "))
    mim(pytester, "block.mim", "/* CHECK: no_such_text\n*/\n", ANSWER)
    mim(pytester, "xcheck.mim", "// we RECHECK: prose\n", ANSWER)
    mim(pytester, "com.mim", "// COM: CHECK: commented out, as FileCheck's COM: does\n", ANSWER)
    result = pytester.runpytest("trailing.mim", "block.mim", "xcheck.mim", "com.mim", "-v")
    assert "com.mim::filecheck" not in result.stdout.str() and "com.mim::check PASSED" in result.stdout.str()
    result.stdout.fnmatch_lines(["*trailing.mim::filecheck FAILED*"])
    result.stdout.fnmatch_lines(["*block.mim::annotations FAILED*"])  # (`// CHECK:` asked for)
    assert "xcheck.mim::filecheck" not in result.stdout.str() and "xcheck.mim::check PASSED" in result.stdout.str()


def test_filecheck_after_a_phase(pytester: pytest.Pytester) -> None:
    mim(pytester, "before.mim", "// CHECK: mem.slot (I32, 0)\n// CHECK-NOT: mslot\n", SLOT)
    mim(pytester, "after.mim", "// CHECK-AFTER: mem.alloc2malloc_repl\n// CHECK: mem.mslot (I32, 0)\n", SLOT)
    mim(pytester, "wrong.mim", "// CHECK-AFTER: mem.alloc2malloc_repl\n// CHECK: mem.slot (I32, 0)\n", SLOT)
    result = pytester.runpytest("before.mim", "after.mim", "wrong.mim", "-v")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*wrong.mim::filecheck FAILED*",
                                 "*verimim dump --after mem.alloc2malloc_repl wrong.mim does not match*"])


def test_phase_rejection_is_a_check_item_only(pytester: pytest.Pytester) -> None:
    mim(pytester, "const.mim", "// EXPECT-ERROR: E-ADDR-SPACE\n// EXPECT-LOC: 9:19\n", CONST_MALLOC)
    mim(pytester, "moved.mim", "// EXPECT-ERROR: E-ADDR-SPACE\n// EXPECT-LOC: 9:20\n", CONST_MALLOC)
    result = pytester.runpytest("const.mim", "moved.mim", "-v")
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*const.mim::check PASSED*", "*moved.mim::check FAILED*",
                                 "*expected: E-ADDR-SPACE at 9:20*", "*found:    E-ADDR-SPACE at 9:19*"])
    result.stdout.fnmatch_lines(["*const.mim::run?interp? SKIPPED (check rejects the program with E-ADD*"])


def test_collection_runs_no_check(pytester: pytest.Pytester) -> None:
    """Which items a file has is read from its annotations alone: `--collect-only` (or a `-k`
    selection) does not run `verimim check` on a file expecting a phase code."""
    pytester.makeconftest("import verimim.driver\n"
                          "_check = verimim.driver.check\n"
                          "def _no(*a, **k):\n    raise AssertionError('check ran at collection')\n"
                          "def pytest_configure(config):\n    verimim.driver.check = _no\n"
                          "def pytest_unconfigure(config):\n    verimim.driver.check = _check\n")
    mim(pytester, "const.mim", "// EXPECT-ERROR: E-ADDR-SPACE\n", CONST_MALLOC)
    result = pytester.runpytest("const.mim", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    assert item_names(result) == ["const.mim::check", "const.mim::run[interp]"]


def test_verimim_paths_collects_only_those_directories(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nverimim_paths =\n    progs\n")
    mim(pytester, "progs/a.mim", "// EXPECT: 42\n", ANSWER)
    mim(pytester, "progs/sub/b.mim", "// EXPECT-ERROR: E-TYPE\n", ILL_TYPED)
    mim(pytester, "other/c.mim", "// EXPECT: 42\n", ANSWER)
    result = pytester.runpytest("--collect-only", "-q")
    assert item_names(result) == ["progs/a.mim::check", "progs/a.mim::run[gpu]", "progs/a.mim::run[interp]",
                                  "progs/sub/b.mim::check"]


def test_explicit_path_is_collected_once(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nverimim_paths = progs\n")
    mim(pytester, "progs/a.mim", "// EXPECT-ERROR: E-TYPE\n", ILL_TYPED)
    mim(pytester, "other/c.mim", "// EXPECT-ERROR: E-TYPE\n", ILL_TYPED)
    result = pytester.runpytest("other/c.mim", "--collect-only", "-q")
    assert item_names(result) == ["other/c.mim::check"]
    result = pytester.runpytest(".", "progs/a.mim", "--collect-only", "-q")
    assert item_names(result) == ["progs/a.mim::check"]


def test_verimim_paths_outside_testpaths_are_run(pytester: pytest.Pytester) -> None:
    # `testpaths` names the Python tests only: a plain `pytest` must still run the programs
    # (it ran none, and a failing program left the run green).
    pytester.makeini("[pytest]\ntestpaths = tests\nverimim_paths = programs\n")
    mim(pytester, "programs/wrong.mim", "// EXPECT: 43\n", ANSWER)
    pytester.makepyfile(**{"tests/test_x": "def test_x():\n    pass\n"})
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*expected: result 43*"])
    # named arguments choose what runs, as in pytest
    pytester.runpytest("tests").assert_outcomes(passed=1)


def test_verimim_include_lets_a_program_import_its_own_module(pytester: pytest.Pytester) -> None:
    (pytester.path / "lib").mkdir()
    (pytester.path / "lib" / "mylib.mim").write_text("plugin core;\nlet answer = 41I32;\n", encoding="utf-8")
    body = ANSWER.replace("plugin mem;\n", "plugin mem;\nimport mylib;\n").replace("41I32", "answer")
    mim(pytester, "progs/a.mim", "// EXPECT: 43\n", body)  # wrong: the command must name -I
    pytester.makeini("[pytest]\nverimim_paths = progs\n")
    result = pytester.runpytest()
    result.assert_outcomes(failed=2, skipped=1)  # E-IMPORT without the directory
    result.stdout.fnmatch_lines(["*E-IMPORT*"])
    pytester.makeini("[pytest]\nverimim_paths = progs\nverimim_include = lib\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*verimim run progs/a.mim -I lib --target interp*", "*found:    result 42*"])
    pytester.makeini("[pytest]\nverimim_paths = progs\nverimim_include = nowhere\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*verimim_include names `nowhere`*which is no directory*"])


def test_a_verimim_path_that_does_not_exist_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nverimim_paths =\n    progs\n    no_such_dir\n")
    mim(pytester, "progs/a.mim", "// EXPECT: 42\n", ANSWER)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "verimim_paths names `no_such_dir`" in result.stderr.str() + result.stdout.str()


def test_without_verimim_paths_nothing_is_collected(pytester: pytest.Pytester) -> None:
    mim(pytester, "progs/a.mim", "// EXPECT: 42\n", ANSWER)
    result = pytester.runpytest("--collect-only", "-q")
    assert item_names(result) == []


def test_mim_world_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_world=f'''
TEXT = {ANSWER!r}

def test_world(mim_world):
    world, unit = mim_world(TEXT)
    assert "main" in world.externals
    assert unit.path == "<text>"
''')
    pytester.runpytest().assert_outcomes(passed=1)


def test_mim_world_fixture_reports_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_world=f'''
import pytest
from verimim.diagnostics import VerimimError

def test_world(mim_world):
    with pytest.raises(VerimimError):
        mim_world({ILL_TYPED!r})
''')
    pytester.runpytest().assert_outcomes(passed=1)


def test_verimim_phase_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_phase='''
import pytest

@pytest.mark.verimim_phase("gpu.mem_checks")
def test_named(verimim_phase_name):
    assert verimim_phase_name == "gpu.mem_checks"

@pytest.mark.verimim_phase("gpu.mem_checks")
class TestOnClass:
    def test_method(self, verimim_phase_name):
        assert verimim_phase_name == "gpu.mem_checks"

def test_unmarked(verimim_phase_name):
    pass
''')
    result = pytester.runpytest("--strict-markers", "-rf")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*needs @pytest.mark.verimim_phase(NAME)*"])
    pytester.runpytest("--markers").stdout.fnmatch_lines(["@pytest.mark.verimim_phase(name, ...):*"])


def test_a_test_marked_for_two_phases_tests_each(pytester: pytest.Pytester) -> None:
    # (the second marker was dropped without a word: its phase never tested)
    pytester.makepyfile(test_two='''
import pytest

@pytest.mark.verimim_phase("gpu.mem_checks")
@pytest.mark.verimim_phase("compile.cleanup")
def test_both(verimim_phase_name):
    assert verimim_phase_name != "gpu.mem_checks"

@pytest.mark.verimim_phase("gpu.mem_checks")
@pytest.mark.verimim_phase("gpu.mem_chekcs")
def test_misspelt_second():
    pass

@pytest.mark.verimim_phase("compile.cleanup")
class TestOnClass:
    @pytest.mark.verimim_phase("gpu.mem_checks")
    def test_own(self, verimim_phase_name):  # (its own marker overrides its class's)
        assert verimim_phase_name == "gpu.mem_checks"

    def test_inherited(self, verimim_phase_name):
        assert verimim_phase_name == "compile.cleanup"
''')
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_both?compile.cleanup? PASSED*", "*test_both?gpu.mem_checks? FAILED*",
                                 "*unknown phase `gpu.mem_chekcs`*"])


def test_one_marker_naming_two_phases_tests_each(pytester: pytest.Pytester) -> None:
    # `verimim_phase("a", "b")` ran for "a" only: the second name was dropped without a word
    pytester.makepyfile(test_pair='''
import pytest

@pytest.mark.verimim_phase("gpu.mem_checks", "compile.cleanup")
def test_both(verimim_phase_name):
    assert verimim_phase_name != "gpu.mem_checks"

@pytest.mark.verimim_phase("gpu.mem_checks", "gpu.mem_chekcs")
def test_misspelt_second():
    pass
''')
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_both?gpu.mem_checks? FAILED*", "*test_both?compile.cleanup? PASSED*",
                                 "*unknown phase `gpu.mem_chekcs`*"])


def test_phase_marker_and_world_fixture_in_a_hypothesis_property(pytester: pytest.Pytester) -> None:
    # Hypothesis refuses function-scoped fixtures in @given tests
    pytester.makepyfile(test_prop=f'''
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.verimim_phase("gpu.mem_checks")
@settings(max_examples=3, deadline=None)
@given(st.integers(0, 9))
def test_property(verimim_phase_name, mim_world, n):
    assert verimim_phase_name == "gpu.mem_checks"
    world, unit = mim_world({ANSWER!r})
''')
    pytester.runpytest().assert_outcomes(passed=1)


def test_phase_marker_with_an_unknown_phase_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_phase='''
import pytest

@pytest.mark.verimim_phase("gpu.mem_check")
def test_typo(verimim_phase_name):
    pass
''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*`test_typo`: @pytest.mark.verimim_phase: unknown phase `gpu.mem_check`; "
                                 "did you mean `gpu.mem_checks`?*"])


def test_phase_marker_is_checked_without_the_fixture_and_names_resolve_as_the_cli_reads_them(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_unasked='''
import pytest

@pytest.mark.verimim_phase("no.such_phase")
def test_not_asking():
    pass

@pytest.mark.verimim_phase("no.such_phase")
def test_asking(verimim_phase_name):
    pass

def test_neighbour():  # a marker error is its test's, not the module's
    pass
''', test_names='''
import pytest

@pytest.mark.verimim_phase("remove_double_syncs")
def test_short(verimim_phase_name):
    assert verimim_phase_name == "gpu.remove_double_syncs"

@pytest.mark.verimim_phase("compile.beta_red_pass")
def test_alias(verimim_phase_name):
    assert verimim_phase_name == "compile.beta_red"
''', test_unrun='''
import pytest

@pytest.mark.verimim_phase("mem.ssa_pass")
def test_unimplemented(verimim_phase_name):
    pass
''')
    result = pytester.runpytest("test_unasked.py")
    result.assert_outcomes(errors=2, passed=1)
    result.stdout.fnmatch_lines(["*`test_not_asking`: @pytest.mark.verimim_phase: unknown phase `no.such_phase`*"])
    result.stdout.fnmatch_lines(["*`test_asking`: @pytest.mark.verimim_phase: unknown phase `no.such_phase`*"])
    pytester.runpytest("test_names.py").assert_outcomes(passed=2)
    result = pytester.runpytest("test_unrun.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*`mem.ssa_pass` is an upstream phase that verimim does not run*"])

def test_kernel_races_annotation_is_checked(pytester: pytest.Pytester) -> None:
    from pathlib import Path

    text = (Path(__file__).parent / "programs" / "valid" / "alloc_copy_after_host_call.mim").read_text(encoding="utf-8")
    body = text[text.index("plugin core;"):]
    mim(pytester, "proved.mim", "// EXPECT: 14\n// KERNEL-RACES: proved\n", body)
    mim(pytester, "stale.mim", "// EXPECT: 14\n// KERNEL-RACES: unknown\n", body)
    result = pytester.runpytest("proved.mim", "stale.mim", "-k", "check")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*expected: races unknown for every kernel launch*", "*found:    races proved*"])


def test_expect_loc_of_a_diagnostic_in_another_file_does_not_match(tmp_path: Path) -> None:
    from verimim import driver
    from verimim.diagnostics import Diagnostic, Loc
    from verimim.pytest_plugin import MimTestFailure, _expect_error

    mine = tmp_path / "a.mim"
    mine.write_text("")
    report = driver.Report(str(mine), diagnostics=[
        Diagnostic("W-LEAK", "leak", Loc(str(tmp_path / "plug.mim"), 3, 5), "warning")])
    with pytest.raises(MimTestFailure, match="found:    W-LEAK at .*plug.mim:3:5"):
        _expect_error("run", report, "W-LEAK", (3, 5), mine)
    report.diagnostics[0] = Diagnostic("W-LEAK", "leak", Loc(str(mine), 3, 5), "warning")
    _expect_error("run", report, "W-LEAK", (3, 5), mine)


@pytest.mark.parametrize("annotations, problem", [
    ("// EXPECT-LOC: 7\n// EXPECT-ERROR: E-TYPE\n", "`7` is not LINE:COL"),
    ("// FUEL: lots\n// EXPECT: 42\n", "`lots` is not a positive step count"),
    ("// FUEL: 0\n// EXPECT: 42\n", "`0` is not a positive step count"),
    ("// EXPECT: 42\n// EXPECT: 41\n", "a second `// EXPECT:`"),
    ("// EXPECT-ERROR: E-OOB\n// EXPECT: 7\n", "contradict each other"),
    ("// EXPECT-WARNING: W-LEAK\n", "checked with an EXPECT result only"),
    ("// EXPECT: 42\n// EXPECT-LOC: 1:1\n", "there is none"),
    ("// EXPECT-ERROR:\n", "`// EXPECT-ERROR:` has no value"),
    ("// EXPECT-WARNING:\n// EXPECT: 42\n", "`// EXPECT-WARNING:` has no value"),
    # a key in the wrong form, or another tool's word for it: ignored, it would test nothing
    ("// EXPECT-ERROR : E-OOB\n", "`// EXPECT-ERROR : E-OOB` is not an annotation; write `// EXPECT-ERROR: …`"),
    ("// EXPECT : 41\n", "write `// EXPECT: …`"),
    ("// EXPECT_ERROR: E-OOB\n", "write `// EXPECT-ERROR: …`"),
    ("/// EXPECT-ERROR: E-OOB\n", "write `// EXPECT-ERROR: …`"),
    ("/* EXPECT: 41 */\n", "write `// EXPECT: …`"),
    ("// RESULT: 41\n", "write `// EXPECT: …`"),
    ("// ERROR: E-OOB\n", "write `// EXPECT-ERROR: …`"),
    ("// ARGS: \"a b\n// EXPECT: 42\n", "cannot be split as a shell would"),
    ("// KERNEL-RACES: banana\n// EXPECT: 42\n", "`banana` is not a status"),
    ("// EXPECT-ERROR: E-FOO\n", "`E-FOO` is not an error code"),
    ("// EXPECT: 42\n// EXPECT-GPU-ERROR: E-FOO\n", "`E-FOO` is not an error code"),
    ("// EXPECT-GPU-ERROR: E-UNSUPPORTED\n", "EXPECT-GPU-ERROR goes with an EXPECT result"),
    ("// EXPECT 41\n", "`// EXPECT 41` is not an annotation"),
    ("// expect: 41\n", "is not an annotation"),
    ("// EXPECTED: 41\n", "did you mean `EXPECT`"),
    ("// CHECK : x\n", "is no FileCheck directive"),
    ("// CHECK-NXET: x\n// CHECK: fun\n", "did you mean `CHECK-NEXT`"),
    ("// CHECK-AFTER: mem.alloc2malloc_repl\n", "checks nothing"),
    # an expectation under a name the plugin does not know, in a block comment, after code
    ("// EXPECT-RESULT: 41\n", "unknown annotation `EXPECT-RESULT`"),
    ("// EXPECT-RUNTIME-ERROR: E-OOB\n", "unknown annotation `EXPECT-RUNTIME-ERROR`"),
    ("// EXIT-CODE: 41\n", "write `// EXPECT: …`"),
    ("/*\n EXPECT: 41\n*/\n", "line 2: `EXPECT: 41` stands in a `/* … */` comment"),
    ("/*\n// EXPECT: 41\n*/\n", "line 2: `// EXPECT: 41` stands in a `/* … */` comment"),
    ("/* a licence\n * EXPECT-LOC: 3:1\n */\n", "stands in a `/* … */` comment"),
    ("plugin core; // EXPECT: 41\n", "line 1: `// EXPECT: 41` follows code on its line"),
    ("/* about */ // EXPECT: 41\n", "line 1: `// EXPECT: 41` follows a `/* … */` comment on its line"),
    ("/* about\n   this */ // EXPECT: 41\n", "line 2: `// EXPECT: 41` follows a `/* … */` comment on its line"),
    ("/* a note */ /* EXPECT: 41 */\n", "line 1: `/* EXPECT: 41 */` is not an annotation"),
    ("/* a note */ /// EXPECT: 41\n", "line 1: `/// EXPECT: 41` is not an annotation"),
    ("/* a note */ // RESULT: 41\n", "line 1: `// RESULT: 41` is not an annotation"),
])
def test_wrong_annotations_fail_the_file_instead_of_testing_something_else(
        pytester: pytest.Pytester, annotations: str, problem: str) -> None:
    mim(pytester, "a.mim", annotations, ANSWER)
    result = pytester.runpytest("a.mim")
    result.assert_outcomes(failed=1)
    assert problem in result.stdout.str() and "Traceback" not in result.stdout.str()


def test_a_key_below_the_header_is_an_error_not_an_annotation(pytester: pytest.Pytester) -> None:
    # a comment in the code must not change what the test checks (it changed argc)
    body = ANSWER.replace("    return", "    // ARGS: x y z\n    return")
    mim(pytester, "a.mim", "// EXPECT: 42\n", body)
    result = pytester.runpytest("a.mim")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*line 6: `// ARGS:` below the program's first definition*"])


def test_annotations_among_the_plugin_declarations_are_still_at_the_top(pytester: pytest.Pytester) -> None:
    mim(pytester, "a.mim", "", ANSWER.replace("plugin mem;\n", "plugin mem;\n// ARGS: a\n// EXPECT: 43\n"))
    pytester.runpytest("a.mim").assert_outcomes(passed=2, skipped=1)


def test_a_header_block_comment_keeps_the_header_going(pytester: pytest.Pytester) -> None:
    mim(pytester, "a.mim", "/* a licence\n   of two lines */\n// EXPECT: 42\n", ANSWER)
    pytester.runpytest("a.mim").assert_outcomes(passed=2, skipped=1)


def test_args_are_split_as_a_shell_does_and_the_command_reproduces(pytester: pytest.Pytester) -> None:
    mim(pytester, "q.mim", "// ARGS: \"a b\"\n// EXPECT: 43\n", ANSWER)  # argc 2
    pytester.runpytest("q.mim").assert_outcomes(passed=2, skipped=1)
    mim(pytester, "d.mim", "// ARGS: -v 'a b'\n// EXPECT: 40\n", ANSWER)  # argc 3: fails
    result = pytester.runpytest("d.mim")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    # options first, then `--`: pasted into a shell, the command runs main with the same argv
    result.stdout.fnmatch_lines(["*verimim run d.mim --target interp -- -v 'a b'*", "*found:    result 44*"])


def test_prose_that_starts_with_a_key_word_is_no_annotation(pytester: pytest.Pytester) -> None:
    mim(pytester, "a.mim", "// Expect the sum of the arguments.\n// WARNING: a slow one\n// ERROR: none so far\n"
                           "/* NOTE: a block\n   WARNING: also prose */\n"
                           "// EXPECT: 42\n", ANSWER.replace("return", "return // WARNING: prose, after code\n   "))
    pytester.runpytest("a.mim").assert_outcomes(passed=2, skipped=1)


def test_a_byte_order_mark_does_not_hide_the_first_annotation(pytester: pytest.Pytester) -> None:
    (pytester.path / "bom.mim").write_text("\ufeff// EXPECT: 41\n" + ANSWER, encoding="utf-8")
    result = pytester.runpytest("bom.mim")
    result.assert_outcomes(passed=1, failed=1, skipped=1)  # check passes, run[interp] finds 42


def test_a_file_that_is_not_utf8_is_tested_not_a_collection_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "bytes.mim").write_bytes(b"// EXPECT-ERROR: E-PARSE\n// EXPECT-LOC: 4:6\n"
                                              b"plugin core;\nlet x\xe9 = 1;\n")
    pytester.runpytest("bytes.mim").assert_outcomes(passed=1)


def test_the_failing_command_is_the_one_to_run(pytester: pytest.Pytester) -> None:
    mim(pytester, "sub/fuel.mim", "// FUEL: 5\n// EXPECT: 42\n", ANSWER)
    result = pytester.runpytest("sub/fuel.mim")
    result.stdout.fnmatch_lines(["*verimim run sub/fuel.mim --fuel 5 --target interp*"])


def test_expect_gpu_error_is_what_the_gpu_run_must_report(pytester: pytest.Pytester) -> None:
    # run[gpu] of a program the GPU backend does not compile: with a device (faked here, and the
    # run's report with it), the item passes on that error and fails on a result or another code
    pytester.makeconftest('''
from verimim import driver
from verimim.diagnostics import Diagnostic
import verimim.runtime.cuda as cuda

SAVED = {}

def fake_run(path, include, args, **kw):
    if kw.get("target") != "gpu":
        return SAVED["run"](path, include, args, **kw)
    code = open(path).read().split("GIVES: ")[1].split()[0]
    return driver.Report(path, [Diagnostic(code, "the GPU backend cannot compile it")])

# (the .mim items take no fixtures: patched around each item, restored after it)
def pytest_runtest_setup(item):
    SAVED.update(run=driver.run, available=cuda.device_available)
    driver.run, cuda.device_available = fake_run, lambda: True

def pytest_runtest_teardown(item):
    driver.run, cuda.device_available = SAVED["run"], SAVED["available"]
''')
    mim(pytester, "a.mim", "// EXPECT: 42\n// EXPECT-GPU-ERROR: E-UNSUPPORTED\n// GIVES: E-UNSUPPORTED\n", ANSWER)
    mim(pytester, "b.mim", "// EXPECT: 42\n// EXPECT-GPU-ERROR: E-UNSUPPORTED\n// GIVES: E-OOB\n", ANSWER)
    result = pytester.runpytest("a.mim", "b.mim", "-k", "gpu")
    result.assert_outcomes(passed=1, failed=1, deselected=4)
    out = result.stdout.str()
    assert "error E-UNSUPPORTED" in out and "error E-OOB" in out and "Traceback" not in out
