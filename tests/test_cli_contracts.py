"""The contract breaks of issue 14, each fixed and kept fixed: environment errors exit 2, option
values checked before any work, recursion limits located, encodings at line:col, a byte-order
mark accepted, imports kept inside their folders, E-FUEL located, launches too big for the
interpreter refused up front, fuzz progress when stderr is not a terminal."""
from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from tests.test_cli import verimim
from verimim import driver
from verimim.diagnostics import Loc, ParseError, recursion_diagnostic
from verimim.progress import plain_progress
from verimim.source import decode_source

DEMO = str(driver.DEMO_PROGRAM)

_KERNEL = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx {g}, item_id: Idx {i}, (), out: gpu.GlobalPtr «{g}; «{i}; I32»»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let m1 = mem.store (m1, mem.lea (mem.lea (out, group_id), item_id), core.bitcast I32 item_id);
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «{g}; «{i}; I32»» m1;
    ret (m0, m1, m4) = gpu.launch ({g}, {i}, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, argc);
"""


def _launch(tmp_path: Path, groups: int, items: int) -> str:
    f = tmp_path / f"launch_{groups}_{items}.mim"
    f.write_text(_KERNEL.format(g=groups, i=items), encoding="utf-8")
    return str(f)


# ---------------------------------------------------------------- option values and environment

def test_emit_smt2_into_an_unwritable_place_is_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("", encoding="utf-8")
    p = verimim("check", DEMO, "--emit-smt2", str(blocker / "sub"), "--json")
    assert p.returncode == 2, p.stderr
    obj = json.loads(p.stdout)
    assert obj["diagnostics"][0]["code"] == "E-USAGE" and obj["phases"] is None  # nothing ran


def test_emit_smt2_directory_is_created(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir"
    assert verimim("check", DEMO, "--emit-smt2", str(out)).returncode == 0
    assert list(out.glob("*.smt2"))


def test_unknown_device_phase_rejected_before_the_pipeline() -> None:
    start = time.monotonic()
    p = verimim("check", DEMO, "--device-phases", "gpu.nosuch", "--json")
    assert p.returncode == 2
    obj = json.loads(p.stdout)
    assert "gpu.nosuch" in obj["diagnostics"][0]["message"] and obj["phases"] is None
    near = json.loads(verimim("check", DEMO, "--host-phases", "gpu.remove_double_sync", "--json").stdout)
    assert "did you mean `gpu.remove_double_syncs`" in near["diagnostics"][0]["message"]
    assert time.monotonic() - start < 60


def test_known_device_phase_is_accepted() -> None:
    assert verimim("check", DEMO, "--device-phases", "gpu.remove_double_syncs").returncode == 0


# ---------------------------------------------------------------- recursion limits

def _recurse_with_loc(depth: int) -> None:
    loc = Loc("deep.mim", 7, 3)  # noqa: F841  (found by recursion_diagnostic in the frame)
    _recurse_with_loc(depth + 1)


def _recurse_without_loc(depth: int) -> None:
    _recurse_without_loc(depth + 1)


def test_recursion_limit_is_located_where_a_frame_knows_the_place() -> None:
    with pytest.raises(RecursionError) as info:
        _recurse_with_loc(0)
    d = recursion_diagnostic(info.value)
    assert d.code == "E-UNSUPPORTED" and d.loc == Loc("deep.mim", 7, 3)


def test_recursion_limit_without_place_is_verimims_fault() -> None:
    with pytest.raises(RecursionError) as info:
        _recurse_without_loc(0)
    d = recursion_diagnostic(info.value)
    assert d.code == "E-INTERNAL" and d.loc is None


def test_driver_reports_a_located_recursion_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    def deep_load(path: str, include: list[str]) -> None:
        import sys

        old = sys.getrecursionlimit()
        sys.setrecursionlimit(2000)  # reach the limit quickly, on the driver's thread
        try:
            _recurse_with_loc(0)
        finally:
            sys.setrecursionlimit(old)

    monkeypatch.setattr(driver, "load", deep_load)
    report = driver.check(DEMO, [])
    (d,) = report.diagnostics
    assert d.code == "E-UNSUPPORTED" and d.loc is not None and d.loc.line == 7 and report.exit_code == 1


# ---------------------------------------------------------------- encodings

def test_non_utf8_byte_is_reported_at_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "latin1.mim"
    f.write_bytes("plugin core;\n// café ".encode() + b"\xe9t\xe9\nlet y = 1;\n")
    p = verimim("check", str(f), "--json")
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)["diagnostics"]
    assert d["code"] == "E-PARSE" and (d["line"], d["col"]) == (2, 9) and "0xe9" in d["message"]


def test_decode_source_columns_count_characters() -> None:
    with pytest.raises(ParseError) as info:
        decode_source("«ab»\n€€".encode() + b"\xff", "x.mim")  # € is three bytes, one column
    assert info.value.loc == Loc("x.mim", 2, 3)


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "bom.mim"
    f.write_bytes(b"\xef\xbb\xbf" + driver.DEMO_PROGRAM.read_bytes())
    p = verimim("check", str(f))
    assert p.returncode == 0, p.stderr
    assert decode_source(b"\xef\xbb\xbfplugin core;", "x") == "plugin core;"


# ---------------------------------------------------------------- imports stay inside -I

def test_symlink_out_of_an_include_folder_is_refused(tmp_path: Path) -> None:
    inc, outside = tmp_path / "inc", tmp_path / "outside"
    inc.mkdir()
    outside.mkdir()
    (outside / "mylib.mim").write_text("plugin core;\naxm widget: Nat → Nat;\n", encoding="utf-8")
    (inc / "mylib.mim").symlink_to(outside / "mylib.mim")
    prog = tmp_path / "prog.mim"
    prog.write_text("plugin mylib;\nlet y = mylib.widget 3;\n", encoding="utf-8")
    p = verimim("check", str(prog), "-I", str(inc), "--json")
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)["diagnostics"]
    assert d["code"] == "E-IMPORT" and d["line"] == 1 and "outside" in d["message"]
    assert verimim("check", str(prog), "-I", str(outside)).returncode == 0


def test_symlink_inside_an_include_folder_is_followed(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "real.mim").write_text("plugin core;\naxm widget: Nat → Nat;\n", encoding="utf-8")
    (inc / "mylib.mim").symlink_to(inc / "real.mim")
    prog = tmp_path / "prog.mim"
    prog.write_text("plugin mylib;\nlet y = mylib.widget 3;\n", encoding="utf-8")
    p = verimim("check", str(prog), "-I", str(inc))
    assert p.returncode == 0, p.stderr


def test_an_include_folder_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    """-I of a folder that is not there (a typo) was accepted silently: exit 2, naming it."""
    prog = tmp_path / "prog.mim"
    prog.write_text("plugin core;\nlet y = 3;\n", encoding="utf-8")
    p = verimim("check", str(prog), "-I", str(tmp_path / "no_such_dir"), "--json")
    assert p.returncode == 2
    (d,) = json.loads(p.stdout)["diagnostics"]
    assert d["code"] == "E-USAGE" and "no_such_dir" in d["message"]


# ---------------------------------------------------------------- run's limits

def test_fuel_is_located_at_the_loop() -> None:
    path = PROGRAMS / "runtime_errors" / "fuel_infinite_loop.mim"
    p = verimim("run", str(path), "--fuel", "10000", "--target", "interp", "--json")
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)["diagnostics"]
    loop_line = next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                     if "spin (m0, core.nat.add" in line)
    assert d["code"] == "E-FUEL" and d["line"] == loop_line


def test_huge_launch_is_refused_up_front(tmp_path: Path) -> None:
    start = time.monotonic()
    p = verimim("run", _launch(tmp_path, 65536, 1024), "--target", "interp", "--json")
    assert time.monotonic() - start < 60
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)["diagnostics"]
    assert d["code"] == "E-FUEL" and "67108864 work-items" in d["message"] and "--target gpu" in d["message"]
    assert d["line"] == 15


def test_max_work_items_is_the_limit(tmp_path: Path) -> None:
    path = _launch(tmp_path, 2, 4)
    refused = verimim("run", path, "--target", "interp", "--max-work-items", "7", "--json")
    assert refused.returncode == 1 and "2 × 4 = 8 work-items" in refused.stdout
    assert "(7, --max-work-items;" in refused.stdout and "about a minute" not in refused.stdout  # (the default's)
    ran = verimim("run", path, "--target", "interp", "--max-work-items", "8", "--json")
    assert ran.returncode == 0 and json.loads(ran.stdout)["result"] == 1
    assert verimim("run", path, "--max-work-items", "0").returncode == 2


# ---------------------------------------------------------------- fuzz progress

def test_plain_progress_prints_lines_at_intervals() -> None:
    out = io.StringIO()
    now = [0.0]
    with plain_progress("fuzzing", 60, out, interval=10, clock=lambda: now[0]) as update:
        for t in range(0, 35, 5):
            now[0] = float(t)
            update(t, float(t), 0)
    lines = out.getvalue().splitlines()
    assert lines == ["fuzzing: 10 s of 60 s, 10 programs, 0 failures",
                     "fuzzing: 20 s of 60 s, 20 programs, 0 failures",
                     "fuzzing: 30 s of 60 s, 30 programs, 0 failures",
                     "fuzzing: 30 s of 60 s, 30 programs, 0 failures (done)"]


def test_fuzz_prints_progress_when_not_a_terminal(tmp_path: Path) -> None:
    p = verimim("fuzz", "--budget", "1", "--seed", "3", "--no-verify", "--out", str(tmp_path))
    assert "fuzzing: " in p.stderr and "(done)" in p.stderr


@pytest.mark.parametrize("text,seconds", [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("8h", 28800.0),
                                          ("1h30m", 5400.0), ("2d", 172800.0), ("0.5", 0.5)])
def test_a_fuzz_budget_is_seconds_or_a_duration_with_units(text: str, seconds: float) -> None:
    from verimim.cli import Duration

    assert Duration().convert(text, None, None) == seconds


@pytest.mark.parametrize("text", ["8x", "h", "1h30", "-5", "0.01s", ""])
def test_a_budget_that_is_no_duration_is_a_usage_error(text: str) -> None:
    p = verimim("fuzz", "--budget", text, "--programs", "1", "--json")
    assert p.returncode == 2 and "--budget" in json.loads(p.stdout)["diagnostics"][0]["message"]


def test_an_eight_hour_budget_stops_after_its_programs(tmp_path: Path) -> None:
    p = verimim("fuzz", "--budget", "8h", "--programs", "1", "--seed", "3", "--no-verify", "--out", str(tmp_path),
                "--json")
    assert p.returncode in (0, 3) and json.loads(p.stdout)["programs"] == 1


# ---------------------------------------------------------------- notes carry no error codes

def test_diff_of_undefined_behaviour_says_why_in_a_note_of_the_error() -> None:
    path = PROGRAMS / "runtime_errors" / "use_after_free.mim"
    p = verimim("diff", str(path), "--no-gpu", "--json")
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)["diagnostics"]  # one error, no separate note repeating its code
    assert d["code"] == "E-USE-AFTER-FREE" and d["severity"] == "error"
    assert any("not compared on other targets" in r["message"] for r in d["related"])


# ---------------------------------------------------------------- check/run/diff progress

def test_heartbeat_lines_during_long_work_only() -> None:
    from verimim.progress import heartbeat

    out = io.StringIO()
    with heartbeat("verimim check p.mim", out, interval=0.05):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all(re.fullmatch(r"verimim check p\.mim: still working, \d+ s", x) for x in lines)
    quiet = io.StringIO()
    with heartbeat("verimim check p.mim", quiet, interval=5):
        pass
    assert quiet.getvalue() == ""


def test_non_utf8_import_is_reported_in_the_imported_file(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "mylib.mim").write_bytes(b"plugin core;\naxm widget: Nat \xe2\x86\x92 Nat; // \xff\n")
    prog = tmp_path / "prog.mim"
    prog.write_text("plugin mylib;\nlet y = mylib.widget 3;\n", encoding="utf-8")
    p = verimim("check", str(prog), "-I", str(inc), "--json")
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)["diagnostics"]
    assert d["code"] == "E-PARSE" and d["file"] == str(inc / "mylib.mim") and (d["line"], d["col"]) == (2, 27)


def test_diff_of_a_launch_too_big_says_so(tmp_path: Path) -> None:
    p = verimim("diff", _launch(tmp_path, 2, 4), "--no-gpu", "--json")
    assert p.returncode == 0  # small enough: compared
    big = verimim("diff", _launch(tmp_path, 65536, 1024), "--no-gpu", "--json")
    (d,) = json.loads(big.stdout)["diagnostics"]
    assert d["code"] == "E-FUEL" and [r["message"] for r in d["related"]] == [
        "not compared on other targets: the interpreter cannot run it"]


ARGV_BYTE = """plugin core;
plugin mem;
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =
    let (m0, s) = mem.load (m0, mem.lea (argv, 1:(Idx ⊤:Nat)));
    let (m0, c) = mem.load (m0, mem.lea (s, 0:(Idx ⊤:Nat)));
    return (m0, core.conv.u 4294967296 c);
