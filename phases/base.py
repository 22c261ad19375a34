"""Phases and their results.

A phase is a pure function from one World to another (a new World, or the same one for a
checker that accepts), or a rejection with diagnostics. Every phase is named by its annex
(`gpu.remove_double_syncs`) and paired with a specification in `verimim.smt` that is checked on
each run. `split_apply` yields two Worlds (host and device), so a program between phases is a
`Program`: one World, or a host World plus a device World.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from verimim.diagnostics import Diagnostic
from verimim.ir.defs import App, Axiom, Def, MutLam
from verimim.ir.world import World
from verimim.phases.witness import Rewrites, Witness

W = TypeVar("W", bound=Witness)


@dataclass
class Program:
    """The program between phases: `host` is the whole program until split_apply."""

    host: World
    device: World | None = None

    def worlds(self) -> list[World]:
        return [self.host] + ([self.device] if self.device is not None else [])


@dataclass
class PhaseResult:
    name: str
    before: Program
    after: Program
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: str | None = None
    # What the phase did, for its specification and for tests (verimim.phases.witness).
    witness: Witness | None = None
    side: str | None = None  # the side of a split program a sub-pipeline ran the phase on

    @property
    def rejected(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    @property
    def label(self) -> str:
        """The phase's name, with the side it ran on (`gpu.remove_double_syncs[device]`)."""
        return self.name + (f"[{self.side}]" if self.side else "")

    def claim(self, kind: type[W]) -> W:
        """The phase's witness of this kind; the empty claim when it made none."""
        if isinstance(self.witness, kind):
            return self.witness
        return kind()

    def rewrote(self, old: Def, new: Def) -> None:
        """Record one rewrite in the phase's `Rewrites` witness."""
        if not isinstance(self.witness, Rewrites):
            self.witness = Rewrites()
        self.witness.rewrites.append((old, new))


class Phase:
    """Base of every phase: `name` is its annex name."""

    name: str = "?"

    def apply(self, prog: Program) -> PhaseResult:
        raise NotImplementedError


def walk(world: World, roots: list[Def] | None = None) -> Iterator[Def]:
    """Every node reachable from the roots (default: the externals), mutables' bodies included,
    each once, without recursion."""
    seen: set[int] = set()
    stack: list[Def] = list(roots) if roots is not None else list(world.externals.values())
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        yield d
        if isinstance(d, MutLam):
            stack.append(d.pi)
            if d.body is not None:
                stack.append(d.body)
        else:
            stack.extend(d.ops)


def is_app_of(d: Def, annex: str) -> bool:
    """Whether d is a fully applied `annex` (its head is that axiom) — any curried depth."""
    return isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == annex


def apps_of(world: World, annex: str, depth: int) -> list[App]:
    out = []
    for d in walk(world):
        if isinstance(d, App) and d.depth == depth and is_app_of(d, annex):
            out.append(d)
    return sorted(out, key=lambda a: (a.loc.line, a.loc.col) if a.loc else (0, 0))
