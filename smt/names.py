"""Names of IR terms for specifications, from the terms' structure, never from their printing.

A specification compares two Worlds (before and after a phase) and must give the same unknown
to the same term of both: a symbolic size `core.trait.size «a; I32»` in the old World and in the
new one. The printer's text is no such name — it hides an implicit argument in one place and
shows it in another (`core.bitcast I32 Nat x` and `core.bitcast @I32 Nat x` are one term). The
canonical key is the term's structure: each node's kind, its identity data (a literal's value,
an axiom's annex name, …) and its operands' keys; a continuation by its name and source
position (its identity across the Worlds of one phase), not by its body, so cycles end there.
"""
from __future__ import annotations

import hashlib

from verimim.ir.defs import Axiom, BVar, Def, MutLam, Var


class Namer:
    """Canonical keys of the terms of any number of Worlds (memoized per node, per Namer)."""

    def __init__(self) -> None:
        self._keys: dict[int, str] = {}

    def key(self, d: Def) -> str:
        """A short digest of d's structure: equal for structurally equal terms of two Worlds."""
        work: list[tuple[Def, bool]] = [(d, False)]
        while work:
            x, expanded = work.pop()
            if x.gid in self._keys:
                continue
            leaf = _leaf(x)
            if leaf is not None:
                self._keys[x.gid] = _digest(leaf)
                continue
            if not expanded:
                work.append((x, True))
                work.extend((op, False) for op in x.ops if op.gid not in self._keys)
                continue
            parts = (type(x).__name__, repr(x.extra()), *(self._keys[op.gid] for op in x.ops))
            self._keys[x.gid] = _digest("(" + " ".join(parts) + ")")
        return self._keys[d.gid]


def _leaf(x: Def) -> str | None:
    if isinstance(x, MutLam):
        where = f"{x.loc.line}:{x.loc.col}" if x.loc else "?"
        return f"mut {x.name or '_'}@{where}"
    if isinstance(x, Var):
        m = x.ops[0]
        where = f"{m.loc.line}:{m.loc.col}" if m.loc else "?"
        return f"var {m.name or '_'}@{where}"
    if isinstance(x, Axiom):
        return f"axm {x.annex}"
    if isinstance(x, BVar):
        return f"bvar {x.index}"
    return None


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
