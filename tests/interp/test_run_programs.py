"""The reference interpreter on the program corpus and the shared examples: results, warnings,
undefined behaviour with its code and location, and independence from the schedule."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, PROGRAMS, annotations, need_shared
from verimim import driver

VALID = sorted((PROGRAMS / "valid").glob("*.mim"))
RUNTIME = sorted((PROGRAMS / "runtime_errors").glob("*.mim"))


def run(path: Path, seed: int = 0) -> driver.Report:
    ann = annotations(path)
    args = ann.get("ARGS", "").split()
    fuel = int(ann["FUEL"]) if "FUEL" in ann else None
    return driver.run(str(path), [], args, fuel=fuel, seed=seed)


def codes(report: driver.Report, severity: str) -> list[str]:
    return [d.code for d in report.diagnostics if d.severity == severity]


def test_every_diagnostic_code_has_a_program() -> None:
    wanted = {"E-RACE", "W-BENIGN-RACE", "E-BARRIER-DIVERGENCE", "E-OOB", "E-UNINIT", "E-USE-AFTER-FREE",
              "E-DOUBLE-FREE", "E-BAD-FREE", "E-GPU-SESSION", "E-STREAM", "E-FUEL", "W-LEAK", "E-ADDR-SPACE"}
    seen: set[str] = set()
    for p in RUNTIME + VALID:
        ann = annotations(p)
        seen |= {ann[k] for k in ("EXPECT-ERROR", "EXPECT-WARNING") if k in ann}
    assert wanted <= seen, wanted - seen


# A program that is race-free has one result whatever order work-items run in; a racy one is
# reported under every order.
SCHEDULE_SEEDS = [0, 1, 2, 7, 1234]
KERNEL_PROGRAMS = [p for p in VALID if "gpu.launch" in p.read_text(encoding="utf-8")]
RACY = [p for p in RUNTIME if annotations(p).get("EXPECT-ERROR") == "E-RACE" and "race_async" not in p.name]


@pytest.mark.parametrize("path", KERNEL_PROGRAMS, ids=[p.name for p in KERNEL_PROGRAMS])
def test_race_free_result_does_not_depend_on_schedule(path: Path) -> None:
    results = {run(path, seed).data.get("result") for seed in SCHEDULE_SEEDS}
    assert results == {int(annotations(path)["EXPECT"])}


@pytest.mark.parametrize("path", RACY, ids=[p.name for p in RACY])
def test_race_found_under_every_schedule(path: Path) -> None:
    for seed in SCHEDULE_SEEDS:
        assert "E-RACE" in codes(run(path, seed), "error"), seed


def expected_rows() -> list[tuple[str, str, str, str]]:
    tsv = EXAMPLES / "EXPECTED.tsv"
    if not tsv.is_file():
        return []
    rows = []
    for line in tsv.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        parts = (line.split("\t") + ["", "", "", ""])[:4]
        if parts[1] == "run":
            rows.append((parts[0], parts[1], parts[2], parts[3]))
    return rows


@pytest.mark.parametrize("row", expected_rows() or [("none", "run", "", "")], ids=lambda r: f"{r[0]} {r[2]}".strip())
def test_shared_example_run_rows(row: tuple[str, str, str, str]) -> None:
    need_shared()
    file, _, args, expected = row
    report = driver.run(str(EXAMPLES / file), [], args.split())
    if expected.lstrip("-").isdigit():
        assert report.ok and report.data["result"] == int(expected), [d.render() for d in report.diagnostics]
    else:
        assert report.exit_code == 1 and expected in codes(report, "error"), [d.render() for d in report.diagnostics]


def test_fuel_bound_is_reported_not_hung(tmp_path: Path) -> None:
    prog = tmp_path / "spin.mim"
    prog.write_text("""plugin core;
plugin mem;
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =
    spin (m0, 0)
    where
        con spin (m0: mem.M 0, i: Nat) = spin (m0, core.nat.add (i, 1));
    end;