"""


def test_an_argument_that_is_not_utf8_reaches_the_program_as_its_bytes(tmp_path: Path) -> None:
    """A byte 0xff on the command line was E-INTERNAL (UnicodeEncodeError); argv[1][0] is 255."""
    import os
    import subprocess
    import sys

    prog = tmp_path / "argv_byte.mim"
    prog.write_text(ARGV_BYTE, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "verimim.cli", "run", str(prog), os.fsdecode(b"\xff")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "255", p.stderr
    assert driver.shell_command(["verimim", "run", "a b", os.fsdecode(b"\xff")]) == "verimim run 'a b' $'\\xff'"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_an_environment_error_in_one_line() -> None:
    """stdout on a full disk: exit 2 and one line, not a traceback with exit 1."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "verimim.cli", "check", "--json", str(driver.DEMO_PROGRAM)],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "error[E-USAGE]: cannot write the output" in p.stderr, p.stderr


def test_an_output_directory_nothing_can_be_written_into_is_found_before_the_program(tmp_path: Path) -> None:
    # /proc exists and root "may write" there (os.access): the failure came after the whole
    # pipeline, and an ill-typed program exited 1 without a word about the output.
    bad = tmp_path / "bad.mim"
    bad.write_text(driver.DEMO_PROGRAM.read_text().replace("plugin core;", "plugin core;\nlet oops: I32 = 5I64;", 1))
    p = verimim("compile", str(bad), "-o", "/proc/verimim_out")
    assert p.returncode == 2 and "the directory /proc is not writable" in p.stderr, p.stderr


