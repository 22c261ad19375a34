"""`check`'s verdicts in text: a line per verdict short of proved (phases and kernels), a closing
count of every status, `--strict` failing on anything but proved/skipped, `-q` as before."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, PROGRAMS, need_shared
from tests.test_cli import verimim
from verimim import verdicts
from verimim.diagnostics import Loc, exit_code_for


def _data() -> dict[str, object]:
    return {
        "phases": [
            {"name": "a", "status": "proved", "detail": "ok"},
            {"name": "b", "status": "bounded", "detail": "loops unrolled 4 times", "side": "device"},
            {"name": "c", "status": "skipped", "detail": "nothing to do"},
            {"name": "d", "status": "rejected", "detail": "E-ADDR-SPACE"},
        ],
        "kernels": [{"name": "kernel", "launch": {"line": 30, "col": 5}, "races": "unknown",
                     "divergence": "proved", "detail": "time-out"}],
    }


def test_verdicts_of_phases_and_kernels() -> None:
    found = verdicts.from_report_data("p.mim", _data())
    assert [(v.subject, v.status) for v in found] == [
        ("phase `a`", "proved"), ("phase `b` (device)", "bounded"), ("phase `c`", "skipped"),
        ("phase `d`", "rejected"), ("kernel `kernel` races", "unknown"),
        ("kernel `kernel` barrier divergence", "proved")]
    assert found[4].loc == Loc("p.mim", 30, 5)
    assert verdicts.summary(found) == "2 proved, 1 bounded, 1 unknown, 1 rejected, 1 skipped"


def test_attention_leaves_out_settled_and_diagnosed() -> None:
    found = verdicts.from_report_data("p.mim", _data())
    lines = [v.line() for v in verdicts.attention(found)]
    assert lines == ["phase `b` (device): bounded: loops unrolled 4 times",
                     "p.mim:30:5: kernel `kernel` races: unknown: time-out"]


def test_strict_diagnostics_are_errors_of_exit_1() -> None:
    diags = verdicts.strict_diagnostics("p.mim", verdicts.from_report_data("p.mim", _data()))
    assert [d.code for d in diags] == ["E-UNPROVED", "E-UNPROVED"]
    assert diags[1].loc == Loc("p.mim", 30, 5) and "bounded" in diags[0].message
    assert exit_code_for(diags) == 1
    only_proved = {"phases": [{"name": "a", "status": "proved"}, {"name": "c", "status": "skipped"}]}
    assert verdicts.strict_diagnostics("p.mim", verdicts.from_report_data("p.mim", only_proved)) == []


def test_summary_of_nothing() -> None:
    assert verdicts.summary([]) == "no verdicts"


def test_check_text_names_unknown_phases_and_strict_fails() -> None:
    # With a 1 ms time-out Z3 gives up on some queries; which ones depends on the machine and the
    # moment, so each run's text (stderr) is compared with the JSON of that same run.
    need_shared()
    hits = 0
    for name in ("row_sums.mim", "two_arg_kernel.mim", "shared_sync_kernel.mim"):
        path = EXAMPLES / name
        p = verimim("check", str(path), "--timeout", "0.001", "--json")
        obj = json.loads(p.stdout)
        assert p.returncode == 0
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith(f"{path}: ok: ")
        for v in verdicts.attention(verdicts.from_report_data(str(path), obj)):
            assert v.line() in p.stderr and v.status in last
        s = verimim("check", str(path), "--timeout", "0.001", "--strict", "--json")
        sobj = json.loads(s.stdout)
        if verdicts.attention(verdicts.from_report_data(str(path), sobj)):
            hits += 1
            assert s.returncode == 1 and sobj["ok"] is False
            # (warnings, such as a benign race the kernel verifier found, may stand beside it)
            assert {d["code"] for d in sobj["diagnostics"] if d["severity"] == "error"} == {"E-UNPROVED"}
        else:
            assert s.returncode == 0
        q = verimim("check", str(path), "--timeout", "0.001", "-q")
        assert q.stderr.strip() == f"{path}: ok"  # only that (docs/cli.md): no warning, no note
    assert hits, "no example had an unknown phase at a 1 ms time-out"


def test_quiet_check_prints_only_ok_or_its_errors(tmp_path: Path) -> None:
    # -q printed a passing program's warnings (a benign race) before `FILE: ok`
    need_shared()
    benign = PROGRAMS / "runtime_errors" / "benign_same_value.mim"
    loud = verimim("check", str(benign))
    assert loud.returncode == 0 and "W-BENIGN-RACE" in loud.stderr
    q = verimim("check", str(benign), "-q")
    assert q.returncode == 0 and q.stderr.strip() == f"{benign}: ok"
    racy = verimim("check", str(EXAMPLES / "shared_race.mim"), "-q")
    assert racy.returncode == 1 and "error[E-RACE]" in racy.stderr


def test_check_summary_when_all_proved_and_strict_passes() -> None:
    need_shared()
    path = EXAMPLES / "simple_kernel.mim"
    p = verimim("check", str(path), "--strict")
    assert p.returncode == 0, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{path}: ok: ") and "proved" in line and "unknown" not in line
    assert "E-UNPROVED" not in p.stderr and ": unknown" not in p.stderr


def test_rejected_program_prints_summary_after_its_diagnostics() -> None:
    need_shared()
    path = EXAMPLES / "const_slot_store.mim"
    p = verimim("check", str(path))
    assert p.returncode == 1
    assert "E-ADDR-SPACE" in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(f"{path}: failed: ") and "1 rejected" in p.stderr
    assert "phase `gpu.check_addr_spaces_repl`: rejected" not in p.stderr  # its diagnostics say it


@pytest.mark.parametrize("name, code", [("const_slot_store.mim", "E-ADDR-SPACE"),
                                        ("mem_arg_kernel.mim", "E-MEM-CROSSING")])
def test_run_compiles_first_and_a_rejected_program_does_not_run(name: str, code: str) -> None:
    # CLI.md: `run` compiles and executes; exit 1 when a phase rejected the program. It ran the
    # source on the interpreter without the pipeline: mem_arg_kernel.mim "returned 1".
    need_shared()
    p = verimim("run", str(EXAMPLES / name), "--json")
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert {d["code"] for d in out["diagnostics"] if d["severity"] == "error"} == {code}
    assert out["result"] is None and out["pipeline"]["ran"]  # the plan that ran, not null


HOST_BTENSOR = """plugin core;
plugin mem;
plugin buffer;
plugin btensor;
plugin gpu;

