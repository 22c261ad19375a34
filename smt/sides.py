"""What a phase of a sub-pipeline is judged on: its own side of the split program.

`gpu.split_apply` runs `host_specific_phases` on the host World and `device_specific_phases` on
the device World (the seed; PHASES.md: "each sub-pipeline ran on its side only"). Such a phase
sees one World, so its specification states what it must achieve on that World — and that the
other side comes out as it went in. Judged on the whole program instead, a checker on the
device side "accepted" the host's violation, and an inliner on one side "left" the other
side's calls (false E-SPEC on valid programs).
"""
from __future__ import annotations

from dataclasses import replace

from verimim.phases.base import PhaseResult, Program

# Specifications that read a split program as a whole (they find each side's kernels themselves).
WHOLE_PROGRAM_SPECS = frozenset({"gpu.remove_double_syncs"})


def on_one_side(res: PhaseResult) -> bool:
    return res.side is not None and res.before.device is not None and res.after.device is not None


def other_side_changed(res: PhaseResult) -> str | None:
    """What refutes "ran on its side only": the other side's World is not the one it was."""
    if not on_one_side(res):
        return None
    same = (res.before.device is res.after.device) if res.side == "host" else (res.before.host is res.after.host)
    other = "device" if res.side == "host" else "host"
    return None if same else f"it ran on the {res.side} side, but the {other} World changed"


def side_view(res: PhaseResult) -> PhaseResult:
    """The result as the phase saw it: its side's World before and after, as a program of one
    World (what `run_on_side` gave the phase); the whole result where the spec wants it."""
    if not on_one_side(res) or res.name in WHOLE_PROGRAM_SPECS:
        return res
    assert res.before.device is not None and res.after.device is not None
    if res.side == "host":
        return replace(res, before=Program(res.before.host), after=Program(res.after.host), whole=res)
    return replace(res, before=Program(res.before.device), after=Program(res.after.device), whole=res)
