"""`Nat`-valued terms as Z3 integers (address spaces, `mem.M n`): what values a term that is no
literal can take, for the address-space checks and their specification.

`Nat` is unbounded in the interpreter and `i64` on targets (SEMANTICS.md): a term is a
mathematical integer, or one modulo 2^64 (`NatTerms(TARGET_NAT)`) — `core.nat.add`/`mul` are +
and × (then reduced), `core.nat.sub` saturates at 0; `core.bitcast Nat x` of an `x: Idx n` (a
`Bool`: n = 2) is some value below n; anything else (a parameter, a loaded value, an operation
with no meaning here) is some value ≥ 0 of its own, the same node the same unknown. A space is
possibly forbidden when it is so under either meaning (`a + 5` is 4 on a target for a = 2^64 − 1)."""
from __future__ import annotations

from collections.abc import Callable
from typing import cast

import z3

from verimim.ir.defs import Def, IdxT, Lit, NatT, Tuple
from verimim.smt import z3_typed as z3t
from verimim.smt.match import app_parts


TARGET_NAT = 2 ** 64  # `Nat` on the targets: i64


class NatTerms:
    """The integer of each term asked for, over unknowns shared by all of them, modulo
    `modulus` where given; `facts` bound the unknowns (≥ 0, below an `Idx` size or the modulus)."""

    def __init__(self, modulus: int | None = None) -> None:
        self.modulus = modulus
        self.unknowns: dict[int, z3.ArithRef] = {}
        self.facts: list[z3.BoolRef] = []

    def term(self, d: Def) -> z3.ArithRef:
        if isinstance(d, Lit):
            return z3.IntVal(d.value if self.modulus is None else d.value % self.modulus)
        for name in ("core.nat.add", "core.nat.mul", "core.nat.sub"):
            parts = app_parts(d, name, 1)
            if parts is None or not (isinstance(parts[0], Tuple) and len(parts[0].ops) == 2):
                continue
            a, b = (self.term(x) for x in parts[0].ops)
            if name == "core.nat.sub":
                return cast(z3.ArithRef, z3.If(a >= b, a - b, 0))
            r = cast(z3.ArithRef, a + b if name == "core.nat.add" else a * b)
            return r if self.modulus is None else cast(z3.ArithRef, r % self.modulus)
        return self._unknown(d)

    def _unknown(self, d: Def) -> z3.ArithRef:
        v = self.unknowns.get(d.gid)
        if v is not None:
            return v
        meaning = "nat" if self.modulus is None else f"nat_mod_{self.modulus}"
        v = self.unknowns[d.gid] = z3.Int(f"{meaning}_{len(self.unknowns)}")
        self.facts.append(v >= 0)
        bounds = [x for x in (_source_size(d), self.modulus) if x is not None]
        if bounds:
            self.facts.append(v < min(bounds))
        return v


class NatMeanings:
    """Both meanings of `Nat` at once, each over unknowns of its own: whether a formula of a term
    holds under either, and the facts of both."""

    def __init__(self) -> None:
        self.meanings = (NatTerms(), NatTerms(TARGET_NAT))

    def either(self, formula: Callable[[z3.ArithRef], z3.BoolRef], d: Def) -> z3.BoolRef:
        if isinstance(d, Lit) and d.value < TARGET_NAT:  # (the common case: one meaning, no terms)
            return cast(z3.BoolRef, z3.simplify(formula(z3.IntVal(d.value))))
        return z3t.Or(*[formula(m.term(d)) for m in self.meanings])

    @property
    def facts(self) -> list[z3.BoolRef]:
        return [f for m in self.meanings for f in m.facts]


def _source_size(d: Def) -> int | None:
    """n for `core.bitcast Nat x` of an `x: Idx n` with a literal n: its values lie below n."""
    parts = app_parts(d, "core.bitcast", 3)  # [S, D, x]: core.bitcast {S} D x
    if parts is None or not isinstance(parts[1], NatT):
        return None
    src = parts[0]
    return int(src.size.value) if isinstance(src, IdxT) and isinstance(src.size, Lit) else None
