"""The default pipeline of PHASES.md and the registry of phases by annex name.

    1. gpu.lower_btensor_map_reduce   (only when the program uses btensor)
    2. mem.alloc2malloc_repl
    3. gpu.check_addr_spaces_repl
    4. gpu.mem_checks
    5. compile.cleanup                (dead code; validated by differential execution)
       compile.beta_red, compile.lam_spec  (β-reduction of mutable lams, specialisation of
                                      higher-order functions such as gpu.with_streams;
                                      validated by differential execution, phases/inline.py)
    6. gpu.split_apply, then gpu.host_specific_phases () on the host World and
       gpu.device_specific_phases () on the device World

The sub-pipelines are read from the program's World (the Mim definitions in gpu.mim), and can be
overridden from the command line (`--host-phases`, `--device-phases`).
"""
from __future__ import annotations

from verimim.ir.defs import App, Axiom, Def, Lam, Tuple
from verimim.ir.world import World
from verimim.phases.base import Phase, PhaseResult, Program
from verimim.phases.btensor import LowerBtensor
from verimim.phases.checks import CheckAddrSpaces, MemChecks
from verimim.phases.inline import BetaRed, LamSpec
from verimim.phases.lower_ptr import LowerPtr
from verimim.phases.repl import Alloc2Malloc, HostMalloc2GpuAlloc, RemoveDoubleSyncs
from verimim.phases.rewriter import Rewriter
from verimim.phases.split import SplitApply


class Cleanup(Phase):
    """Rebuilds the program from its externals: what they do not reach is dropped."""

    name = "compile.cleanup"

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        worlds = [Rewriter(w).run() for w in prog.worlds()]
        res.after = Program(worlds[0], worlds[1] if len(worlds) > 1 else None)
        return res


PHASES: dict[str, Phase] = {p.name: p for p in (
    LowerBtensor(), Alloc2Malloc(), CheckAddrSpaces(), MemChecks(), Cleanup(), SplitApply(),
    HostMalloc2GpuAlloc(), RemoveDoubleSyncs(), LowerPtr(), BetaRed(), LamSpec())}


def phase_names_of(world: World, annex: str) -> list[str]:
    """The phases a `compile.Phase`-valued Mim definition denotes (`() → Phase` pipelines)."""
    d: Def | None = world.annexes.get(annex)
    if d is None:
        return []
    if isinstance(d, Lam):
        d = world.app(d, world.unit())
    return _flatten(d)


def _flatten(d: Def) -> list[str]:
    if isinstance(d, Axiom):
        return [] if d.annex == "compile.null" else [d.annex]
    if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == "compile.phases":
        arg = d.arg
        elems = arg.ops if isinstance(arg, Tuple) else (arg,)
        return [n for e in elems for n in _flatten(e)]
    raise ValueError(f"not a phase: {d!r}")


def default_pipeline() -> list[str]:
    return ["gpu.lower_btensor_map_reduce", "mem.alloc2malloc_repl", "gpu.check_addr_spaces_repl",
            "gpu.mem_checks", "compile.cleanup", "compile.beta_red", "compile.lam_spec", "gpu.split_apply"]


def sub_pipelines(world: World, host: list[str] | None, device: list[str] | None) -> tuple[list[str], list[str]]:
    h = host if host is not None else phase_names_of(world, "gpu.host_specific_phases")
    d = device if device is not None else phase_names_of(world, "gpu.device_specific_phases")
    return h, d


def run_on_side(phase: Phase, prog: Program, side: str) -> PhaseResult:
    """Run a sub-pipeline phase on one side of a split program only."""
    assert prog.device is not None
    one = Program(prog.host if side == "host" else prog.device)
    res = phase.apply(one)
    after = res.after.host
    res.before = prog
    res.after = Program(after, prog.device) if side == "host" else Program(prog.host, after)
    res.log["side"] = side
    return res
