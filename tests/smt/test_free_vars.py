"""z3_typed.free_vars walks a term as the DAG it is: a host loop of 210 launches made each
launch's condition share the conditions before it, and z3.z3util.get_vars (a tree walk) ran
for minutes on them (`check` of such a program did not end in 400 s; host-model prober c02)."""
from __future__ import annotations

import z3

from verimim.smt import z3_typed as z3t


def test_a_term_exponential_as_a_tree_is_walked_once_per_node() -> None:
    a, b, x = z3.Bool("a"), z3.Bool("b"), z3.BitVec("x", 8)
    e: z3.BoolRef = x == 1
    for _ in range(60):  # 2^60 paths through the tree, 180 nodes in the DAG
        e = z3t.Or(z3t.And(e, a), z3t.And(e, b))
    assert sorted(str(v) for v in z3t.free_vars(e)) == ["a", "b", "x"]


def test_it_finds_what_get_vars_finds() -> None:
    x, y = z3.BitVecs("x y", 8)
    f = z3.Function("f", z3.BitVecSort(8), z3.BitVecSort(8))
    e = z3.And(f(x) + 1 == y, z3.ULT(x, 3), z3.BitVecVal(4, 8) == y)
    assert {str(v) for v in z3t.free_vars(e)} == {str(v) for v in z3.z3util.get_vars(e)} == {"x", "y"}
