"""A cheap first attempt at refuting a bit-vector formula, before Z3 bit-blasts it.

Many normalizer obligations are unsatisfiable for a reason that lies entirely in their Boolean
structure and in comparisons of the *same* term with constants: the path took "P < 2^63",
the specification says "P > 2^63 - 1 or P < -2^63", and an interval fact says "P ≥ 1". Z3
would bit-blast the 130-bit multiplier P before noticing; here each comparison becomes a
Boolean variable, and the facts that relate comparisons of one term ("P ≥ 1 implies
P ≥ -2^63", "P ≥ c and P ≤ d cannot both hold when c > d") are added as clauses.

That abstraction only forgets and adds true facts, so when it is unsatisfiable the formula is
too (`refutes` returns True). When it is satisfiable nothing is concluded and the caller asks
Z3 about the formula itself.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import cast

import z3

from verimim.smt import z3_typed as z3t

_CONNECTIVES = {z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES, z3.Z3_OP_XOR,
                z3.Z3_OP_TRUE, z3.Z3_OP_FALSE}


@dataclass(frozen=True)
class _Bound:
    """`atom` says: term ≥ value ("lower"), term ≤ value ("upper") or term = value ("eq"), in
    one ordering of the term's bit-vectors (signed or unsigned)."""

    atom: z3.BoolRef
    kind: str
    value: int


Key = tuple[int, bool]  # (term id, signed ordering)


def _as_bounds(e: z3.BoolRef) -> list[tuple[Key, _Bound]]:
    """The bounds an atom states, if it compares a term with a constant."""
    kind = e.decl().kind()
    if kind in (z3.Z3_OP_SLEQ, z3.Z3_OP_ULEQ):
        signed = kind == z3.Z3_OP_SLEQ
        x, y = e.children()
        value = (lambda c: c.as_signed_long()) if signed else (lambda c: c.as_long())
        if z3.is_bv_value(x) and not z3.is_bv_value(y):
            return [((y.get_id(), signed), _Bound(e, "lower", value(x)))]
        if z3.is_bv_value(y) and not z3.is_bv_value(x):
            return [((x.get_id(), signed), _Bound(e, "upper", value(y)))]
    if kind == z3.Z3_OP_EQ and z3.is_bv(e.arg(0)):
        x, y = e.children()
        if z3.is_bv_value(x) and not z3.is_bv_value(y):
            x, y = y, x
        if z3t.is_bv_value(y) and not z3.is_bv_value(x):
            return [((x.get_id(), True), _Bound(e, "eq", y.as_signed_long())),
                    ((x.get_id(), False), _Bound(e, "eq", y.as_long()))]
    return []


class _Abstraction:
    def __init__(self) -> None:
        self.atoms: dict[int, z3.BoolRef] = {}
        self.bounds: dict[Key, list[_Bound]] = defaultdict(list)
        self.memo: dict[int, z3.BoolRef] = {}

    def boolean(self, e: z3.BoolRef) -> z3.BoolRef:
        """`e` with every atom replaced by a Boolean variable."""
        key = e.get_id()
        if key in self.memo:
            return self.memo[key]
        kind = e.decl().kind() if z3.is_app(e) else None
        # A connective, = on Booleans and a Boolean ITE: Boolean operands, a Boolean result.
        out: z3.BoolRef
        if kind in _CONNECTIVES:
            out = cast(z3.BoolRef, e.decl()(*[self.boolean(cast(z3.BoolRef, c)) for c in e.children()])) \
                if e.num_args() else e
        elif kind == z3.Z3_OP_EQ and z3.is_bool(e.arg(0)):
            out = cast(z3.BoolRef, self.boolean(cast(z3.BoolRef, e.arg(0))) == self.boolean(cast(z3.BoolRef, e.arg(1))))
        elif kind == z3.Z3_OP_ITE and z3.is_bool(e):
            out = cast(z3.BoolRef, z3.If(*[self.boolean(cast(z3.BoolRef, c)) for c in e.children()]))
        else:
            out = self._atom(e)
        self.memo[key] = out
        return out

    def _atom(self, e: z3.BoolRef) -> z3.BoolRef:
        var = z3.Bool(f"atom!{e.get_id()}")
        if e.get_id() not in self.atoms:
            self.atoms[e.get_id()] = var
            for key, bound in _as_bounds(e):
                self.bounds[key].append(bound)
        return var

    def axioms(self) -> list[z3.BoolRef]:
        """What comparisons of one term with constants imply about each other."""
        out: list[z3.BoolRef] = []
        for group in self.bounds.values():
            for p in group:
                for q in group:
                    if p is not q:
                        out += self._relate(p, q)
        return out

    def _relate(self, p: _Bound, q: _Bound) -> list[z3.BoolRef]:
        """Clauses relating two bounds of one term (each unordered pair is met twice)."""
        a, b = self.atoms[p.atom.get_id()], self.atoms[q.atom.get_id()]
        if p.kind == "eq":
            holds = {"eq": p.value == q.value, "lower": p.value >= q.value, "upper": p.value <= q.value}[q.kind]
            return [z3.Implies(a, b if holds else z3.Not(b))]  # t = p decides q
        if q.kind == "eq":
            return []  # met the other way round
        if p.kind == q.kind:
            stronger = p.value >= q.value if p.kind == "lower" else p.value <= q.value
            return [z3.Implies(a, b)] if stronger else []
        if p.kind == "lower":  # p: t ≥ p.value, q: t ≤ q.value
            facts = []
            if p.value > q.value:
                facts.append(z3.Not(z3.And(a, b)))  # both: empty
            if p.value <= q.value + 1:
                facts.append(z3.Or(a, b))  # t < p.value and t > q.value: empty
            return facts
        return []


def refutes(constraints: list[z3.BoolRef], timeout_ms: int = 1_000) -> bool:
    """True if the Boolean abstraction of the constraints is unsatisfiable (then so are they)."""
    ab = _Abstraction()
    skeleton = [ab.boolean(c) for c in constraints]
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*skeleton, *ab.axioms())
    return s.check() == z3.unsat
