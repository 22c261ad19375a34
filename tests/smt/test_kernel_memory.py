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
