"""The default pipeline of PHASES.md and the registry of phases by annex name.

    1. gpu.lower_btensor_map_reduce   (only when the program uses btensor)
    2. mem.alloc2malloc_repl
    3. gpu.check_addr_spaces_repl
    4. gpu.mem_checks
    5. compile.cleanup                (dead code; proved: what is kept is unchanged and
                                      closed under references)
       compile.beta_red, compile.lam_spec  (β-reduction of mutable lams, specialisation of
                                      higher-order functions such as gpu.with_streams;
                                      proved against the input β-reduced, smt/inline_proof.py)
    6. gpu.split_apply, then gpu.host_specific_phases () on the host World and
       gpu.device_specific_phases () on the device World
    7. buffer.lower_ptr on the host World (what the backends need; verimim.phases.plan)

The sub-pipelines are read from the program's World (the Mim definitions in gpu.mim), and can be
overridden by the program, a pipeline file or the command line (verimim.phases.plan).
"""
from __future__ import annotations

from verimim.diagnostics import Diagnostic, Loc, Related
from verimim.ir.defs import MutLam
from verimim.ir.world import World
from verimim.phases.base import Phase, PhaseResult, Program
from verimim.phases.btensor import LowerBtensor
from verimim.phases.checks import CheckAddrSpaces, MemChecks
from verimim.phases.inline import BetaRed, LamSpec
from verimim.phases.lower_ptr import LowerPtr
from verimim.phases.program_pipeline import Step, steps_of
from verimim.phases.repl import Alloc2Malloc, HostMalloc2GpuAlloc, RemoveDoubleSyncs, is_kernels_only
from verimim.phases.rewriter import Rewriter
from verimim.phases.split import SplitApply
from verimim.phases.witness import CleanupPrefix


class Cleanup(Phase):
    """Rebuilds the program from its externals: what they do not reach is dropped."""

    name = "compile.cleanup"

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        worlds = [Rewriter(w).run() for w in prog.worlds()]
        res.after = Program(worlds[0], worlds[1] if len(worlds) > 1 else None)
        return res


class PrefixCleanup(Phase):
    """Upstream's `compile.prefix_cleanup_phase "p"`: externals named `p…` become internal, then
    what the remaining externals do not reach is dropped."""

    name = "compile.prefix_cleanup_phase"

    def __init__(self, prefix: str, loc: Loc | None = None) -> None:
        self.prefix = prefix
        self.loc = loc  # where the pipeline names it

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        res.witness = CleanupPrefix(self.prefix)

        def internal(name: str) -> bool:
            return name.startswith(self.prefix)

        # The program's entry points: `main`, and on the device side the kernels its launches
        # name. Upstream drops one made internal (and all it reaches): the program would do
        # nothing, or launch a kernel that is gone — and `check` would have no launch left to
        # verify. Refused, as `compile` refuses a program without `main`.
        entries: list[MutLam] = []
        for w in prog.worlds():
            ext = w.externals
            # (a device World on its own side of a split: a World of kernels only, no `main`)
            kernels_only = w is prog.device or is_kernels_only(w)
            entries += [m for n, m in sorted(ext.items()) if internal(n) and (n == "main" or kernels_only)]
        if entries:
            m = entries[0]
            what = "the program's `main`" if m.name == "main" else f"kernel `{m.name}`, which the host launches,"
            res.diagnostics.append(Diagnostic(
                "E-NAME", f"`compile.prefix_cleanup_phase \"{self.prefix}\"` would make {what} internal and "
                f"remove it: the compiled program would have no `{m.name}`", m.loc,
                related=(Related(f"`compile.prefix_cleanup_phase \"{self.prefix}\"` in the pipeline", self.loc),)
                if self.loc is not None else ()))
            return res
        worlds = [Rewriter(w).run(internal) for w in prog.worlds()]
        res.after = Program(worlds[0], worlds[1] if len(worlds) > 1 else None)
        return res


PHASES: dict[str, Phase] = {p.name: p for p in (
    LowerBtensor(), Alloc2Malloc(), CheckAddrSpaces(), MemChecks(), Cleanup(), SplitApply(),
    HostMalloc2GpuAlloc(), RemoveDoubleSyncs(), LowerPtr(), BetaRed(), LamSpec())}


def default_pipeline() -> list[str]:
    return ["gpu.lower_btensor_map_reduce", "mem.alloc2malloc_repl", "gpu.check_addr_spaces_repl",
            "gpu.mem_checks", "compile.cleanup", "compile.beta_red", "compile.lam_spec", "gpu.split_apply"]


def sub_pipelines(world: World) -> tuple[list[Step], list[Step]]:
    """The host and device sub-pipelines `gpu.mim` defines (`gpu.host_specific_phases`, …)."""
    out: list[list[Step]] = []
    for annex in ("gpu.host_specific_phases", "gpu.device_specific_phases"):
        d = world.annexes.get(annex)
        out.append([] if d is None else steps_of(world, d, f"`{annex}`"))
    return out[0], out[1]


def run_on_side(phase: Phase, prog: Program, side: str) -> PhaseResult:
    """Run a sub-pipeline phase on one side of a split program only."""
    assert prog.device is not None
    skipped = None
    if phase.whole_program:
        # One side alone looks like a program never split: splitting the device World again
        # dropped the kernels' bodies (a false E-SPEC, and E-DIFF after it).
        skipped = f"`{phase.name}` runs on the whole program, not on one side of a split one"
    elif phase.host_only and side == "device":
        # (`device_specific_phases` naming `gpu.host_malloc2gpualloc_repl` rewrote a kernel's
        # malloc into `gpu.alloc.block`, a host operation: E-DIFF where the source ran)
        skipped = (f"`{phase.name}` rewrites host code into host operations; on the device side it "
                   f"would put them into kernels")
    if skipped is not None:
        res = PhaseResult(phase.name, prog, prog, skipped=skipped, by_pipeline=True)
        res.side = side
        return res
    one = Program(prog.host if side == "host" else prog.device)
    res = phase.apply(one)
    after = res.after.host
    res.before = prog
    res.after = Program(after, prog.device) if side == "host" else Program(prog.host, after)
    res.side = side
    return res