def test_an_sm_that_is_no_nvptx_architecture_is_a_usage_error(tmp_path: Path) -> None:
    """`--sm bogus` wrote `.target bogus` into the PTX and exited 0."""
    p = verimim("compile", "--json", "--sm", "bogus", str(driver.DEMO_PROGRAM), "-o", str(tmp_path / "out"))
    assert p.returncode == 2 and "not an NVPTX architecture" in p.stdout, p.stdout
    assert not (tmp_path / "out.ptx").exists()
    # well-formed but unknown to LLVM: it said so on stderr (12 times, no code), wrote
    # `.target sm_999` and exited 0
    p = verimim("compile", "--json", "--sm", "sm_999", str(driver.DEMO_PROGRAM), "-o", str(tmp_path / "out"))
    assert p.returncode == 2 and "LLVM knows" in p.stdout and "recognized processor" not in p.stderr, p.stderr
    assert not (tmp_path / "out.ptx").exists()


def test_dump_cuts_a_deep_expression_with_lets_and_reads_back(tmp_path: Path) -> None:
    """A chain of lets each used once prints as one expression nested as deep as the chain:
    20,000 of them ran into Python's recursion limit (E-UNSUPPORTED, located in core.mim). The
    dump now cuts it every PRINT_DEPTH operations, and what it prints runs to the same result."""
    from verimim.dump import PRINT_DEPTH

    n = 400
    lines = ["plugin core;", "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)"
             ": [mem.M 0, I32] =", "    let x0 = argc;"]
    lines += [f"    let x{i} = core.bit2.xor_ 0 (core.wrap.mul 0 (x{i - 1}, argc), {i % 7}I32);" for i in range(1, n)]
    lines.append(f"    return (m0, x{n - 1});")
    prog = tmp_path / "chain.mim"
    prog.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep = driver.dump(str(prog), [])
    assert rep.ok and rep.text is not None, [d.render() for d in rep.diagnostics]
    deepest = max(line.count("(") for line in rep.text.splitlines())
    assert deepest <= 2 * PRINT_DEPTH + 8, deepest
    back = tmp_path / "back.mim"
    back.write_text(rep.text, encoding="utf-8")
    assert driver.run(str(back), [], ["a", "b"]).data["result"] == driver.run(str(prog), [], ["a", "b"]).data["result"]