fun add (m: mem.M 0, acc: I32, x: I32): [mem.M 0, I32] = return (m, core.wrap.add 0 (acc, x));
fun mean (m: mem.M 0, acc: I32, n: I32): [mem.M 0, I32] =
    let (m, q) = core.div.sdiv (m, (acc, n));
    return (m, q);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, a) = buffer.init (2, (2, 3), I32) (m0, ((core.wrap.sub 0 (0I32, 7I32), 2I32, argc), (9I32, 9I32, 9I32)));
    let (m0, n) = buffer.init (1, 2, I32) (m0, (3I32, 3I32));
    let (m0, o) = btensor.map_reduce_post @(1, 1) @(I32, I32, 1, 2) (2, (2, 3))
        @(I32, 2, (2, 3), I32, 1, 2) (add, 0I32, mean) ((0, 1), 0) (m0, a, n);
    let (m0, x) = buffer.read (1, 2, I32) (m0, o, 0_2);
    return (m0, x);
"""


def test_run_on_the_interpreter_does_not_need_the_backend_to_compile(tmp_path: Path) -> None:
    # The epilogue divides, so the btensor lowering leaves the operation on the host (a
    # warning) and buffer.lower_ptr cannot compile it (E-UNSUPPORTED, `check` exits 1). The
    # interpreter runs it: `run` stops before the backend's lowering. (-7 + 2 + 1) / 3 = -1.
    src = tmp_path / "host_btensor.mim"
    src.write_text(HOST_BTENSOR, encoding="utf-8")
    p = verimim("run", str(src), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["result"] == -1 and out["pipeline"]["backend"] == []
    checked = verimim("check", str(src), "--json")
    assert checked.returncode == 1
    (left,) = [d for d in json.loads(checked.stdout)["diagnostics"] if d["code"] == "E-UNSUPPORTED"]
    # where the program applies the operation (its line 16), not its axiom in btensor.mim
    assert (left["file"], left["line"], left["col"]) == (str(src), 16, 19), left


def test_a_generated_btensor_kernel_is_reported_at_the_map_reduce_it_lowers() -> None:
    path = PROGRAMS / "valid" / "btensor_row_sums.mim"
    p = verimim("check", str(path), "--json")
    assert p.returncode == 0, p.stderr
    (kernel,) = json.loads(p.stdout)["kernels"]
    assert kernel["name"] == "btensor_kernel" and kernel["launch"] == {"line": 19, "col": 19}


def test_a_stream_pair_of_a_program_without_launches_is_a_verdict() -> None:
    """Undecided, an `unknown` (or, cut, `bounded`) verdict from its note; a race found (an
    E-RACE error), a `refuted` one — but only without launches, whose entries carry it."""
    from verimim.diagnostics import Diagnostic

    note = Diagnostic("E-RACE", verdicts.stream_note("unknown", "not proved", "puts may read what the copy writes"),
                      Loc("p.mim", 20, 5), "note")
    cut = Diagnostic("E-RACE", verdicts.stream_note("bounded", "proved up to there only", "host loops cut"),
                     None, "note")
    other = Diagnostic("E-RACE", "a host load conflicts with a copy", Loc("p.mim", 9, 1), "error")
    divergent = Diagnostic("E-DIVERGENCE", "a barrier not every work-item reaches", Loc("p.mim", 4, 1), "error")
    found = verdicts.from_stream_diagnostics([note, cut, other, divergent], launches=False)
    assert [(v.subject, v.status, v.detail, v.loc) for v in found] == [
        ("races between streams", "unknown", "puts may read what the copy writes", Loc("p.mim", 20, 5)),
        ("races between streams", "bounded", "host loops cut", None),
        ("races between streams", "refuted", "a host load conflicts with a copy", Loc("p.mim", 9, 1))]
    assert [d.code for d in verdicts.strict_diagnostics("p.mim", found)] == ["E-UNPROVED", "E-UNPROVED"]
    assert [v.status for v in verdicts.from_stream_diagnostics([note, other], launches=True)] == ["unknown"]
