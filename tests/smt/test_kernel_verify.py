"""`verimim check`'s kernel verification (smt/kernel_*.py): verdicts, counterexamples,
reproducers, agreement with `run` on the shared corpus, and the honest statuses."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import z3

from tests.smt import kernel_programs as kp
from verimim import driver
from verimim.smt.kernel_verify import verify_kernels
from verimim.smt.solver import SpecContext

SHARED = Path("/work/shared")
if not SHARED.exists():
    SHARED = Path(__file__).resolve().parents[3] / "shared"
KERNELS, EXAMPLES = SHARED / "kernels", SHARED / "examples"
needs_shared = pytest.mark.skipif(not KERNELS.exists(), reason="the shared kernel corpus is not here")


def verify(path: str, **kw: object) -> tuple[list[dict], list]:
    rep = verify_kernels(kp.device_program(path), SpecContext(timeout_ms=10_000), path, **kw)  # type: ignore[arg-type]
    return rep.entries, rep.diagnostics


def codes(diags: list) -> set[str]:
    return {d.code for d in diags}


# ------------------------------------------------------------------ the verdicts


def test_race_free_kernel_is_proved(tmp_path: Path) -> None:
    entries, diags = verify(kp.write(tmp_path, "own", kp.program(kp.OWN_CELL)))
    assert [(e["races"], e["divergence"]) for e in entries] == [("proved", "proved")]
    assert diags == []


def test_barrier_separates_shared_accesses(tmp_path: Path) -> None:
    entries, diags = verify(kp.write(tmp_path, "ex", kp.program(kp.SHARED_EXCHANGE)))
    assert entries[0]["races"] == "proved" and not diags


def test_without_the_barrier_it_races(tmp_path: Path) -> None:
    body = kp.SHARED_EXCHANGE.replace("    let (m1, m3) = gpu.sync_work_items (m1, m3);\n", "")
    entries, diags = verify(kp.write(tmp_path, "nobar", kp.program(body)))
    assert entries[0]["races"] == "refuted"
    race = next(d for d in diags if d.code == "E-RACE")
    cex = entries[0]["counterexample"]
    g = [w["group"] for w in cex["work_items"]]
    assert g[0] == g[1], "a shared-memory race is within one group"
    assert {a["kind"] for a in cex["accesses"]} == {"read", "write"}
    assert cex["address"]["space"] == "shared"
    assert race.loc is not None and race.loc.line and race.related and race.related[0].loc is not None


def test_cross_group_race_on_global_memory(tmp_path: Path) -> None:
    entries, diags = verify(kp.write(tmp_path, "cg", kp.program(kp.CROSS_GROUP)))
    cex = entries[0]["counterexample"]
    assert entries[0]["races"] == "refuted"
    a, b = cex["work_items"]
    assert a["group"] != b["group"] and a["item"] == b["item"]
    # two groups are never "in the same barrier interval": no barrier orders them at all
    race = next(d for d in diags if d.code == "E-RACE")
    assert "barrier interval" not in race.message
    assert race.message.endswith("(no barrier orders the work-items of different groups)")
    _, diags = verify(kp.write(tmp_path, "nobar", kp.program(
        kp.SHARED_EXCHANGE.replace("    let (m1, m3) = gpu.sync_work_items (m1, m3);\n", ""))))
    assert next(d for d in diags if d.code == "E-RACE").message.endswith("in the same barrier interval")


def test_benign_write_write_race_is_a_warning(tmp_path: Path) -> None:
    body = """    let m1 = mem.store (m1, mem.lea (out, 3_16), 7I32);
    return (m1, m3, m4, m5);"""
    entries, diags = verify(kp.write(tmp_path, "benign", kp.program(body)))
    assert entries[0]["races"] == "proved"
    assert [(d.code, d.severity) for d in diags] == [("W-BENIGN-RACE", "warning")]


def test_same_cell_different_values_is_an_error(tmp_path: Path) -> None:
    body = """    let m1 = mem.store (m1, mem.lea (out, 3_16), core.bitcast I32 item_id);
    return (m1, m3, m4, m5);"""
    entries, diags = verify(kp.write(tmp_path, "ww", kp.program(body)))
    assert entries[0]["races"] == "refuted" and "E-RACE" in codes(diags)


def test_divergence_on_loaded_value_is_confirmed_by_a_run(tmp_path: Path) -> None:
    entries, diags = verify(kp.write(tmp_path, "dd", kp.program(kp.DATA_DEPENDENT_BARRIER)))
    assert entries[0]["divergence"] == "refuted" and "E-BARRIER-DIVERGENCE" in codes(diags)
    # It depends on memory contents (main stores 0..15: work-item 1 loads 1 and waits alone),
    # which Z3 leaves free: a run shows it, and the run's fault is the counterexample.
    cex = entries[0]["counterexample"]
    assert cex["run"] is not None and cex["shown_by_run"]["code"] == "E-BARRIER-DIVERGENCE"
    assert "a run with argc = 1 shows" in entries[0]["detail"]


# Work-item t loads x = out[t] (main stores t there) and writes out[8 + (x & M)].
INDIRECT = """    let t = {T};
    let (m1, x) = mem.load (m1, mem.lea (out, core.bitcast (Idx 16) t));
    let j = core.bitcast Nat (core.bit2.and_ 0 (x, MI32));
    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) (core.nat.add (j, 8))), x);
    return (m1, m3, m4, m5);"""


def test_a_race_only_for_memory_contents_the_program_never_has_is_unknown(tmp_path: Path) -> None:
    # x & 7 = t: eight distinct cells. Z3, free to pick the loaded values, finds equal ones;
    # no run shows a race, so the verdict is not `refuted` (a false E-RACE) but `unknown`.
    entries, diags = verify(kp.write(tmp_path, "ind", kp.program(INDIRECT.replace("MI32", "7I32"))))
    assert entries[0]["races"] == "unknown" and entries[0]["counterexample"] is None
    assert "E-RACE" not in codes(diags)
    assert "no run shows it" in entries[0]["detail"]


def test_a_race_on_loaded_contents_that_a_run_shows_is_refuted(tmp_path: Path) -> None:
    # x & 3: work-items t and t + 4 write one cell with different values.
    path = kp.write(tmp_path, "ind3", kp.program(INDIRECT.replace("MI32", "3I32")))
    entries, diags = verify(path)
    assert entries[0]["races"] == "refuted" and "E-RACE" in codes(diags)
    race = next(d for d in diags if d.code == "E-RACE")
    assert race.message.startswith("in kernel `kernel`, a run with argc = 1 shows:")
    assert race.loc is not None and race.loc.line == 11  # the store
    assert entries[0]["counterexample"]["run"] == f"verimim run {path} --schedule 0"
    assert "E-RACE" in {d.code for d in driver.run(path, [], []).diagnostics}


def test_loop_race_in_the_last_iteration(tmp_path: Path) -> None:
    path = kp.write(tmp_path, "last", kp.program(kp.LAST_ITERATION_RACE))
    entries, _ = verify(path)
    assert entries[0]["races"] == "refuted"
    # With an unrolling bound below the trip count the paths do not reach the race: the proof
    # says `bounded`, never `proved`; a run of the program shows the race past the bound, and
    # that makes it an error, with the run.
    entries, diags = verify(path, loop_bound=3)
    assert entries[0]["races"] == "refuted" and "past where the proof's paths were cut" in entries[0]["detail"]
    assert entries[0]["counterexample"]["shown_by_run"]["code"] == "E-RACE" and "E-RACE" in codes(diags)


def test_bounded_when_no_run_shows_a_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a run that shows it (as for a race only some other input has), the verdict is
    # `bounded` with its bound, and no error.
    import verimim.smt.kernel_verify as kv

    monkeypatch.setattr(kv, "confirming_run", lambda *a, **k: None)
    path = kp.write(tmp_path, "last", kp.program(kp.LAST_ITERATION_RACE))
    entries, diags = verify(path, loop_bound=3)
    assert entries[0]["races"] == "bounded"
    assert "unrolled up to 3" in entries[0]["detail"] and "E-RACE" not in codes(diags)


def test_kernel_argument_from_main(tmp_path: Path) -> None:
    path = kp.write(tmp_path, "arg", kp.arg_program(kp.GUARDED_BY_ARG))
    entries, diags = verify(path)
    e = entries[0]
    assert e["races"] == "refuted"
    cex = e["counterexample"]
    argc = cex["main_inputs"]["argc"]
    assert 1 <= argc < 9 and cex["kernel_args"]["n"] == argc - 1
    assert cex["run"] is not None
    # Race-free inputs exist (argc ≥ 9): the run with them is clean, the counterexample's is not.
    clean = driver.run(path, [], ["a"] * 9)
    assert clean.ok, [d.code for d in clean.diagnostics]


def test_unmodelled_operation_is_unknown_and_named(tmp_path: Path) -> None:
    body = """    let (m1, p) = mem.alloc (I32, 1) m1;
    let m1 = mem.store (m1, p, 1I32);
    let m1 = mem.free (m1, p);
    return (m1, m3, m4, m5);"""
    entries, diags = verify(kp.write(tmp_path, "alloc", kp.program(body)))
    assert entries[0]["races"] == "unknown" and entries[0]["divergence"] == "unknown"
    assert "mem." in entries[0]["detail"] and not diags


def test_solver_time_out_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kp.write(tmp_path, "own", kp.program(kp.OWN_CELL))
    monkeypatch.setattr(SpecContext, "check", lambda self, s, label: z3.unknown)
    entries, diags = verify(path)
    # One path without barriers: divergence needs no query; the race query gets no answer, and
    # no run shows a race (there is none).
    assert (entries[0]["races"], entries[0]["divergence"]) == ("unknown", "proved")
    assert "no answer" in entries[0]["detail"] and not [d for d in diags if d.severity == "error"]
    # Where a run shows one, an undecided race is an error all the same.
    path = kp.write(tmp_path, "nobar", kp.program(kp.READ_NEIGHBOUR))
    entries, diags = verify(path)
    assert entries[0]["races"] == "refuted" and "where the proof was not decided" in entries[0]["detail"]
    assert "E-RACE" in codes(diags)


# ------------------------------------------------------------------ check's JSON and exit code


def test_check_json_has_kernels(tmp_path: Path) -> None:
    text = kp.program(kp.READ_NEIGHBOUR)
    path = kp.write(tmp_path, "nb", text)
    launch_line = next(n for n, line in enumerate(text.splitlines(), 1) if "gpu.launch" in line)
    rep = driver.check(path, [])
    obj = rep.to_json()
    assert rep.exit_code == 1
    (k,) = obj["kernels"]
    assert set(k) == {"name", "launch", "races", "divergence", "time_s", "detail", "counterexample"}
    assert k["name"] == "kernel" and k["launch"]["line"] == launch_line and k["races"] == "refuted"
    assert any(d["code"] == "E-RACE" and d["related"] for d in obj["diagnostics"])
    json.dumps(obj)


def test_emit_smt2_writes_kernel_queries(tmp_path: Path) -> None:
    out = tmp_path / "smt"
    for name, body in (("own", kp.OWN_CELL), ("dd", kp.DATA_DEPENDENT_BARRIER)):
        driver.check(kp.write(tmp_path, name, kp.program(body)), [], emit_smt2=str(out))
    names = [p.name for p in out.iterdir()]
    assert any("races" in n for n in names) and any("divergence" in n for n in names)


# ------------------------------------------------------------------ the shared corpus


def _rows(directory: Path) -> list[list[str]]:
    with open(directory / "EXPECTED.tsv", encoding="utf-8") as f:
        return [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]


@needs_shared
@pytest.mark.parametrize("row", [r for r in _rows(KERNELS) if r[1] == "check"], ids=lambda r: r[0])
def test_corpus_check_verdicts(row: list[str]) -> None:
    path = str((KERNELS / row[0]).resolve())
    entries, diags = verify(path)
    errors = {d.code for d in diags if d.severity == "error"}
    if row[3] == "ok":
        assert not errors and all(e["races"] == e["divergence"] == "proved" for e in entries), entries
    else:
        assert row[3] in errors


def _corpus_files() -> list[Path]:
    files = sorted(KERNELS.glob("*.mim")) + [EXAMPLES / f for f in (
        "shared_race.mim", "divergent_barrier.mim", "shared_sync_kernel.mim", "row_sums.mim",
        "simple_kernel.mim", "dyn_smem_kernel.mim", "two_arg_kernel.mim")]
    return [f for f in files if f.exists()]


@needs_shared
@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_agreement_with_run(path: Path) -> None:
    """Whatever run reports (for several inputs and schedules), check refutes; proved kernels run
    clean; every counterexample's run command reproduces its code."""
    from verimim.fuzz.kernel_oracle import compare

    res = compare(str(path), [[], ["a"], ["a", "b", "c"]], schedules=2)
    assert res.ok, f"{res.kind}: {res.message}"