def test_a_recursion_limit_is_not_located_in_a_plugin_file() -> None:
    from verimim.diagnostics import _PLUGIN_DIR, recursion_diagnostic

    class Node:
        def __init__(self, loc: Loc) -> None:
            self.loc = loc

    def deep(node: Node, user: Node | None, k: int) -> None:
        if k == 0:
            raise RecursionError("too deep")
        deep(node, user, k - 1)

    user, plugin = Node(Loc("prog.mim", 3, 5)), Node(Loc(f"{_PLUGIN_DIR}/core.mim", 67, 1))
    try:
        deep(plugin, user, 3)
    except RecursionError as e:
        d = recursion_diagnostic(e)
    assert d.code == "E-UNSUPPORTED" and d.loc == Loc("prog.mim", 3, 5), d


def test_ctrl_c_is_not_taken_by_z3_and_does_not_wait_for_the_work_thread() -> None:
    """Z3 cancelled the one query running at SIGINT and `check` went on: Ctrl-C did nothing for
    the 25 s of a long check. Z3's own handler is off, so the signal is Python's KeyboardInterrupt
    on the main thread, and the work thread (a daemon) does not hold the process open."""
    import threading

    import z3

    import verimim.smt.bv  # noqa: F401 — installs the z3 settings, as every Z3 user does
    from verimim.driver import run_with_big_stack

    assert z3.get_param("ctrl_c") == "false"
    assert run_with_big_stack(lambda: threading.current_thread().daemon) is True


