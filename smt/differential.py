"""Differential execution for the specifications: the program before and after a phase, run on
the reference interpreter with the same inputs, must be observably the same.

One observation (`observe`) and one comparison (`compare`) serve every spec that validates by
execution (compile.beta_red / lam_spec where the β proof does not apply, gpu.split_apply's
lifted captures, buffer.lower_ptr's final check). What is observed:

- the result, or the fault code (or, for an output the interpreter cannot even run, "crash");
- the warning codes;
- the final host heap (the bytes of every live heap block in address space 0);
- optionally, the state-changing effects executed, counted by axiom: every operation on a
  memory token except those that only observe memory (their count depends on where the
  interpreter schedules them, not on the program's meaning). A phase that replaces operations
  by others (a lowering) is compared without them.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verimim.phases.base import PhaseResult, Program
from verimim.smt.solver import Outcome

DIFF_FUEL = 2_000_000  # steps of each differential run
ARGVS: tuple[list[str], ...] = (["prog"], ["prog", "1"])  # argc = 1 and argc = 2

# Operations that only observe memory: how often the interpreter performs them depends on where
# it schedules them (`Scopes.avail`), not on the program's meaning; what they read is compared
# through the result, and a read that faults through the fault code.
OBSERVERS = frozenset({"mem.load"})


@dataclass(frozen=True)
class Observation:
    result: tuple[str, Any]         # ("ok", value) | ("fault", code) | ("crash", exception name)
    warnings: tuple[str, ...]
    heap: tuple[bytes, ...]         # the final host heap's blocks, sorted
    effects: Counter[str] | None    # executed effects by axiom (None: not traced, or the run faulted)


def _has_token(args: list[Any]) -> bool:
    from verimim.interp.values import Token

    for a in args:
        if isinstance(a, Token):
            return True
        if isinstance(a, tuple) and any(isinstance(x, Token) for x in a):
            return True
    return False


def _trace(machine: Any, effects: Counter[str]) -> None:
    """Count every operation on a memory token that changes state (writes, allocations, frees,
    copies, launches, synchronisations, stream operations) that the machine runs, by axiom.
    (Not by location: operations the World makes while β-reducing an immutable lambda have
    none, and the interpreter makes such copies itself when it applies one.)"""
    def wrap(annex: str, fn: Any) -> Any:
        def run(m: Any, th: Any, args: list[Any], node: Any) -> Any:
            if _has_token(args):
                effects[annex] += 1
            return fn(m, th, args, node)
        return run

    for annex, (arity, fn) in list(machine.semantics.items()):
        if annex not in OBSERVERS:
            machine.semantics[annex] = (arity, wrap(annex, fn))


def observe(prog: Program, argv: list[str], effects: bool = True) -> Observation:
    """What one run of prog's main with argv shows."""
    from verimim.interp.machine import Machine, find_main
    from verimim.interp.values import RuntimeFault

    traced: Counter[str] = Counter()
    m = Machine(prog.host, fuel=DIFF_FUEL, device=prog.device)
    if effects:
        _trace(m, traced)

    def heap() -> tuple[bytes, ...]:
        return tuple(sorted(bytes(b.data) for b in m.memory.blocks.values() if b.space == 0 and b.kind == "heap"))

    def warnings() -> tuple[str, ...]:
        return tuple(sorted(w.code for w in m.warnings))

    try:
        value: Any = m.run_main(find_main(prog.host), argv)
    except RuntimeFault as e:
        return Observation(("fault", e.code), warnings(), heap(), None)
    except Exception as e:  # noqa: BLE001 — an ill-formed output can stop the interpreter itself
        return Observation(("crash", type(e).__name__), warnings(), (), None)
    return Observation(("ok", value), warnings(), heap(), traced if effects else None)


def compare(res: PhaseResult, argvs: Sequence[list[str]] = ARGVS, effects: bool = True) -> tuple[Outcome | None, str]:
    """A refutation (or `unknown` where the input cannot be run) when the program after the
    phase is observably different from before, for some argv; else None and what was seen."""
    seen = []
    for argv in argvs:
        a, b = observe(res.before, argv, effects), observe(res.after, argv, effects)
        where = f"with argc = {len(argv)}"
        if a.result == ("fault", "E-UNSUPPORTED") and b.result != a.result:
            return Outcome("unknown", f"differential execution {where} is inconclusive: the interpreter "
                           f"cannot run the input (E-UNSUPPORTED); after the phase: {b.result}"), ""
        if a.result != b.result:
            return Outcome("refuted", f"differential execution {where}: {a.result} before, {b.result} after",
                           {"argc": len(argv), "before": a.result, "after": b.result}), ""
        if a.warnings != b.warnings:
            return Outcome("refuted", f"differential execution {where}: warnings {list(a.warnings)} before, "
                           f"{list(b.warnings)} after",
                           {"argc": len(argv), "before": list(a.warnings), "after": list(b.warnings)}), ""
        if a.effects is not None and b.effects is not None and a.effects != b.effects:
            lost = sorted((a.effects - b.effects).items())[:5]
            extra = sorted((b.effects - a.effects).items())[:5]
            return Outcome("refuted", f"differential execution {where}: the executed memory effects differ "
                           f"(only before: {lost}; only after: {extra})",
                           {"argc": len(argv), "only_before": lost, "only_after": extra}), ""
        if a.heap != b.heap:
            return Outcome("refuted", f"differential execution {where}: the final host heap differs",
                           {"argc": len(argv), "before": [x.hex() for x in a.heap][:4],
                            "after": [x.hex() for x in b.heap][:4]}), ""
        what = a.result[1] if a.result[0] == "ok" else f"fault {a.result[1]}"
        seen.append(f"argc = {len(argv)}: {what}" + (f", {sum(a.effects.values())} state-changing effects"
                                                     if a.effects else ""))
    return None, "; ".join(seen)