@needs_shared
def test_reproducer_commands_reproduce() -> None:
    """The corpus' refutations all depend only on main's inputs: each has a run command, and
    running it reports the refuted code."""
    from verimim.fuzz.kernel_oracle import reproduces

    seen = 0
    for name, code in (("strided_race.mim", "E-RACE"), ("branch_barrier_item_div.mim", "E-BARRIER-DIVERGENCE"),
                       ("streams_two_race.mim", "E-RACE")):
        path = str(KERNELS / name)
        entries, _ = verify(path)
        cmds = [e["counterexample"]["run"] for e in entries if e["counterexample"]]
        assert cmds and all(cmds)
        for cmd in cmds:
            assert cmd.startswith(f"verimim run {path}") and "--schedule" in cmd
            assert reproduces(path, cmd, code)
            seen += 1
    assert seen >= 3


def test_diverging_barriers_leave_group_races_undecided(tmp_path: Path) -> None:
    """With barriers that diverge, barrier intervals are undefined: no E-RACE is made up from
    misaligned intervals (the run stops at the divergence), races within a group are unknown."""
    body = """    let (m3, sh) = mem.slot (I32, 3) (m3, 0);
    (skip, wait)#(core.icmp.e (item_id, 0_4)) (m1, m3)
    where
        con wait (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            skip (m1, m3);
        con skip (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            let m3 = mem.store (m3, sh, core.bitcast I32 item_id);
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            let (m3, v) = mem.load (m3, sh);
            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) ({T})), v);
            return (m1, m3, m4, m5);
    end;"""
    entries, diags = verify(kp.write(tmp_path, "div", kp.program(body)))
    assert entries[0]["divergence"] == "refuted" and entries[0]["races"] == "unknown"
    assert codes(diags) == {"E-BARRIER-DIVERGENCE"}
    assert "barriers diverge" in entries[0]["detail"]


def test_main_as_a_continuation(tmp_path: Path) -> None:
    """`con main (m0, argc, argv, return)` takes its arguments flat: argc is still tied."""
    text = kp.arg_program(kp.GUARDED_BY_ARG).replace(
        "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)\n"
        "              : [mem.M 0, I32] =",
        "con extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»,\n"
        "                 return: Cn [mem.M 0, I32]) =")
    assert "con extern main" in text
    path = kp.write(tmp_path, "conmain", text)
    entries, _ = verify(path)
    cex = entries[0]["counterexample"]
    assert entries[0]["races"] == "refuted" and cex["kernel_args"]["n"] == cex["main_inputs"]["argc"] - 1
    from verimim.fuzz.kernel_oracle import reproduces

    assert cex["run"] is not None and reproduces(path, cex["run"], "E-RACE")


LAMBDA_BRANCH = """    let t = {T};
    (lm (m1: gpu.GlobalM): ⊥:* = finish (m1, 1I32), lm (m1: gpu.GlobalM): ⊥:* = finish (m1, 2I32))#(core.icmp.e (item_id, 0_4)) m1
    where
        con finish (m1: gpu.GlobalM, v: I32) =
            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) (CELL)), v);
            return (m1, m3, m4, m5);
    end;"""