""", encoding="utf-8")
    report = driver.run(str(prog), [], [], fuel=5_000)
    assert codes(report, "error") == ["E-FUEL"]


def test_long_loop_runs_in_constant_stack(tmp_path: Path) -> None:
    """100,000 iterations of a recursive continuation: no Python recursion per iteration."""
    prog = tmp_path / "loop.mim"
    prog.write_text("""plugin core;
plugin mem;
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =
    loop (m0, 0, 0I32)
    where
        con loop (m0: mem.M 0, i: Nat, acc: I32) =
            (done, body)#(core.ncmp.l (i, 100000)) (m0, acc)
            where
                con body (m0: mem.M 0, acc: I32) = loop (m0, core.nat.add (i, 1), core.wrap.add 0 (acc, 1I32));
            end;
        con done (m0: mem.M 0, acc: I32) = return (m0, acc);
    end;
""", encoding="utf-8")
    report = driver.run(str(prog), [], [])
    assert report.ok and report.data["result"] == 100000, [d.render() for d in report.diagnostics]


def test_argv_strings_are_in_host_memory(tmp_path: Path) -> None:
    """argv[1][0] is the first byte of the first argument, as in C."""
    prog = tmp_path / "argv.mim"
    prog.write_text("""plugin core;
plugin mem;
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =
    let (m0, s) = mem.load (m0, mem.lea (argv, 1:(Idx ⊤:Nat)));
    let (m0, c) = mem.load (m0, mem.lea (s, 0:(Idx ⊤:Nat)));
    return (m0, core.conv.u 4294967296 c);
""", encoding="utf-8")
    report = driver.run(str(prog), [], ["A"])
    assert report.ok and report.data["result"] == ord("A"), [d.render() for d in report.diagnostics]


def test_a_divergence_points_at_the_return_the_other_work_item_takes() -> None:
    path = PROGRAMS / "runtime_errors" / "barrier_early_return.mim"
    d = next(d for d in run(path).diagnostics if d.code == "E-BARRIER-DIVERGENCE")
    assert d.loc is not None and d.related
    note = d.related[0]
    assert note.loc is not None and note.loc.line != d.loc.line
    line = path.read_text(encoding="utf-8").splitlines()[note.loc.line - 1]
    assert line[note.loc.col - 1:].startswith("return"), line


NAT_ROUND_TRIP = """plugin core;
plugin mem;
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    let big = core.nat.add (BIG, core.bitcast Nat argc);
    let (m0, p) = mem.slot (Nat, 0) (m0, 0);
    let m0 = mem.store (m0, p, big);
    let (m0, v) = mem.load (m0, p);
    return (m0, core.bitcast I32 (core.ncmp.e (v, big)));
"""


@pytest.mark.parametrize("big, fits", [(18446744073709551614, True), (18446744073709551616, False)])
def test_a_nat_too_big_for_its_8_bytes_is_not_cut_in_memory(tmp_path: Path, big: int, fits: bool) -> None:
    """A Nat is unbounded in the interpreter and 8 bytes in memory: 2^64 + 1 stored and loaded
    back came back as 1 (v = big was false), a value neither meaning gives; it is E-UNSUPPORTED
    at the store. 2^64 - 1 round-trips (core-op prober)."""
    path = tmp_path / "nat.mim"
    path.write_text(NAT_ROUND_TRIP.replace("BIG", str(big)), encoding="utf-8")
    report = driver.run(str(path), [], [])
    if fits:
        assert report.data["result"] == 1 and not codes(report, "error"), report.diagnostics
    else:
        [err] = [d for d in report.diagnostics if d.severity == "error"]
        assert err.code == "E-UNSUPPORTED" and "2^64 or more" in err.message and err.loc and err.loc.line == 6


SLOT_UNDER_PENDING_COPY = """plugin core;
plugin mem;
plugin gpu;