def test_diff_reports_a_checker_phase_rejection_as_check_and_run_do() -> None:
    """A host store into the const space through a bitcast pointer: check and run say
    E-ADDR-SPACE (check_addr_spaces_repl); diff interpreted the source first and said
    E-UNSUPPORTED (the bitcast between address spaces)."""
    path = str(PROGRAMS / "phase_errors" / "store_const.mim")
    codes = {name: sorted({d.code for d in rep.diagnostics if d.severity == "error"})
             for name, rep in (("check", driver.check(path, [])), ("run", driver.run(path, [], [])),
                               ("diff", driver.diff(path, [], [], use_gpu=False)))}
    assert codes == {"check": ["E-ADDR-SPACE"], "run": ["E-ADDR-SPACE"], "diff": ["E-ADDR-SPACE"]}, codes


def test_diff_reports_a_phase_warning_once_when_a_later_phase_rejects() -> None:
    # the btensor lowering's warning was printed twice: with the warnings and again with the
    # rejection's diagnostics
    path = str(PROGRAMS / "phase_errors" / "btensor_combiner_that_divides.mim")
    report = driver.diff(path, [], [], use_gpu=False)
    codes = [d.code for d in report.diagnostics]
    assert codes.count("W-UNSUPPORTED") == 1 and codes.count("E-UNSUPPORTED") == 1, codes


