"""Structural matching of a World before and after a rewriting phase.

The specification of a rewriting phase says which patterns may change and into what; every
other node must be unchanged. `Matcher` walks both Worlds from their externals in step: a
pattern rule may accept an (old, new) pair and name the sub-pairs that must match in turn;
otherwise the two nodes must be of the same kind with matching operands, and mutables must
correspond one to one. It is a statement about the two Worlds, not a re-run of the phase.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from verimim.ir.defs import App, Axiom, Def, Lit, MutLam
from verimim.ir.world import World
from verimim.printer import show

Pairs = list[tuple[Def, Def]]
Rule = Callable[[Def, Def], "Pairs | None"]


@dataclass
class Mismatch:
    old: Def
    new: Def
    why: str

    def describe(self) -> str:
        where = f" at {self.old.loc}" if self.old.loc else ""
        return f"{self.why}{where}: before `{_short(self.old)}`, after `{_short(self.new)}`"


def _short(d: Def) -> str:
    text = cast(str, d.name) if isinstance(d, MutLam) else show(d)  # World.mut_lam names every mutable
    return text if len(text) < 160 else text[:157] + "..."


class Matcher:
    def __init__(self, rule: Rule | None = None) -> None:
        self.rule = rule or (lambda a, b: None)
        self.pairs: dict[int, int] = {}
        self.back: dict[int, int] = {}
        self.rule_hits = 0

    def match_worlds(self, old: World, new: World) -> Mismatch | None:
        if set(old.externals) != set(new.externals):
            a = next(iter(old.externals.values())) if old.externals else None
            return Mismatch(a or old.univ(), new.univ(), f"the externals differ: {sorted(old.externals)} "
                            f"before, {sorted(new.externals)} after")
        work: Pairs = [(old.externals[n], new.externals[n]) for n in sorted(old.externals)]
        return self.run(work)

    def run(self, work: Pairs) -> Mismatch | None:
        while work:
            a, b = work.pop()
            seen = self.pairs.get(a.gid)
            if seen is not None:
                if seen != b.gid:
                    return Mismatch(a, b, "one node became two different nodes")
                continue
            if b.gid in self.back and self.back[b.gid] != a.gid:
                return Mismatch(a, b, "two nodes became one")
            self.pairs[a.gid] = b.gid
            self.back[b.gid] = a.gid
            sub = self.rule(a, b)
            if sub is not None:
                self.rule_hits += 1
                work.extend(sub)
                continue
            if isinstance(a, MutLam) or isinstance(b, MutLam):
                if not (isinstance(a, MutLam) and isinstance(b, MutLam)):
                    return Mismatch(a, b, "a continuation was replaced")
                if (a.body is None) != (b.body is None):
                    return Mismatch(a, b, "a continuation lost or gained its body")
                work.append((a.pi, b.pi))
                if a.body is not None and b.body is not None:
                    work.append((a.body, b.body))
                continue
            if type(a) is not type(b) or a.extra() != b.extra() or len(a.ops) != len(b.ops):
                return Mismatch(a, b, "a node changed")
            if isinstance(a, Axiom):
                continue
            work.extend(zip(a.ops, b.ops))
        return None


def app_parts(d: Def, annex: str, depth: int) -> list[Def] | None:
    """The curried arguments of a fully applied `annex` of that depth, else None."""
    if isinstance(d, App) and d.depth == depth and isinstance(d.head, Axiom) and d.head.annex == annex:
        return d.args()
    return None


def lit(d: Def) -> int | None:
    return d.value if isinstance(d, Lit) else None