fun get (m0: mem.M 0, m1: gpu.GlobalM, d: gpu.GlobalPtr I32, s: gpu.Stream): [mem.M 0, gpu.GlobalM] =
    let (m0, k) = mem.slot (I32, 0) (m0, 0);
    let (m0, m1) = gpu.copy_to_host.asyn (m0, m1, d, k, s);
    return (m0, m1);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, sp) = mem.alloc (gpu.Stream, 0) m0;
    let (m0, m1) = gpu.stream_init (m0, m1, sp);
    let (m0, s) = mem.load (m0, sp);
    let (m0, h) = mem.alloc (I32, 0) m0;
    let m0 = mem.store (m0, h, argc);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
    ret (m0, m1) = get $ (m0, m1, d, s);
    let (m0, m1) = gpu.stream_sync (m0, m1, s);
    let (m0, m1) = gpu.stream_deinit (m0, m1, s);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    let (m0, v) = mem.load (m0, h);
    let m0 = mem.free (m0, h);
    let m0 = mem.free (m0, sp);
    return (m0, v);
"""


@pytest.mark.parametrize("synced", [False, True])
def test_a_slot_ends_under_a_pending_asyn_copy(tmp_path: Path, synced: bool) -> None:
    """`get` copies into a slot of its own with `copy_to_host.asyn` and returns without a sync:
    the slot ends (it lives until its function returns) while the copy that writes it is
    pending — as `mem.free` of a pending copy's target, E-RACE; it ran (probe). Synced before
    the return, it is fine. (`check` does not find it: beta_red inlines `get` into main, where
    the slot lives on; its host model reads the program after the pipeline.)"""
    text = SLOT_UNDER_PENDING_COPY
    if synced:
        text = text.replace("    return (m0, m1);\n", "    let (m0, m1) = gpu.stream_sync (m0, m1, s);\n    return (m0, m1);\n", 1)
    path = tmp_path / "p.mim"
    path.write_text(text, encoding="utf-8")
    report = driver.run(str(path), [], [])
    if synced:
        assert report.ok and report.data["result"] == 1, report.diagnostics
        return
    (d,) = [d for d in report.diagnostics if d.severity == "error"]
    assert d.code == "E-RACE" and "the end of a slot of `get`" in d.message, d.message
    assert d.loc is not None and (d.loc.line, d.loc.col) == (8, 5)


def test_a_fault_in_plugin_code_names_the_programs_call(tmp_path: Path) -> None:
    """`gpu.with_streams` outside a session fails in gpu.mim's own `stream_init`: the diagnostic
    also names the program's call (it pointed into gpu.mim only; probe)."""
    path = tmp_path / "p.mim"
    path.write_text("""plugin core;
plugin mem;
plugin gpu;
fun work (m0: mem.M 0, m1: gpu.GlobalM, s: gpu.Stream): [mem.M 0, gpu.GlobalM] = return (m0, m1);
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    ret (m0, m1) = gpu.with_streams (1, work) $ (m0, ⊤:gpu.GlobalM);
    return (m0, argc);
""", encoding="utf-8")
    (d,) = driver.run(str(path), [], []).diagnostics
    assert d.code == "E-GPU-SESSION" and d.loc is not None and d.loc.file.endswith("gpu.mim")
    (rel,) = d.related
    assert rel.message == "in `with_streams`, called here"
    assert rel.loc is not None and (rel.loc.file, rel.loc.line) == (str(path), 7)


def test_a_block_a_plugin_function_leaks_is_reported_at_the_programs_call(tmp_path: Path) -> None:
    """The seed's `gpu.with_streams` allocates its stream array and never frees it: W-LEAK, which
    pointed into the shipped gpu.mim, where the user can do nothing. It points at the call in the
    program, naming the function, with the plugin's allocation as a note."""
    src = tmp_path / "streams.mim"
    src.write_text("""plugin core;
plugin mem;
plugin gpu;

con wr (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
        group_id: Idx 1, item_id: Idx 4, (), d: gpu.GlobalPtr «4; I32»,
        return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    return (mem.store (m1, mem.lea (d, item_id), core.bitcast I32 item_id), m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let (m1, d) = gpu.alloc.block «4; I32» m1;
    ret (m0, m1) = gpu.with_streams (1, scope)
    where
        fun scope (m0: mem.M 0, m1: gpu.GlobalM, s: «1; gpu.Stream»): [mem.M 0, gpu.GlobalM] =
            ret (m0, m1, m4) = gpu.launch (1, 4, s, ff, ()) wr d $ (m0, m1, m4);
            return (gpu.stream_sync (m0, m1, s));
    end
    $ (m0, m1);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let (m0, v) = mem.load (m0, mem.lea (h, 3_4));
    let m1 = gpu.free.block (m1, d);
    let m0 = mem.free (m0, h);
    return (gpu.deinit (m0, m1, m4), v);
""", encoding="utf-8")
    rep = driver.run(str(src), [], [])
    assert rep.ok and rep.data["result"] == 3, rep.diagnostics
    (leak,) = [d for d in rep.diagnostics if d.code == "W-LEAK"]
    assert leak.loc is not None and leak.loc.file == str(src) and leak.loc.line == 15, leak.loc
    assert "`with_streams`" in leak.message
    assert leak.related and leak.related[0].loc is not None and leak.related[0].loc.file.endswith("gpu.mim")


