"""What a phase did, as its specification reads it: one dataclass per kind of phase (its
*witness*), instead of an untyped log.

A spec runs whatever the phase reports (PHASES.md): the rewrites it claims to have made, the
mutables it says it inlined or left, the prefix it cleaned up, the kernels it split off, the
operations it lowered. A phase with no witness claimed nothing; `PhaseResult.claim(kind)`
gives that empty claim, so a spec never has to guess at keys.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from verimim.ir.defs import App, Def, MutLam


@dataclass
class Witness:
    """The base of every phase's witness."""


@dataclass
class Rewrites(Witness):
    """A rewriting phase (the `_repl` phases, `gpu.remove_double_syncs`, `buffer.lower_ptr`):
    every (old node, new node) it rewrote, in the order it rewrote them."""

    rewrites: list[tuple[Def, Def]] = field(default_factory=list)


def mut_key(m: MutLam) -> str:
    """A mutable's identity across the Worlds of a phase, as witnesses name it: copies keep kind,
    name and location (the kind tells `fun f (n) (x)`'s outer `lam` from its inner `fun`, which
    share the rest)."""
    where = f"@{m.loc.line}:{m.loc.col}" if m.loc else ""
    return f"{m.kind} {m.name or '?'}{where}"


@dataclass
class Inlining(Witness):
    """`compile.beta_red` / `compile.lam_spec`: which mutables were inlined how often, which were
    left and why, by `mut_key`; the rounds it took and the growth budget left."""

    mode: str | None = None
    rounds: int = 0
    inlined: dict[str, int] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    budget_left: int = 0


@dataclass
class CleanupPrefix(Witness):
    """`compile.prefix_cleanup_phase "p"`: the prefix of the externals it made internal."""

    prefix: str | None = None


@dataclass
class Split(Witness):
    """`gpu.split_apply`: the kernels it moved to the device World (by their names there), the
    sizes of both Worlds, how many captured values it lifted into each kernel's arguments,
    and the name each kernel of the input (by gid) is external under on both sides (its own,
    unless another kernel has it: `phases.split.device_names`)."""

    kernels: list[str] = field(default_factory=list)
    host_nodes: int = 0
    device_nodes: int = 0
    lifted_captures: dict[str, int] = field(default_factory=dict)
    device_names: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LoweredOp:
    """One `btensor.map_reduce(_post)` application lowered to a kernel launch."""

    op: App
    launch: Def
    kernel: MutLam
    cont: MutLam
    n_groups: int
    n_items: int


@dataclass
class BtensorLowering(Witness):
    """`gpu.lower_btensor_map_reduce`: the operations it lowered, and those it left on the host
    with why."""

    lowered: list[LoweredOp] = field(default_factory=list)
    not_lowered: list[tuple[App, str]] = field(default_factory=list)