def test_branches_to_immutable_lambdas(tmp_path: Path) -> None:
    """Jumps to `lm` lambdas (what compile.cleanup / lam_spec leave) are followed, not unknown."""
    own, _ = verify(kp.write(tmp_path, "lam_own", kp.program(LAMBDA_BRANCH.replace("CELL", "t"))))
    common, diags = verify(kp.write(tmp_path, "lam_common", kp.program(LAMBDA_BRANCH.replace("CELL", "0"))))
    assert (own[0]["races"], own[0]["divergence"]) == ("proved", "proved"), own[0]["detail"]
    assert common[0]["races"] == "refuted" and "E-RACE" in codes(diags)


def test_curried_continuations_and_c_calls_are_modelled() -> None:
    # A curried join `con join (c: I32) (m1, …)` jumped to as `join c (…)` from both sides of a
    # branch, with the barriers in it, and a host that prints with `println_i32` (a C function
    # that touches no memory): both modelled, both verdicts proved (they were `unknown`).
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "programs" / "fuzz_found" / "curried_join_barrier.mim"
    out = subprocess.run([sys.executable, "-m", "verimim.cli", "check", str(path), "--json"],
                         capture_output=True, text=True, timeout=300)
    data = json.loads(out.stdout)
    assert [(k["races"], k["divergence"]) for k in data["kernels"]] == [("proved", "proved")], data["kernels"]


VALID = Path(__file__).resolve().parents[1] / "programs" / "valid"
LAUNCHING = sorted(p for p in VALID.glob("*.mim")
                   if "gpu.launch" in (t := p.read_text(encoding="utf-8")) or "btensor." in t)


@pytest.mark.parametrize("path", LAUNCHING, ids=[p.stem for p in LAUNCHING])
def test_every_corpus_kernel_is_proved(path: Path) -> None:
    # The corpus's valid programs are race-free and uniform by construction (each runs with its
    # EXPECT): every kernel they launch must be proved, not `unknown`. btensor's kernels were
    # `unknown` here: the lowered reducer receives `⊥:(mem.M 0)` as its (unused) memory.
    # A program whose freedom from races rests on what the model does not track says so with
    # `// KERNEL-RACES: unknown` (never refuted: that would be a false E-RACE).
    text = path.read_text(encoding="utf-8")
    # (`// KERNEL-RACES: bounded`: paths cut where the model stops, recursion that returns; the
    # divergence verdict of such a file may say the same as its races.)
    stated = re.search(r"^// KERNEL-RACES: (\w+)", text, re.M)
    races = stated.group(1) if stated else "proved"
    entries, diags = verify(str(path))
    assert entries, "no kernel found"
    assert all(e["races"] == races and e["divergence"] in {"proved", races} for e in entries), \
        [(e["races"], e["divergence"], e["detail"]) for e in entries]
    assert not [d for d in diags if d.severity == "error"]


C_PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
TAIL_COPY = """plugin core;
plugin mem;
plugin gpu;

ccon puts [[mem.M 0, mem.Ptr («⊤:Nat; I8», 0)], Cn [mem.M 0, I32]];

con fill (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
          group_id: Idx 1, item_id: Idx 4, (), d: gpu.GlobalPtr «4; I32»,
          return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let m1 = mem.store (m1, mem.lea (d, item_id), core.wrap.add 0 (core.bitcast I32 item_id, 1I32));
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = mem.alloc («4; I32», 1) m1;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹4; 0I32›);
    let (m0, s) = mem.alloc (gpu.Stream, 0) m0;
    let (m0, m1) = gpu.stream_init (m0, m1, s);
    let (m0, st) = mem.load (m0, s);
    ret (m0, m1, m4) = gpu.launch (1, 4, st, ff, ()) fill d $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.asyn (m0, m1, mem.lea (d, 3_4), mem.lea (h, 3_4), st);
    ret (m0, n) = puts $ ((m0, core.bitcast @(mem.Ptr ({AT}, 0)) (mem.Ptr («⊤:Nat; I8», 0)) {AT}));
    let (m0, m1) = gpu.stream_sync (m0, m1, st);
    let (m0, m1) = gpu.stream_deinit (m0, m1, st);
    let m0 = mem.free (m0, s);
    let m0 = mem.free (m0, h);
    let m1 = mem.free (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, n);
"""


def test_a_c_read_of_the_first_byte_a_pending_copy_writes_is_a_race() -> None:
    # puts reads h while copy_to_host.asyn into h is pending: whatever h holds, puts reads its
    # first byte, which the copy writes: E-RACE, as `run` reports it (the launch's own races
    # stay proved: the conflict is the host's with a copy).
    path = C_PROGRAMS / "runtime_errors" / "race_c_read_pending_copy.mim"
    entries, diags = verify(str(path))
    assert [d.code for d in diags] == ["E-RACE"]
    assert diags[0].message.startswith("the call of the C function `puts` conflicts with `gpu.copy_to_host.asyn`")
    assert driver.run(str(path), [], []).diagnostics[0].code == "E-RACE"


def test_a_c_read_that_may_reach_what_a_pending_copy_writes_is_unknown(tmp_path: Path) -> None:
    # The copy writes h[3] only; puts(h) stops at h's first NUL (byte 0 here: no race in
    # `run`), but how far a string function reads is not known statically: unknown, never
    # proved, the call named. puts(h + 3) reads the copied bytes from the first on: refuted.
    path = kp.write(tmp_path, "tail.mim", TAIL_COPY.replace("({AT}, 0)", "(«4; I32», 0)").replace("{AT}", "h"))
    assert driver.run(path, [], []).ok
    entries, diags = verify(path)
    assert [e["races"] for e in entries] == ["unknown"], [e["detail"] for e in entries]
    assert "the call of the C function `puts`" in entries[0]["detail"] and "E-RACE" not in codes(diags)
    path = kp.write(tmp_path, "tail3.mim", TAIL_COPY.replace("({AT}, 0)", "(I32, 0)").replace("{AT}", "(mem.lea (h, 3_4))"))
    assert "E-RACE" in {d.code for d in driver.run(path, [], []).diagnostics}
    entries, diags = verify(path)
    assert [d.code for d in diags] == ["E-RACE"] and [e["races"] for e in entries] == ["proved"]


def test_a_c_read_that_conflicts_before_it_faults_is_a_race(tmp_path: Path) -> None:
    # Every byte the copy writes is 0x01: puts(h + 3) reads h[3]'s four bytes and runs past the
    # block's end (E-OOB), but its first byte conflicts with the pending copy before that: `run`
    # reports the race, which came first, and `check` refutes it.
    text = TAIL_COPY.replace("core.wrap.add 0 (core.bitcast I32 item_id, 1I32)", "16843009I32")
    path = kp.write(tmp_path, "nonul.mim", text.replace("({AT}, 0)", "(I32, 0)").replace("{AT}", "(mem.lea (h, 3_4))"))
    assert [d.code for d in driver.run(path, [], []).diagnostics] == ["E-RACE"]
    _, diags = verify(path)
    assert [d.code for d in diags] == ["E-RACE"]


def test_a_c_read_of_argv_is_not_a_pending_copy_s_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # atoi(argv[0]) while the copy into h is pending: argv's strings are not the program's
    # objects, so no conflict is possible: proved (it was `unknown`: a pointer loaded from argv
    # was any pointer).
    text = TAIL_COPY.replace("ccon puts [[mem.M 0, mem.Ptr («⊤:Nat; I8», 0)], Cn [mem.M 0, I32]];",
                             "ccon atoi [[mem.M 0, mem.Ptr («⊤:Nat; I8», 0)], Cn [mem.M 0, I32]];")
    call = "    ret (m0, n) = puts $ ((m0, core.bitcast @(mem.Ptr ({AT}, 0)) (mem.Ptr («⊤:Nat; I8», 0)) {AT}));"
    assert call in text
    text = text.replace(call, "    let (m0, name) = mem.load (m0, mem.lea (argv, 0_16));\n"
                              "    ret (m0, n) = atoi $ ((m0, name));")
    path = kp.write(tmp_path, "argv.mim", text)
    assert driver.run(path, [], []).ok
    entries, diags = verify(path)
    assert [e["races"] for e in entries] == ["proved"] and not diags, [e["detail"] for e in entries]
    # A pointer of unknown provenance (here: argv's cells made unknown) may point anywhere: a
    # conflict through it is possible, not certain — unknown, never a (false) E-RACE.
    from verimim.smt import kernel_streams
    monkeypatch.setattr(kernel_streams, "_argv_cell", lambda ev, t, hint: None)
    entries, diags = verify(path)
    assert [e["races"] for e in entries] == ["unknown"] and not diags, [e["detail"] for e in entries]
    assert "which object it reaches" in entries[0]["detail"]