def test_a_plugin_function_entered_by_a_tail_call_is_not_blamed_on_its_caller(tmp_path: Path) -> None:
    """`work` jumps to gpu.with_streams with its own return continuation: no activation of its
    own for with_streams, and the innermost call the program made is `work`'s, which is no
    plugin function. The leak stays where the plugin allocates."""
    src = tmp_path / "tail.mim"
    src.write_text("""plugin core;
plugin mem;
plugin gpu;

fun work (m0: mem.M 0, m1: gpu.GlobalM): [mem.M 0, gpu.GlobalM] =
    gpu.with_streams (1, scope) ((m0, m1), return)
    where
        fun scope (m0: mem.M 0, m1: gpu.GlobalM, s: «1; gpu.Stream»): [mem.M 0, gpu.GlobalM] =
            return (m0, m1);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    ret (m0, m1) = work $ (m0, m1);
    return (gpu.deinit (m0, m1, m4), argc);
""", encoding="utf-8")
    rep = driver.run(str(src), [], [])
    assert rep.ok and rep.data["result"] == 1, rep.diagnostics
    (leak,) = [d for d in rep.diagnostics if d.code == "W-LEAK"]
    assert "`work`" not in leak.message and leak.loc is not None and leak.loc.file.endswith("gpu.mim"), leak


def test_a_stream_race_names_the_stream_as_the_program_made_it() -> None:
    # "still pending on stream 1" read as the program's `ss#1`, the second stream it made
    report = run(PROGRAMS / "runtime_errors" / "race_async_host_access.mim")
    (race,) = [d for d in report.diagnostics if d.code == "E-RACE"]
    assert "pending on the stream made by the 1st `gpu.stream_init` to run" in race.message, race.message


_ONE_KERNEL = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx {n}, item_id: Idx {n}, (), buf: gpu.GlobalPtr «{cells}; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let i = core.nat.add (core.nat.mul (core.bitcast Nat group_id, {n}), core.bitcast Nat item_id);
    {statement}
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «{cells}; I32» m1;
    ret (m0, m1, m4) = gpu.launch ({n}, {n}, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, argc);
"""


@pytest.mark.parametrize("n, cells, statement, code, who", [
    # an out-of-bounds index of one work-item of the 9 named none of them
    (3, 8, "let m1 = mem.store (m1, mem.lea (buf, core.bitcast (Idx 8) i), 1I32);", "E-OOB", "work-item 2 of group 2"),
    # a kernel's uninitialised read is held until the launch ends (a later write would make it a
    # race): it was reported without its work-item
    (2, 4, "let (m1, x) = mem.load (m1, mem.lea (buf, core.bitcast (Idx 4) i));", "E-UNINIT", "work-item 0 of group 0"),
], ids=["oob", "uninit"])
def test_a_work_items_fault_says_which_work_item(tmp_path: Path, n: int, cells: int, statement: str, code: str,
                                                  who: str) -> None:
    p = tmp_path / "kernel.mim"
    p.write_text(_ONE_KERNEL.format(n=n, cells=cells, statement=statement), encoding="utf-8")
    (fault,) = [d for d in driver.run(str(p), [], []).diagnostics if d.code == code]
    assert fault.message.endswith(f"(in {who})") and fault.loc is not None and fault.loc.line == 9, fault
