"""Refutations that rest on what the kernel verifier does not know, confirmed by a run.

The kernel model leaves a value loaded from global memory unconstrained, and so does the host
model for a kernel argument that is not a function of main's inputs (a host loop's counter, a
value loaded on the host). A race or divergence found for *some* such value may be one the
program never has: a kernel that indexes `a[8 + (a[t] & 7)]` over a buffer the host filled with
0..15 writes eight distinct cells, yet Z3 is free to pick equal contents. Such a refutation is
not a proof of a fault, and reporting it as `E-RACE` would be a false alarm.

So it is run: the reference interpreter executes the verified program (host and device, as
the pipeline left them) with a few argument counts, and a run that stops with the same code
inside the same kernel confirms the refutation, with a `verimim run` line that shows it. A
refutation that no run confirms is `unknown`: neither a fault shown nor a proof.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from verimim.diagnostics import LAUNCHED_HERE, Loc, VerimimError
from verimim.frontend.loader import in_program
from verimim.ir.defs import App, Axiom, Lit, MutLam, Tuple
from verimim.ir.world import World
from verimim.phases.base import Program, walk
from verimim.interp.observe import Observation, observe
from verimim.smt.kernel_model import KernelPaths
from verimim.smt.kernel_queries import MAX_ARGC_FOR_RUN

CONFIRM_FUEL = 2_000_000  # steps of each confirming run (as a differential spec's run)
DEFAULT_ARGCS = (1, 2)  # what `verimim run prog` and `verimim run prog a` give main


def kernel_locs(kernel: MutLam, device: World, kp: KernelPaths | None = None) -> set[tuple[int | None, int | None]]:
    """Where a run's fault inside this kernel can be: its accesses and barriers on the paths
    explored (`kp`; None where the model could not explore it), and every operation of its code
    (the kernel's body, the continuations and functions it reaches), for a fault past the loop
    bound, on a path never explored."""
    sites = [a.site for p in kp.paths for a in p.accesses] + [b.site for p in kp.paths for b in p.barriers] \
        if kp is not None else []
    out = {_key(s.loc) for s in sites if s.loc is not None}
    return out | {_key(d.loc) for d in walk(device, [kernel])
                  if isinstance(d, App) and d.loc is not None and in_program(d.loc)}  # (not a plugin's type)


def _key(loc: Loc) -> tuple[int | None, int | None]:
    return (loc.line, loc.col)


def candidate_argcs(model_argc: int | None, hints: Iterable[int] = ()) -> list[int]:
    """The counterexample's own argc first (where `run` can give it), then the default ones,
    then the `hints` (argc_hints) that `run` can give."""
    first = [model_argc] if model_argc is not None and 1 <= model_argc <= MAX_ARGC_FOR_RUN else []
    return list(dict.fromkeys([*first, *DEFAULT_ARGCS, *(n for n in hints if 1 <= n <= MAX_ARGC_FOR_RUN)]))


MAX_HINTS = 6


def argc_hints(host: World) -> list[int]:
    """The argcs on either side of each literal the host compares with a computed value
    (`core.icmp.ug (argc, 2I32)`: 2 and 3), at most MAX_HINTS, smallest first: where the
    verifier cannot tie a kernel's arguments to argc (a value chosen on one branch), a run at
    the default argcs 1 and 2 may miss the fault that these thresholds switch on. Once per
    World (every untied launch of a program asks)."""
    return host.keep("confirm.argc_hints", lambda: _argc_hints(host))


def _argc_hints(host: World) -> list[int]:
    found: set[int] = set()
    for d in walk(host):
        if not (isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith(("core.icmp.", "core.ncmp."))):
            continue
        pair = d.arg
        if not (isinstance(pair, Tuple) and len(pair.ops) == 2):
            continue
        lits = [op.value for op in pair.ops if isinstance(op, Lit) and isinstance(op.value, int)]
        if len(lits) == 1 and 0 <= lits[0] <= MAX_ARGC_FOR_RUN:
            found |= {lits[0], lits[0] + 1}
    return sorted(n for n in found if n not in DEFAULT_ARGCS)[:MAX_HINTS]


@dataclass(frozen=True)
class ShownFault:
    """A run that shows the fault: its argc and what the interpreter reported."""
    argc: int
    fault: VerimimError


def confirming_run(program: Program, code: str, kernel: KernelPaths | MutLam, argcs: Iterable[int],
                   runs: dict[int, Observation] | None = None, launch: App | None = None) -> ShownFault | None:
    """The first run (by argc, schedule 0) of the program that stops with `code` in this
    kernel (its explored paths, or its mutable where the model could not explore it), in
    `launch` (a kernel launched twice may fault in the other launch only), else
    None. `runs`: the runs made so far, by argc (one run answers every code)."""
    kp, mut = (kernel, kernel.kernel) if isinstance(kernel, KernelPaths) else (None, kernel)
    locs = kernel_locs(mut, program.device or program.host, kp)
    runs = {} if runs is None else runs
    for argc in argcs:
        seen = run_with(program, argc, runs)
        fault = seen.fault
        if (seen.code == code and isinstance(fault, VerimimError) and fault.loc is not None
                and _key(fault.loc) in locs and _in_launch(fault, launch)):
            return ShownFault(argc, fault)
    return None


def run_with(program: Program, argc: int, runs: dict[int, Observation]) -> Observation:
    """The program's run with this argc (schedule 0), made once: `runs` holds those made so far,
    shared by every confirmation of one `check` (one run answers every code and operation)."""
    if argc not in runs:
        argv = ["prog", *["a"] * (argc - 1)]
        runs[argc] = observe(program.host, argv, device=program.device, fuel=CONFIRM_FUEL, crash_ok=True)
    return runs[argc]


def chain_keys(d: App) -> set[tuple[int | None, int | None]]:
    """The places of an application and of every partial application it extends: a run names
    the one it evaluated (`gpu.launch … k args`, before the memory tokens, for a launch)."""
    out: set[tuple[int | None, int | None]] = set()
    x: object = d
    while isinstance(x, App):
        if x.loc is not None:
            out.add(_key(x.loc))
        x = x.callee
    return out


def _in_launch(fault: VerimimError, launch: App | None) -> bool:
    """Whether the fault happened in `launch`, as far as the run names its launch (a fault
    without the note is not told apart). The run names the application it evaluated, which
    may be a partial one (`gpu.launch … k args`, before the memory tokens): any application
    of the launch's chain is the launch."""
    named = {_key(r.loc) for r in fault.related if r.message == LAUNCHED_HERE and r.loc is not None}
    if launch is None or not named:
        return True
    return not chain_keys(launch).isdisjoint(named)
