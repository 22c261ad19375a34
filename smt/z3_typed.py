"""z3 functions at the types verimim uses them with.

z3's Python API has no annotations, so a type checker infers each function's result from its
body: `z3.And`/`Or`/`Not` may also build a probe, `z3.If` a tactic, `z3.Extract` a sequence,
and `z3.simplify`/`z3.substitute` give any expression. verimim calls them on Boolean and
bit-vector terms only; these wrappers say so. Each calls the z3 function with the same
arguments and returns its result unchanged (`cast` only tells the checker what it is).
"""
from __future__ import annotations

from typing import TypeGuard, TypeVar, cast, overload

import z3

E = TypeVar("E", bound=z3.ExprRef)


def And(*args: z3.BoolRef | bool) -> z3.BoolRef:
    return cast(z3.BoolRef, z3.And(*args))


def Or(*args: z3.BoolRef | bool) -> z3.BoolRef:
    return cast(z3.BoolRef, z3.Or(*args))


def Not(a: z3.BoolRef | bool) -> z3.BoolRef:
    return cast(z3.BoolRef, z3.Not(a))


@overload
def If(c: z3.BoolRef | bool, a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef: ...
@overload
def If(c: z3.BoolRef | bool, a: z3.BitVecRef | int, b: z3.BitVecRef | int) -> z3.BitVecRef: ...
def If(c: z3.BoolRef | bool, a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.ExprRef:
    return cast(z3.ExprRef, z3.If(c, a, b))


def Extract(high: int, low: int, a: z3.BitVecRef) -> z3.BitVecRef:
    return cast(z3.BitVecRef, z3.Extract(high, low, a))


def simplify(e: E) -> E:
    """The simplified term has e's sort (a bit-vector stays one, a formula a formula)."""
    return cast(E, z3.simplify(e))


def substitute(e: E, *pairs: tuple[z3.ExprRef, z3.ExprRef]) -> E:
    """Each pair replaces a term by one of the same sort: the result has e's sort."""
    return cast(E, z3.substitute(e, *pairs))


def is_bv_value(a: object) -> TypeGuard[z3.BitVecNumRef]:
    """z3 wraps every bit-vector numeral it returns as a BitVecNumRef."""
    return z3.is_bv_value(a)


def is_int_value(a: object) -> TypeGuard[z3.IntNumRef]:
    """z3 wraps every integer numeral it returns as an IntNumRef."""
    return z3.is_int_value(a)


def free_vars(*es: z3.ExprRef) -> list[z3.ExprRef]:
    """The uninterpreted constants of es, each once. z3.z3util.get_vars walks a term as a tree:
    a path condition built of shared conjunctions (a host loop of 210 launches) is a DAG whose
    tree is exponential; this walks each node once."""
    seen: set[int] = set()
    out: list[z3.ExprRef] = []
    todo = list(es)
    while todo:
        e = todo.pop()
        k = e.get_id()
        if k in seen:
            continue
        seen.add(k)
        if z3.is_const(e):
            if e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                out.append(e)
            continue
        todo.extend(e.children())
    return out