@needs_shared
def test_divergence_points_at_the_return_the_other_item_takes() -> None:
    # The related location is the `return` the work-item that misses the barrier takes — not
    # null, not the barrier again.
    _, diags = verify(str(EXAMPLES / "divergent_barrier.mim"))
    d = next(d for d in diags if d.code == "E-BARRIER-DIVERGENCE")
    other = d.related[0]
    assert "returns here" in other.message and other.loc is not None and other.loc != d.loc
    line = (EXAMPLES / "divergent_barrier.mim").read_text(encoding="utf-8").splitlines()[other.loc.line - 1]
    assert line[other.loc.col - 1:].startswith("return"), line


def test_divergence_points_at_the_barrier_where_the_sequences_part() -> None:
    # all work-items pass the first barrier; item 0 alone reaches a second: that one is the place
    # (the first barrier was reported, "item 3 waits here" with it, where item 3 waits nowhere)
    path = Path(__file__).parents[1] / "programs" / "runtime_errors" / "divergence_after_a_common_barrier.mim"
    _, diags = verify(str(path))
    d = next(d for d in diags if d.code == "E-BARRIER-DIVERGENCE")
    assert d.loc is not None and (d.loc.line, d.loc.col) == (19, 28), d
    assert "returns here" in d.related[0].message, d.related


SAME_ADDRESS_BRANCH = """    let (m1, x) = mem.load (m1, mem.lea (out, 0_16));
    (skip, wait)#(core.icmp.e (x, 1I32)) (m1, m3)
    where
        con wait (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            skip (m1, m3);
        con skip (m1: gpu.GlobalM, m3: gpu.SharedM) = {END}
    end;"""


def test_a_value_loaded_from_memory_the_launch_never_writes_is_the_same_for_every_item(tmp_path: Path) -> None:
    # every work-item loads out[0], which no work-item writes: the branch is uniform
    body = SAME_ADDRESS_BRANCH.replace("{END}", "return (m1, m3, m4, m5);")
    entries, diags = verify(kp.write(tmp_path, "ro", kp.program(body)))
    assert entries[0]["divergence"] == "proved", diags


def test_a_value_loaded_from_memory_the_launch_writes_is_not_tied(tmp_path: Path) -> None:
    # the same load, but the kernel writes the buffer: another item may have written out[0]
    body = SAME_ADDRESS_BRANCH.replace("{END}", """
            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) (core.bitcast Nat item_id)), 1I32);
            return (m1, m3, m4, m5);""")
    entries, diags = verify(kp.write(tmp_path, "rw", kp.program(body)))
    # Not proved: had the load been taken as every item's same value, it would be. Whether an
    # item sees the 1 depends on the schedule, and the race on out[0] (refuted over main's
    # inputs alone) stops every run first: no run shows the divergence, which stays unknown.
    assert entries[0]["divergence"] == "unknown" and "no run shows it" in entries[0]["detail"]
    assert entries[0]["races"] == "refuted" and codes(diags) == {"E-RACE"}


# ------------------------------------------------------------------ streams without a launch