def test_a_closed_stdout_is_an_environment_error_in_one_line() -> None:
    """`verimim dump prog.mim >&-`: a traceback (AttributeError on None) with exit 1; `run` and
    `check --json` exited 0 with their output lost."""
    import subprocess
    import sys

    for args in (["dump"], ["run"], ["check", "--json"]):
        p = subprocess.run([sys.executable, "-m", "verimim.cli", *args, str(driver.DEMO_PROGRAM)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
                           preexec_fn=lambda: __import__("os").close(1))
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr and "standard output is closed" in p.stderr, p.stderr


def test_json_after_the_double_dash_is_the_programs_argument() -> None:
    """`run --fuel 0 prog.mim -- --json`: the usage error came as JSON on stdout."""
    p = verimim("run", "--fuel", "0", str(driver.DEMO_PROGRAM), "--", "--json")
    assert p.returncode == 2 and p.stdout == "" and "error[E-USAGE]" in p.stderr, (p.stdout, p.stderr)


def test_the_snippet_is_the_line_the_location_counts(tmp_path: Path) -> None:
    """Line breaks only at "\\n", as the lexer counts them: a form feed or U+2028 in a comment
    made the snippet show a piece of the line before, under the right line:col."""
    f = tmp_path / "sep.mim"
    f.write_text("plugin core;\n// a [\x0c] b \u2028 c\r\nlet y = (1, $);\n", encoding="utf-8")
    p = verimim("check", str(f))
    assert p.returncode == 1 and f"{f}:3:13" in p.stderr and "3 | let y = (1, $);" in p.stderr, p.stderr


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs named pipes")
def test_a_program_from_a_fifo_is_read_once(tmp_path: Path) -> None:
    """The diagnostics' source lines were read from the file again: from a FIFO that second read
    blocked until the time-out (the program has a warning to show)."""
    import os
    import subprocess
    import sys
    import threading

    fifo = tmp_path / "prog.mim"
    os.mkfifo(fifo)
    text = (PROGRAMS / "valid" / "benign_race_of_loaded_values.mim").read_text(encoding="utf-8")
    writer = threading.Thread(target=lambda: fifo.write_text(text, encoding="utf-8"), daemon=True)
    writer.start()
    p = subprocess.run([sys.executable, "-m", "verimim.cli", "run", str(fifo)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr


def test_diff_reports_the_warnings_run_reports() -> None:
    # (`diff` said "8 targets agree" with no diagnostics where `run` warned W-BENIGN-RACE)
    path = str(PROGRAMS / "valid" / "benign_race_of_a_bool_and_a_byte.mim")
    ran = driver.run(path, [], [], target="interp")
    diffed = driver.diff(path, [], [], use_gpu=False)
    assert diffed.ok and [d.code for d in ran.diagnostics] == ["W-BENIGN-RACE"]
    assert [(d.code, d.loc) for d in diffed.diagnostics] == [(d.code, d.loc) for d in ran.diagnostics]


def _gpu_here() -> bool:
    from verimim.runtime.cuda import device_available

    return device_available()


@pytest.mark.skipif(_gpu_here(), reason="needs a machine without a CUDA device")
def test_asking_for_a_gpu_where_there_is_none_is_found_before_the_program(tmp_path: Path) -> None:
    # `run --target gpu` judged the program first (an ill-typed one exited 1); `diff --gpu` on a
    # program without kernels reported a "gpu" result from a machine without one.
    bad = tmp_path / "bad.mim"
    bad.write_text("plugin core;\nlet oops: I32 = 5I64;\n")
    p = verimim("run", str(bad), "--target", "gpu")
    assert p.returncode == 2 and "no CUDA device" in p.stderr, p.stderr
    p = verimim("diff", str(PROGRAMS / "valid" / "int_widths.mim"), "--gpu", "--json")
    assert p.returncode == 2 and json.loads(p.stdout)["diagnostics"][0]["code"] == "E-USAGE", p.stdout


def test_a_file_without_end_is_refused_not_read_for_ever() -> None:
    # (`check /dev/zero` said "still working" until killed)
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    p = verimim("check", "/dev/zero")
    assert p.returncode == 2 and "larger than 64 MiB" in p.stderr, p.stderr


@pytest.mark.parametrize("args", [["--json", "--format", "sarif"], ["--format=text", "--json"]])
def test_json_and_another_format_together_are_a_usage_error(args: list[str]) -> None:
    """Two outputs asked for one stdout: `--json` used to win silently."""
    p = verimim("check", *args, DEMO)
    assert p.returncode == 2, p.stderr
    obj = json.loads(p.stdout)
    assert obj["diagnostics"][0]["code"] == "E-USAGE" and "ask for two outputs" in obj["diagnostics"][0]["message"]
    same = verimim("check", "--json", "--format", "json", DEMO)
    assert same.returncode == 0 and json.loads(same.stdout)["ok"]
    last = verimim("check", "--format", "sarif", "--format", "json", "--json", DEMO)  # click takes the last
    assert last.returncode == 0 and json.loads(last.stdout)["ok"]


def test_python_dash_m_verimim_is_the_command() -> None:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "verimim", "run", DEMO, "--json"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout)["ok"], p.stderr
