"""The verifier's memory of one thread of control (smt/kernel_memory.py): what a load reads
after writes at constant and symbolic offsets, decided by Z3 for every value of the offsets."""
from __future__ import annotations

from typing import Any

import z3

from verimim.ir.world import World
from verimim.ir.schedule import Scopes
from verimim.smt.kernel_eval import OBJ_BITS, OFF_BITS, Evaluator, Ptr
from verimim.smt.kernel_memory import CellMemory
from verimim.smt.symbolic import Explorer

W = World()
I32, I64 = W.idx_n(1 << 32), W.idx_n(1 << 64)
OBJ = 0x20000


def _setup() -> tuple[Evaluator, CellMemory]:
    return Evaluator(Explorer(), Scopes(W), {}), CellMemory()


def _at(off: Any) -> Ptr:
    o = off if isinstance(off, z3.ExprRef) else z3.BitVecVal(off, OFF_BITS)
    return Ptr(0, z3.BitVecVal(OBJ, OBJ_BITS), o, "an object")


def _valid(claim: z3.BoolRef, *facts: z3.BoolRef) -> bool:
    s = z3.Solver()
    s.add(*facts, z3.Not(claim))
    return s.check() == z3.unsat


def test_a_load_reads_the_last_write_at_an_equal_offset() -> None:
    ev, mem = _setup()
    i = z3.BitVec("i", OFF_BITS)
    a, b, c = (z3.BitVec(n, 32) for n in "abc")
    mem.store(_at(0), I32, a)
    mem.store(_at(4), I32, b)
    mem.store(_at(i), I32, c)  # from here on the object keeps its writes
    at0 = mem.load(ev, _at(0), I32, "x")
    assert _valid(at0 == c, i == 0) and _valid(at0 == a, i == 8)
    assert _valid(mem.load(ev, _at(i), I32, "x") == c)
    mem.store(_at(0), I32, b)  # a constant write after the symbolic one wins
    assert _valid(mem.load(ev, _at(0), I32, "x") == b)
    assert _valid(mem.load(ev, _at(4), I32, "x") == c, i == 4)


def test_unwritten_contents_are_one_unknown_value_per_offset() -> None:
    ev, mem = _setup()
    i, j = z3.BitVec("i", OFF_BITS), z3.BitVec("j", OFF_BITS)
    x, y = mem.load(ev, _at(i), I32, "x"), mem.load(ev, _at(j), I32, "y")
    assert _valid(x == y, i == j)
    assert not _valid(x == y)  # different offsets: any two values
    z = mem.load(ev, _at(8), I32, "z")
    assert _valid(z == x, i == 8)
    mem.store(_at(12), I32, z3.BitVecVal(5, 32))  # another cell: what was read stays read
    assert _valid(mem.load(ev, _at(8), I32, "z") == z)


def test_a_write_of_another_size_that_may_overlap_makes_any_value() -> None:
    ev, mem = _setup()
    i = z3.BitVec("i", OFF_BITS)
    a = z3.BitVec("a", 32)
    mem.store(_at(0), I32, a)
    mem.store(_at(i), I64, z3.BitVecVal(0, 64))
    v = mem.load(ev, _at(0), I32, "v")
    assert _valid(v == a, i == 16)  # no overlap: the old value
    assert not _valid(v == a, i == 0) and not _valid(v == 0, i == 0)  # overlap: not known


def test_a_write_through_an_unknown_object_forgets_every_object() -> None:
    ev, mem = _setup()
    mem.store(_at(0), I32, z3.BitVecVal(7, 32))
    unknown = Ptr(0, z3.BitVec("o", OBJ_BITS), z3.BitVecVal(0, OFF_BITS), "somewhere")
    mem.store(unknown, I32, z3.BitVecVal(1, 32))
    assert not _valid(mem.load(ev, _at(0), I32, "v") == 7)


def test_a_work_items_local_array_read_through_another_index_term_is_what_it_wrote(tmp_path: Any) -> None:
    # la[t & 1] := 7, then v := la[(t + 2) & 1], the same cell: out[t] is written only where
    # v = 7, else out[0] (a race). The load was an unknown value of its own (another term):
    # races `unknown` ("possible for some memory contents … no run shows it"); now `proved`.
    from tests.smt import kernel_programs as kp
    from tests.smt.test_kernel_verify import verify

    body = """    let t = {T};
    let (m5, la) = mem.slot («2; I32», 5) (m5, 0);
    let ti = core.bitcast I32 t;
    let m5 = mem.store (m5, mem.lea (la, core.bitcast (Idx 2) (core.bit2.and_ 0 (ti, 1I32))), 7I32);
    let (m5, v) = mem.load (m5, mem.lea (la, core.bitcast (Idx 2) (core.bit2.and_ 0 (core.wrap.add 0 (ti, 2I32), 1I32))));
    let cell = (0_16, core.bitcast (Idx 16) t)#(core.icmp.e (v, 7I32));
    let m1 = mem.store (m1, mem.lea (out, cell), ti);
    return (m1, m3, m4, m5);"""
    entries, diags = verify(kp.write(tmp_path, "local_two_terms", kp.program(body)))
    assert (entries[0]["races"], entries[0]["divergence"]) == ("proved", "proved"), entries[0]
    assert not diags


def test_a_stream_conflict_resting_on_untracked_memory_stands_only_where_a_run_shows_it(
        monkeypatch: Any) -> None:
    # Stream handles copied to the device and back: the host model does not know them after the
    # copy. One stream in both cells: the conflict Z3 finds is no race (`unknown`, no E-RACE);
    # two streams: the run shows the race, and the refutation stands. Without the confirming
    # run (a wrong variant: every satisfiable conflict reported) the first was a false E-RACE.
    from pathlib import Path

    from verimim import driver
    from verimim.smt import kernel_streams

    progs = Path(__file__).resolve().parents[1] / "programs"
    one = str(progs / "valid" / "one_stream_after_a_copy_back_from_the_device.mim")
    two = str(progs / "runtime_errors" / "two_streams_after_a_copy_back_from_the_device.mim")

    def races(path: str) -> tuple[set[str], set[str]]:
        rep = driver.check(path, [])
        return {e["races"] for e in rep.data["kernels"]}, {d.code for d in rep.diagnostics if d.severity == "error"}

    assert races(one) == ({"unknown"}, set())
    assert races(two) == ({"refuted"}, {"E-RACE"})
    monkeypatch.setattr(kernel_streams, "_rests_on_unknowns", lambda *a: False)
    assert races(one)[1] == {"E-RACE"}
    monkeypatch.undo()
    monkeypatch.setattr(kernel_streams, "_shown_by_run", lambda *a: None)  # no run shows anything
    assert races(two) == ({"unknown"}, set())