COPIES_NO_KERNEL = """plugin core;
plugin mem;
plugin gpu;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹k: 4; core.bitcast I32 k›);
    let (m0, h2) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h2, ‹k: 4; 5I32›);
    let (m1, d) = mem.alloc («4; I32», 1) m1;
    ret (m0, m1) = gpu.with_streams (2, scope)
    where
        fun scope (m0: mem.M 0, m1: gpu.GlobalM, (s1 s2: gpu.Stream)) : [mem.M 0, gpu.GlobalM] =
            let (m0, m1) = gpu.copy_to_device.asyn (m0, m1, h, d, s1);
            {SYNC}let (m0, m1) = gpu.copy_to_device.asyn (m0, m1, h2, d, s2);
            let (m0, m1) = gpu.stream_sync (m0, m1, s1);
            let (m0, m1) = gpu.stream_sync (m0, m1, s2);
            return (m0, m1);
    end
    $ (m0, m1);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let (m0, v) = mem.load (m0, mem.lea (h, core.bitcast (Idx 4) argc));
    let m1 = mem.free (m1, d);
    let m0 = mem.free (m0, h);
    let m0 = mem.free (m0, h2);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""


@pytest.mark.parametrize("sync, race", [("", True), ("let (m0, m1) = gpu.stream_sync (m0, m1, s1);\n            ", False)])
def test_copies_on_two_streams_race_without_any_kernel(tmp_path: Path, sync: str, race: bool) -> None:
    # Two copy_to_device.asyn into d on two streams: E-RACE in `run`; `check` found nothing,
    # because it checked the streams only of programs that launch a kernel. The twin syncs s1
    # first: race-free, 5.
    path = kp.write(tmp_path, "copies.mim", COPIES_NO_KERNEL.replace("{SYNC}", sync))
    ran = driver.run(path, [], [])
    checked = driver.check(path, [])
    assert checked.data["kernels"] == []
    if race:
        assert [d.code for d in ran.diagnostics] == ["E-RACE"]
        assert [(d.code, d.severity) for d in checked.diagnostics] == [("E-RACE", "error")]
        assert "`gpu.copy_to_device.asyn` conflicts with `gpu.copy_to_device.asyn`" in checked.diagnostics[0].message
    else:
        assert ran.ok and ran.data["result"] == 5
        assert checked.ok and checked.diagnostics == []


@pytest.mark.parametrize("name, at", [("race_host_read_pending_no_kernel.mim", (22, 19)),
                                      ("race_host_store_pending_copy_source_no_kernel.mim", (22, 14))])
def test_the_corpus_stream_races_without_a_kernel_are_found_by_check(name: str, at: tuple[int, int]) -> None:
    got = driver.check(str(C_PROGRAMS / "runtime_errors" / name), [])
    assert [(d.code, d.loc.line, d.loc.col) for d in got.diagnostics] == [("E-RACE", *at)]


def test_the_race_free_twin_without_a_kernel_is_ok() -> None:
    got = driver.check(str(C_PROGRAMS / "valid" / "async_copy_no_kernel_synced.mim"), [])
    assert got.ok and got.diagnostics == []


@pytest.mark.parametrize("name", ["generic_helper_alloc_with_streams.mim", "generic_helper_malloc_with_streams.mim"])
def test_the_host_with_a_generic_helper_is_modelled_as_written_before_lam_spec(name: str) -> None:
    """`mem.alloc (T, 0)` in `fun box {T: *}`: the type argument is computed by box's activation
    (the type parameter's value and the space), which the host model's handlers read as an IR
    tuple, and `check` stopped with E-INTERNAL on the earliest World it models for streams;
    `core.trait.size T` (a malloc's size) is the layout of the type the activation holds."""
    from verimim.frontend.loader import load_text
    from verimim.smt.kernel_streams import host_run

    path = C_PROGRAMS / "valid" / name
    world, _ = load_text(path.read_text(), str(path))
    run = host_run(world, SpecContext(timeout_ms=10_000), 8)
    assert not isinstance(run, str), run
    # (argc ≥ 4 reads past `arr`: undefined, that path stops)
    assert run.uses_streams and sorted(p.status for p in run.paths) == ["done", "ub"]
    got = driver.check(str(path), [])
    assert got.ok and got.diagnostics == []


@pytest.mark.parametrize("name", ["with_streams_two.mim", "streams_with_c_strings.mim", "dependent_fun.mim"])
def test_every_world_of_a_function_generic_in_a_size_is_modelled_as_its_activation_gives_it(name: str) -> None:
    """`«n; gpu.Stream»` in `gpu.with_streams (2, f)`, `core.bitcast (Idx n) i` in a function
    taking n: before lam_spec makes n a literal, the host model reads the type with the value
    the activation gives n (as the interpreter does), so the streams are checked on the program
    as written, not on the first World after lam_spec (it said `‹n; gpu.Stream›` unsupported)."""
    from verimim.frontend.loader import load_text
    from verimim.phases.runner import run_pipeline
    from verimim.smt.kernel_streams import host_run

    path = C_PROGRAMS / "valid" / name
    world, _ = load_text(path.read_text(), str(path))
    run = run_pipeline(world, verify=False)
    statuses = []
    for p in [*run.earlier, run.program]:
        got = host_run(p.host, SpecContext(timeout_ms=10_000), 8)
        assert not isinstance(got, str), got
        statuses.append(sorted(q.status for q in got.paths))
    # the same paths in every World (with_streams_two reads ha[argc]: undefined from argc = 4)
    assert len(statuses) >= 3 and all(s == statuses[-1] for s in statuses) and "done" in statuses[0]


SIZE_FROM_ARGC = """plugin core;
plugin mem;

fun fill (n: Nat) (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, h) = mem.alloc («n; I32», 0) m0;
    let m0 = mem.store (m0, mem.lea (h, core.bitcast (Idx n) 1), 7I32);
    let (m0, x) = mem.load (m0, mem.lea (h, core.bitcast (Idx n) 1));
    let m0 = mem.free (m0, h);
    return (m0, x);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    ret (m0, x) = fill (core.nat.add (core.bitcast Nat argc, 1)) $ m0;
    return (m0, x);
"""


def test_a_type_whose_size_is_a_run_time_value_is_not_modelled_and_says_so(tmp_path: Path) -> None:
    """n = argc + 1: «n; I32» has no layout the model could give every path; host_run says
    why (the interpreter runs it: 7)."""
    from verimim.frontend.loader import load_text
    from verimim.smt.kernel_streams import host_run

    world, _ = load_text(SIZE_FROM_ARGC, "size_from_argc.mim")
    got = host_run(world, SpecContext(timeout_ms=10_000), 8)
    assert isinstance(got, str) and "depends on a value the model does not hold as one literal" in got
    path = tmp_path / "size_from_argc.mim"
    path.write_text(SIZE_FROM_ARGC)
    ran = driver.run(str(path), [], ["a"])
    assert ran.ok and ran.data["result"] == 7


def test_an_undecided_stream_pair_without_a_launch_is_a_note_never_ok_or_an_error(tmp_path: Path) -> None:
    # puts(r) while a copy into r's second half is pending, no kernel: how far puts reads is not
    # known statically, so check cannot decide; with no `kernels` entry to mark `unknown`, a
    # note says so (exit 0: not a race found). `run` finds none: r's first NUL comes first.
    text = COPIES_NO_KERNEL.split("fun extern main")[0].replace(
        "plugin gpu;\n", "plugin gpu;\n\nccon puts [[mem.M 0, mem.Ptr («⊤:Nat; I8», 0)], Cn [mem.M 0, I32]];\n") + """fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, sp) = mem.alloc (gpu.Stream, 0) m0;
    let (m0, m1) = gpu.stream_init (m0, m1, sp);
    let (m0, s) = mem.load (m0, sp);
    let (m0, h) = mem.alloc («2; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹k: 2; 66I32›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
    let (m0, r) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, r, ‹k: 4; 65I32›);
    let (m0, m1) = gpu.copy_to_host.asyn (m0, m1, d, core.bitcast (mem.Ptr («2; I32», 0)) (mem.lea (r, 2_4)), s);
    ret (m0, v) = puts $ (m0, core.bitcast (mem.Ptr («⊤:Nat; I8», 0)) r);
    let (m0, m1) = gpu.stream_sync (m0, m1, s);
    let (m0, m1) = gpu.stream_deinit (m0, m1, s);
    let m1 = gpu.free.block (m1, d);
    let m0 = mem.free (m0, h);
    let m0 = mem.free (m0, r);
    let m0 = mem.free (m0, sp);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""
    path = kp.write(tmp_path, "puts_tail.mim", text)
    assert driver.run(path, [], []).ok
    got = driver.check(path, [])
    assert got.ok
    assert [(d.code, d.severity) for d in got.diagnostics] == [("E-RACE", "note")]
    assert got.diagnostics[0].message.startswith("races between streams: unknown, not proved: the call of the C function `puts`")


def test_a_stream_race_whatever_argc_is_has_a_run_command() -> None:
    # Z3's first model said argc = 32, for which `check` gives no `verimim run` command; a race
    # that holds for a small argc too is reported with one, and the command shows it.
    path = C_PROGRAMS / "runtime_errors" / "race_streams_reader_target.mim"
    entries, diags = verify(str(path))
    assert "E-RACE" in codes(diags)
    for e in entries:
        assert e["races"] == "refuted"
        argc = e["counterexample"]["main_inputs"]["argc"]
        assert 1 <= argc <= 16 and e["counterexample"]["run"] is not None
    args = ["a"] * (entries[0]["counterexample"]["main_inputs"]["argc"] - 1)
    assert [d.code for d in driver.run(str(path), [], args).diagnostics] == ["E-RACE"]



RACE_ONLY_FOR_ARGC_300 = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), out: gpu.GlobalPtr «4; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let m1 = mem.store (m1, mem.lea (out, 0_4), core.bitcast I32 item_id);
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹4; 0I32›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
    (skip, go)#(core.icmp.e (argc, 300I32)) (m0, m1)
    where
        con go (m0: mem.M 0, m1: gpu.GlobalM) =
            ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
            skip (m0, m1);
        con skip (m0: mem.M 0, m1: gpu.GlobalM) =
            let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
            let (m0, v) = mem.load (m0, mem.lea (h, 0_4));
            let m1 = gpu.free.block (m1, d);
            let m0 = mem.free (m0, h);
            let m0 = gpu.deinit (m0, m1, m4);
            return (m0, v);
    end;
"""


def test_a_race_only_for_a_large_argc_has_a_run_command_the_shell_expands(tmp_path: Path) -> None:
    # The race needs argc = 300: too many arguments to write out, but a command all the same.
    path = kp.write(tmp_path, "argc_300", RACE_ONLY_FOR_ARGC_300)
    entries, diags = verify(path)
    assert "E-RACE" in codes(diags) and entries[0]["races"] == "refuted"
    cex = entries[0]["counterexample"]
    assert cex["main_inputs"]["argc"] == 300
    assert cex["run"] == f"verimim run {path} $(yes a | head -n 299) --schedule 0"
    counted = subprocess.run(["bash", "-c", "verimim() { echo $#; }; " + cex["run"]],
                             capture_output=True, text=True, check=True).stdout
    assert counted.split() == ["303"]  # run, the file, 299 arguments, --schedule 0
    assert [d.code for d in driver.run(path, [], ["a"] * 299).diagnostics] == ["E-RACE"]
    from verimim.smt.kernel_queries import MAX_ARGC_FOR_COMMAND, run_command

    # as many as the system takes (ARG_MAX: 2 MiB on Linux; 2^20 arguments did not fit)
    assert run_command(path, MAX_ARGC_FOR_COMMAND) is not None and run_command(path, MAX_ARGC_FOR_COMMAND + 1) is None
    many = subprocess.run(["bash", "-c", "/bin/true $(yes a | head -n " + str(MAX_ARGC_FOR_COMMAND - 1) + ")"],
                          capture_output=True, text=True)
    assert many.returncode == 0, many.stderr



# A host loop launches `scale` on ss#0, then on ss#1, with no sync between: one kernel entry for
# both launches. KERNEL is `scale`, INIT what the host stores first, LAUNCH the loop body's launch.
SELF_ON_TWO_STREAMS = """plugin core;
plugin mem;
plugin gpu;

KERNEL

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, INIT);
    let (m1, d) = gpu.alloc.block «4; I32» m1;
    let (m0, m1) = gpu.copy_to_device.block (m0, m1, h, d);
    ret (m0, m1) = gpu.with_streams (2, scope)
    where
        fun scope (m0: mem.M 0, m1: gpu.GlobalM, ss: «2; gpu.Stream») : [mem.M 0, gpu.GlobalM] =
            hloop (m0, m1, 0)
            where
                con hloop (m0: mem.M 0, m1: gpu.GlobalM, k: Nat) =
                    (hdone, hbody)#(core.ncmp.l (k, 2)) (m0, m1)
                    where
                        con hbody (m0: mem.M 0, m1: gpu.GlobalM) =
                            let kk = core.bit2.and_ 0 (core.bitcast I32 k, 1I32);
                            let s = ss#(core.bitcast (Idx 2) (core.bitcast Nat kk));
                            LAUNCH
                            hloop (m0, m1, core.nat.add (k, 1));
                    end;
                con hdone (m0: mem.M 0, m1: gpu.GlobalM) =
                    let (m0, m1) = gpu.stream_sync (m0, m1, ss#0_2);
                    let (m0, m1) = gpu.stream_sync (m0, m1, ss#1_2);
                    return (m0, m1);
            end;
    end
    $ (m0, m1);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let (m0, v) = mem.load (m0, mem.lea (h, core.bitcast (Idx 4) (core.bit2.and_ 0 (argc, 3I32))));
    let m1 = gpu.free.block (m1, d);
    let m0 = mem.free (m0, h);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""

# Every work-item scales its own cell: the two launches conflict (refuted).
SCALES = ("""con scale (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
           group_id: Idx 1, item_id: Idx 4, (), d: gpu.GlobalPtr «4; I32»,
           return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let (m1, x) = mem.load (m1, mem.lea (d, item_id));
    let m1 = mem.store (m1, mem.lea (d, item_id), core.wrap.mul 0 (x, 10I32));
    return (m1, m3, m4, m5);""", "‹4; 3I32›",
          "ret (m0, m1, m4) = gpu.launch (1, 4, s, ff, ()) scale d $ (m0, m1, m4);")
# The store's index is loaded from the buffer, which the model does not track (undecided).
STORES_WHERE_IT_READS = ("""con scale (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
           group_id: Idx 1, item_id: Idx 1, (), (d: gpu.GlobalPtr «4; I32», off: I32),
           return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let (m1, x) = mem.load (m1, mem.lea (d, core.bitcast (Idx 4) (core.bit2.and_ 0 (off, 3I32))));
    let m1 = mem.store (m1, mem.lea (d, core.bitcast (Idx 4) (core.bit2.and_ 0 (x, 3I32))), 7I32);
    return (m1, m3, m4, m5);""", "(0I32, 1I32, 2I32, 3I32)",
                         "ret (m0, m1, m4) = gpu.launch (1, 1, s, ff, ()) scale (d, kk) $ (m0, m1, m4);")


@pytest.mark.parametrize("variant, races, errors", [(SCALES, "refuted", ["E-RACE"]),
                                                    (STORES_WHERE_IT_READS, "unknown", [])],
                         ids=["refuted", "undecided"])
def test_a_kernel_conflicting_with_its_launch_on_another_stream_says_so_once(
        tmp_path: Path, variant: tuple[str, str, str], races: str, errors: list[str]) -> None:
    # The one entry's detail named the conflict twice, refuted or undecided.
    kernel, init, launch = variant
    text = SELF_ON_TWO_STREAMS.replace("KERNEL", kernel).replace("INIT", init).replace("LAUNCH", launch)
    path = kp.write(tmp_path, f"self_on_two_streams_{races}", text)
    entries, diags = verify(path)
    assert [d.code for d in diags if d.severity == "error"] == errors
    [entry] = entries
    assert entry["races"] == races
    assert entry["detail"].count("streams: the launch of `scale`") == 1, entry["detail"]


# Two manual streams; {STEPS} is what happens on s1 (and s2) before s2's sync.
TWO_STREAMS = """plugin core;
plugin mem;
plugin gpu;

con wr (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
          group_id: Idx 1, item_id: Idx 4, (), d: gpu.GlobalPtr «4; I32»,
          return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let m1 = mem.store (m1, mem.lea (d, item_id), core.wrap.add 0 (core.bitcast I32 item_id, 7I32));
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, sp) = mem.alloc («2; gpu.Stream», 0) m0;
    let (m0, m1) = gpu.stream_init (m0, m1, mem.lea (sp, 0_2));
    let (m0, m1) = gpu.stream_init (m0, m1, mem.lea (sp, 1_2));
    let (m0, s1) = mem.load (m0, mem.lea (sp, 0_2));
    let (m0, s2) = mem.load (m0, mem.lea (sp, 1_2));
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹k: 4; core.bitcast I32 k›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
{STEPS}    let (m0, m1) = gpu.stream_sync (m0, m1, s2);
    let (m0, v) = mem.load (m0, mem.lea (h, core.bitcast (Idx 4) argc));
    let (m0, m1) = gpu.stream_deinit (m0, m1, s2);
    let m0 = mem.free (m0, h);
    let m0 = mem.free (m0, sp);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""
LAUNCH_AFTER_DEINIT = TWO_STREAMS.replace("{STEPS}", """    let (m0, m1) = gpu.stream_deinit (m0, m1, s1);
    ret (m0, m1, m4) = gpu.launch (1, 4, s1, ff, ()) wr d $ (m0, m1, m4);
    let m1 = gpu.free.asyn (m1, d, s2);
""")
PENDING_AT_DEINIT = TWO_STREAMS.replace("{STEPS}", """    ret (m0, m1, m4) = gpu.launch (1, 4, s1, ff, ()) wr d $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.asyn (m0, m1, d, h, s1);
    let (m0, m1) = gpu.stream_deinit (m0, m1, s1);
    let (m0, y) = mem.load (m0, mem.lea (h, 0_4));
    let m1 = gpu.free.block (m1, d);
""")


@pytest.mark.parametrize("text, race", ids=["launch after deinit", "copy pending at deinit"],
                         argvalues=[(LAUNCH_AFTER_DEINIT, False), (PENDING_AT_DEINIT, True)])
def test_an_ended_stream_s_work_is_still_pending_and_nothing_runs_on_it(tmp_path: Path, text: str, race: bool) -> None:
    # Launch after stream_deinit(s1): `run` stops at E-STREAM; `check` reported an E-RACE
    # between that launch and the free.asyn on s2 after it, work that never happens. The host
    # model now ends a path at an operation on an ended stream, and `check` reports it as `run`
    # does. The twin: a copy issued on s1 before its stream_deinit is still pending (deinit does
    # not sync), and the host reads its target: E-RACE in both.
    path = kp.write(tmp_path, "deinit.mim", text)
    ran = {d.code for d in driver.run(path, [], []).diagnostics if d.severity == "error"}
    got = {d.code for d in driver.check(path, []).diagnostics if d.severity == "error"}
    assert ran == got == ({"E-RACE"} if race else {"E-STREAM"})


FREE_PENDING = """plugin core;
plugin mem;
plugin gpu;

ccon free [[mem.M 0, mem.Ptr («⊤:Nat; I8», 0)], Cn [mem.M 0]];

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹4; 7I32›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
    let (m0, s) = mem.alloc (gpu.Stream, 0) m0;
    let (m0, m1) = gpu.stream_init (m0, m1, s);
    let (m0, st) = mem.load (m0, s);
    let (m0, out) = mem.alloc («4; I32», 0) m0;
    let (m0, m1) = gpu.copy_to_host.asyn (m0, m1, d, out, st);
    {BEFORE}let (m0, m1) = gpu.stream_sync (m0, m1, st);
    {AFTER}let (m0, m1) = gpu.stream_deinit (m0, m1, st);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    let m0 = mem.free (m0, s);
    let m0 = mem.free (m0, h);
    return (m0, 0I32);
"""
MEM_FREE = "let m0 = mem.free (m0, out);\n    "
C_FREE = "ret m0 = free $ (m0, core.bitcast (mem.Ptr («⊤:Nat; I8», 0)) out);\n    "


@pytest.mark.parametrize("release", [MEM_FREE, C_FREE], ids=["mem.free", "C free"])
def test_freeing_the_host_buffer_of_a_pending_copy_is_a_race(tmp_path: Path, release: str) -> None:
    # SEMANTICS.md: while an asynchronous copy is pending, a conflicting host access to its
    # host buffer is E-RACE; a free ends the buffer under the copy (a write of every byte).
    # `run` and `check` both said nothing: the free was not checked against pending work.
    racy = kp.write(tmp_path, "racy.mim", FREE_PENDING.replace("{BEFORE}", release).replace("{AFTER}", ""))
    report = driver.run(racy, [], [])
    assert [d.code for d in report.diagnostics if d.severity == "error"] == ["E-RACE"]
    assert "free" in report.diagnostics[0].message and "gpu.copy_to_host.asyn" in report.diagnostics[0].message
    _, diags = verify(racy)
    assert [d.code for d in diags if d.severity == "error"] == ["E-RACE"]
    # freed after the stream's sync: the copy is complete, nothing conflicts
    synced = kp.write(tmp_path, "synced.mim", FREE_PENDING.replace("{BEFORE}", "").replace("{AFTER}", release))
    assert driver.run(synced, [], []).ok
    _, diags = verify(synced)
    assert "E-RACE" not in codes(diags)


NO_SPLIT_RACE = kp.program(kp.SAME_CELL).replace(
    "plugin gpu;\n", "plugin gpu;\nimport compile;\n\nlam _compile (): compile.Phase = compile.null;\n", 1)


def test_a_pipeline_that_does_not_split_does_not_switch_the_race_checks_off(tmp_path: Path) -> None:
    # `_compile = compile.null`: nothing splits the program, and check verified no kernel (exit
    # 0 on a race that run reports). The kernels are verified on the program split for them.
    path = kp.write(tmp_path, "nosplit.mim", NO_SPLIT_RACE)
    report = driver.check(path, [])
    assert [e["races"] for e in report.data["kernels"]] == ["refuted"]
    assert "E-RACE" in {d.code for d in report.diagnostics} and not report.ok
    assert "E-RACE" in {d.code for d in driver.run(path, [], []).diagnostics}


@needs_shared
def test_a_stream_race_between_launches_names_both_launches() -> None:
    # One kernel statement runs on two streams: "a kernel access conflicts with a kernel access"
    # named neither launch (both accesses are the same statement).
    res = driver.run(str(KERNELS / "streams_two_race.mim"), [], [])
    (d,) = [d for d in res.diagnostics if d.code == "E-RACE"]
    assert d.message.count("the kernel launched at ") == 2, d.message


def test_check_places_a_launch_at_its_gpu_launch_expression_as_run_does() -> None:
    """`ret (…) = gpu.launch … $ (…);` makes an application to the continuation whose place is
    the statement's `ret`: check's stream race and each kernel entry's `launch` pointed there,
    while `run` ("the kernel launched at 28:32") and E-STREAM point at `gpu.launch`."""
    path = KERNELS / "streams_two_race.mim"
    lines = path.read_text().splitlines()
    col = {n: lines[n - 1].index("gpu.launch") + 1 for n in (27, 28)}
    got = driver.check(str(path), [])
    (d,) = [d for d in got.diagnostics if d.code == "E-RACE"]
    assert (d.loc.line, d.loc.col) == (28, col[28]) and [(r.loc.line, r.loc.col) for r in d.related] == [(27, col[27])]
    ran = driver.run(str(path), [], [])
    (f,) = [x for x in ran.diagnostics if x.code == "E-RACE"]
    assert f"launched at 28:{col[28]}" in f.message and f"launched at 27:{col[27]}" in f.message, f.message
    p = subprocess.run([sys.executable, "-m", "verimim.cli", "check", str(path), "--json"], capture_output=True, text=True)
    assert sorted((k["launch"]["line"], k["launch"]["col"]) for k in json.loads(p.stdout)["kernels"]) == \
        [(27, col[27]), (28, col[28])]


def test_a_kernel_the_model_cannot_explore_is_refuted_by_a_run_that_shows_the_fault() -> None:
    """A kernel argument of 65 bytes by value is not modelled (the program was found with
    `core.bit2.and_` on `Idx 6`, which smt.bv encodes now): both verdicts were `unknown` and
    check said ok, although every run races. An `unknown` is checked against the runs with
    argc = 1 and 2, as docs/kernels.md says."""
    race = Path(__file__).resolve().parents[1] / "programs" / "runtime_errors" / "race_in_a_kernel_the_model_cannot_explore.mim"
    entries, diags = verify(str(race))
    (entry,) = entries
    assert entry["races"] == "refuted" and entry["divergence"] == "unknown", entry
    assert "not modelled" in entry["detail"] and "a run with argc = 1 shows a race" in entry["detail"]
    assert entry["counterexample"]["shown_by_run"]["code"] == "E-RACE" and codes(diags) == {"E-RACE"}


def test_a_divergence_in_a_kernel_the_model_cannot_explore_is_shown_by_a_run(tmp_path: Path) -> None:
    text = "\n".join([
        "plugin core;", "plugin mem;", "plugin gpu;",
        "con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,",
        "            group_id: Idx 1, item_id: Idx 6, (), out: gpu.GlobalPtr «6; I32»,",
        "            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =",
        "    (done, sync)#(core.icmp.e (core.bit2.and_ 0 (item_id, 1_6), 1_6)) (m1, m3)",
        "    where",
        "        con sync (m1: gpu.GlobalM, m3: gpu.SharedM) =",
        "            let (m1, m3) = gpu.sync_work_items (m1, m3);",
        "            done (m1, m3);",
        "        con done (m1: gpu.GlobalM, m3: gpu.SharedM) =",
        "            return (mem.store (m1, mem.lea (out, item_id), 1I32), m3, m4, m5);",
        "    end;",
        "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =",
        "    let (m0, m1, m4) = gpu.init m0;",
        "    let (m1, d) = gpu.alloc.block «6; I32» m1;",
        "    ret (m0, m1, m4) = gpu.launch (1, 6, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);",
        "    let m1 = gpu.free.block (m1, d);",
        "    let m0 = gpu.deinit (m0, m1, m4);",
        "    return (m0, argc);", ""])
    path = tmp_path / "diverges.mim"
    path.write_text(text, encoding="utf-8")
    entries, diags = verify(str(path))
    assert entries[0]["divergence"] == "refuted" and "E-BARRIER-DIVERGENCE" in codes(diags), entries


def test_a_run_confirms_a_refutation_only_in_the_launch_it_faulted_in() -> None:
    """A kernel launched twice with factors the host stores and loads back, 1 and 0: the run's
    race is in the second launch; the first is not refuted by it (read off main's paths, the
    factors tie both launches: the first is proved; it was `unknown`)."""
    path = Path(__file__).resolve().parents[1] / "programs" / "runtime_errors" / \
        "race_in_the_second_launch_of_a_kernel.mim"
    rep = driver.check(str(path), [])
    first, second = rep.data["kernels"]
    assert (first["launch"]["line"], first["races"]) == (30, "proved"), first
    assert (second["launch"]["line"], second["races"]) == (31, "refuted"), second
    (race,) = [d for d in rep.diagnostics if d.code == "E-RACE"]
    assert [r.loc.line for r in race.related if r.message == "launched here" and r.loc] == [31], race.related


def test_a_fault_in_a_kernel_names_its_launch() -> None:
    path = Path(__file__).resolve().parents[1] / "programs" / "runtime_errors" / \
        "race_in_the_second_launch_of_a_kernel.mim"
    rep = driver.run(str(path), [], [])
    (race,) = [d for d in rep.diagnostics if d.code == "E-RACE"]
    assert [r.loc.line for r in race.related if r.message == "launched here" and r.loc] == [31], race.related


# A kernel that races unless its n is 4, which main launches only where argc = 4 with n = argc:
# no run races. main reads argv[argc - 1] through `core.idx_unsafe` first. The benign twin stores
# a value equal for every work-item.
GUARDED_LAUNCH = Path(__file__).resolve().parents[1] / "programs" / "valid" / "launch_only_where_it_cannot_race.mim"
GUARDED_STORE = "let m1 = mem.store (m1, cell, core.bitcast I32 item_id);"


def _guarded(tmp_path: Path, value: str) -> str:
    text = GUARDED_LAUNCH.read_text(encoding="utf-8")
    assert GUARDED_STORE in text
    return kp.write(tmp_path, "guarded", text.replace(GUARDED_STORE, f"let m1 = mem.store (m1, cell, {value});"))


@pytest.mark.parametrize("value", ["core.bitcast I32 item_id", "1I32"], ids=["harmful", "benign"])
def test_a_launch_main_issues_only_where_it_cannot_race_is_proved(tmp_path: Path, value: str) -> None:
    """The host model reads `core.idx_unsafe` (of a literal, or computed: argv[argc - 1]); it
    stopped there ("no bit-vector meaning"), and the race for argc ≠ 4 was reported: E-RACE,
    or W-BENIGN-RACE for equal values, on a program no run of which races."""
    entries, diags = verify(_guarded(tmp_path, value))
    assert entries[0]["races"] == "proved", entries
    assert not codes(diags) & {"E-RACE", "W-BENIGN-RACE"}, diags


@pytest.mark.parametrize("value", ["core.bitcast I32 item_id", "1I32"], ids=["harmful", "benign"])
def test_where_main_is_not_modelled_a_race_needs_a_run_to_be_reported(tmp_path: Path, value: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without main's model, when main issues a launch is not known: a race the kernel has for
    some argc alone may be in a launch main never issues with that argc. It stands only where a
    run shows it (none does here): `unknown`, never E-RACE or W-BENIGN-RACE."""
    import verimim.smt.kernel_verify as kv

    monkeypatch.setattr(kv, "host_run", lambda *a, **k: "not modelled (this test)")
    entries, diags = verify(_guarded(tmp_path, value))
    assert not codes(diags) & {"E-RACE", "W-BENIGN-RACE"}, diags
    assert "main may not issue the launch" in entries[0]["detail"], entries
    if value != "1I32":
        assert entries[0]["races"] == "unknown", entries


def test_a_race_between_accesses_of_different_sizes_names_a_byte_both_touch() -> None:
    # A halfword store at 2i and a word load at 4i: the conflict's byte is in both ranges (the
    # message named the start of the second access, which the first need not touch).
    path = Path(__file__).resolve().parents[1] / "programs" / "runtime_errors" / \
        "race_halfword_store_overlapping_a_word_load.mim"
    entries, diags = verify(str(path))
    cex = entries[0]["counterexample"]
    byte = cex["address"]["byte_offset"]
    for a in cex["accesses"]:
        assert a["byte_offset"] <= byte < a["byte_offset"] + a["size"], (byte, cex["accesses"])
    (race,) = [d for d in diags if d.code == "E-RACE"]
    assert f"byte {byte} of" in race.message


def test_a_kernel_of_no_work_items_has_no_path_and_is_proved() -> None:
    # `scribble` takes `i: Idx 0`: no work-item exists, and its branch on an argument is a
    # decision on a path whose condition has no model. Such a path is dropped (no execution
    # takes it): the kernel was `unknown` ("not modelled: SymbolicError: …").
    path = Path(__file__).resolve().parents[1] / "programs" / "valid" / "kernels_launched_with_no_work_items.mim"
    entries, diags = verify(str(path))
    assert [(e["races"], e["divergence"]) for e in entries] == [("proved", "proved")] * 3, entries
    assert "over 0 path(s) of `scribble`" in entries[0]["detail"]
    assert not diags


def test_bounded_verdict_beside_a_refutation_states_its_bound_and_summary_counts_both() -> None:
    # Races refuted in the first rounds of a 40-round loop; divergence only up to the 16 entries
    # unrolled: the detail says so, and the JSON summary counts the kernel's two verdicts.
    from verimim import driver

    path = C_PROGRAMS / "runtime_errors" / "race_in_a_loop_past_the_bound_beside_bounded_divergence.mim"
    obj = driver.check(str(path), []).to_json()
    (kernel,) = obj["kernels"]
    assert (kernel["races"], kernel["divergence"]) == ("refuted", "bounded")
    assert "unrolled up to 16 entries" in kernel["detail"]
    assert obj["summary"]["refuted"] == 1 and obj["summary"]["bounded"] == 1


def test_a_race_between_streams_without_a_launch_is_a_counted_refuted_verdict() -> None:
    # No launch, so no `kernels` entry to carry the race: the E-RACE error is the program's one
    # refuted verdict (the summary said 0 refuted on a run exiting 1 for it).
    from verimim import driver

    path = C_PROGRAMS / "runtime_errors" / "race_host_read_pending_no_kernel.mim"
    obj = driver.check(str(path), []).to_json()
    assert not obj["kernels"] and obj["summary"]["refuted"] == 1, obj["summary"]
    synced = driver.check(str(C_PROGRAMS / "valid" / "async_copy_no_kernel_synced.mim"), []).to_json()
    assert synced["ok"] and synced["summary"]["refuted"] == 0, synced["summary"]


@pytest.mark.parametrize("name", ["race_writing_the_same_leaves_in_two_layouts.mim",
                                  "race_after_a_local_store_that_partly_overwrites_another.mim"])
def test_races_behind_equal_leaves_or_a_partly_overwritten_local_are_found(name: str) -> None:
    # Two writes with equal leaves at different bytes (two layouts of one slot) were a benign
    # race; a local load after a same-size store 2 bytes off gave the earlier store's value (the
    # branch to the racing cell was never explored). Both `proved`; `run` shows E-RACE.
    entries, diags = verify(str(C_PROGRAMS / "runtime_errors" / name))
    assert [e["races"] for e in entries] == ["refuted"], entries
    assert "E-RACE" in {d.code for d in diags if d.severity == "error"}


def test_a_harmful_write_write_race_names_a_byte_the_two_writes_differ_on() -> None:
    # Both writes put 00 in byte 0; byte 5 is where they differ (2 against padding, 0), as `run` says.
    entries, diags = verify(str(C_PROGRAMS / "runtime_errors" / "race_writing_the_same_leaves_in_two_layouts.mim"))
    (race,) = [d for d in diags if d.code == "E-RACE"]
    assert "writes byte 5 of the slot" in race.message, race.message
    assert entries[0]["counterexample"]["address"]["byte_offset"] == 5


def test_a_streams_race_with_a_kernel_the_model_cannot_explore_is_run() -> None:
    # The kernel (512 paths) is `unknown`; the copy on another stream races with it for every
    # input: a run shows it at the copy, and check reports it there (it said nothing of the pair).
    entries, diags = verify(str(C_PROGRAMS / "runtime_errors" / "race_of_a_copy_with_a_kernel_the_model_cannot_explore.mim"))
    assert [e["races"] for e in entries] == ["refuted"], entries
    assert [d.code for d in diags if d.severity == "error"] == ["E-RACE"]


def test_a_benign_race_that_needs_an_input_names_it() -> None:
    # (from argc = 6 on: the warning named no input, and `run` with none shows no race)
    from verimim import driver

    path = C_PROGRAMS / "valid" / "benign_race_only_with_six_arguments_or_more.mim"
    entries, diags = verify(str(path))
    (benign,) = [d for d in diags if d.code == "W-BENIGN-RACE"]
    found = re.search(r"\(for example with argc = (\d+)\)$", benign.message)
    assert found and [e["races"] for e in entries] == ["proved"], benign.message
    argc = int(found.group(1))
    ran = driver.run(str(path), [], ["x"] * (argc - 1), target="interp")
    assert [d.code for d in ran.diagnostics] == ["W-BENIGN-RACE"], (argc, ran.diagnostics)
