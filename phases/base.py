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
from verimim.ir.defs import App, Axiom, Def, MutLam, Tuple
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
    # Skipped by the pipeline, not by the phase (no device World; a phase that has no place on
    # that side): a fact of the program's shape, not a claim of the phase to check.
    by_pipeline: bool = False
    # Of a result narrowed to one side (smt.sides.side_view): the whole program's, which a
    # differential run executes (one side alone is no program: no main, or no kernels).
    whole: "PhaseResult | None" = None

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
    # A phase of the whole program (it splits one, or lowers into kernels and launches): in a
    # sub-pipeline, on one side of a split program, it has nothing to do (run_on_side skips it).
    whole_program: bool = False
    # A phase of host code only (it rewrites into host operations): on the device side of a split
    # program it would put them into kernels (run_on_side skips it there, saying so).
    host_only: bool = False

    def apply(self, prog: Program) -> PhaseResult:
        raise NotImplementedError


@dataclass
class _Reach:
    """One complete walk of a World from its externals: the nodes in the order found, and what
    they depended on — the externals and, for each mutable reached, its type and body as they
    were when it was reached. Immutable nodes never change, so while those are the same, a walk
    finds the same nodes in the same order."""

    externals: tuple[MutLam, ...]
    muts: list[tuple[MutLam, Def, Def | None]]
    nodes: list[Def]
    apps: dict[tuple[str, int], list[App]] = field(default_factory=dict)  # apps_of, sorted

    def still(self, world: World) -> bool:
        ext = world.externals
        if len(ext) != len(self.externals) or any(a is not b for a, b in zip(ext.values(), self.externals)):
            return False
        return all(m.pi is pi and m.body is body for m, pi, body in self.muts)


# The last complete walk of each World from its externals is kept with it (World.kept):
# phases, specifications and the oracle walk the same finished World dozens of times
# (measured: 31 walks per fuzz program).
_REACH = "phases.walk"


def walk(world: World, roots: list[Def] | None = None, stop: set[int] | None = None) -> Iterator[Def]:
    """Every node reachable from the roots (default: the externals), mutables' bodies included,
    each once, without recursion; not entering the nodes whose gids are in `stop` (the kernels,
    for what host code alone reaches)."""
    if roots is not None or stop:
        yield from _walk(roots if roots is not None else list(world.externals.values()), None, stop)
        return
    hit = _reach(world)  # asked when the walk starts, as a walk always looked at the World then
    if hit is not None:
        yield from hit.nodes
        return
    yield from _walk_and_keep(world)


def _reach(world: World) -> _Reach | None:
    hit: _Reach | None = world.kept.get(_REACH)
    if hit is None or not hit.still(world):
        return None
    return hit


def _kept_walk(world: World) -> _Reach:
    """A complete walk from the externals, made now and kept."""
    for _ in _walk_and_keep(world):
        pass
    return world.kept[_REACH]  # type: ignore[no-any-return]


def _walk_and_keep(world: World) -> Iterator[Def]:
    """The walk from the externals, kept once it is complete (a caller may stop early, or change
    the World while it walks: what it finds is what the walk finds now, as it always was)."""
    muts: list[tuple[MutLam, Def, Def | None]] = []
    nodes: list[Def] = []
    externals = tuple(world.externals.values())
    for d in _walk(list(externals), muts):
        nodes.append(d)
        yield d
    world.kept[_REACH] = _Reach(externals, muts, nodes)


def _walk(roots: list[Def], muts: list[tuple[MutLam, Def, Def | None]] | None,
          stop: set[int] | None = None) -> Iterator[Def]:
    seen: set[int] = set(stop or ())
    stack: list[Def] = list(roots)
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        yield d
        if isinstance(d, MutLam):
            if muts is not None:
                muts.append((d, d.pi, d.body))
            stack.append(d.pi)
            if d.body is not None:
                stack.append(d.body)
        else:
            stack.extend(d.ops)


def is_app_of(d: Def, annex: str) -> bool:
    """Whether d is a fully applied `annex` (its head is that axiom) — any curried depth."""
    return isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == annex


def type_and_space(world: World, pair: Def) -> tuple[Def, Def]:
    """A mem operation's `(T, a)` (the explicit `[T, a]` of alloc/malloc/slot, the implicit
    `{T, a}` of load/store/free): its elements, or of a pair given whole (`mem.store @X …`,
    `mem.alloc X m` with `X: [*, Nat]`) its projections `X#0`, `X#1` (a pair's own operands are
    no type and space)."""
    if isinstance(pair, Tuple) and len(pair.ops) == 2:
        return pair.ops[0], pair.ops[1]
    return world.extract_n(pair, 2, 0), world.extract_n(pair, 2, 1)


def apps_of(world: World, annex: str, depth: int) -> list[App]:
    """The applications of `annex` with `depth` arguments reachable in world, in source order."""
    reach = _reach(world) or _kept_walk(world)
    hit = reach.apps.get((annex, depth))
    if hit is None:
        out = [d for d in reach.nodes if isinstance(d, App) and d.depth == depth and is_app_of(d, annex)]
        hit = reach.apps[(annex, depth)] = sorted(out, key=lambda a: (a.loc.line, a.loc.col) if a.loc else (0, 0))
    return list(hit)
