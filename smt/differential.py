"""Differential execution for the specifications: the program before and after a phase, run on
the reference interpreter with the same inputs, must be observably the same.

One comparison (`compare`) serves every spec that validates by execution (compile.beta_red /
lam_spec where the β proof does not apply, gpu.split_apply's lifted captures, buffer.lower_ptr's
final check). What a run shows, and in what two runs differ, is verimim.interp.observe's — the
same observation `verimim diff` and the fuzz oracle compare: the result or fault, the warnings,
optionally the state-changing effects, the final host heap and the output. A phase that
replaces operations by others (a lowering) is compared without effects.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from verimim.interp.observe import Observation, differences, observe
from verimim.phases.base import PhaseResult, Program
from verimim.smt.solver import Outcome

DIFF_FUEL = 2_000_000  # steps of each differential run
# argc = 1, 2 and 3: a wrong phase whose program agreed on 1 and 2 only passed (mutation tests:
# a capture passed in the wrong order, two of them equal for argc 1 and 2)
ARGVS: tuple[list[str], ...] = (["prog"], ["prog", "1"], ["prog", "1", "2"])
# Faults that say the interpreter could not run the program at all, not what it does.
CANNOT_RUN = frozenset({"E-UNSUPPORTED", "E-NAME", "E-INTERNAL"})


def run(prog: Program, argv: list[str], effects: bool) -> Observation:
    """One run of prog for a spec: a crash of the interpreter on an ill-formed output is an
    observation (it differs from the input's), not an error of verimim."""
    return observe(prog.host, argv, device=prog.device, fuel=DIFF_FUEL, effects=effects, crash_ok=True)


def hinted_argvs(res: PhaseResult) -> list[list[str]]:
    """ARGVS, then an argv for each argc either side of a literal the program (before or after
    the phase) compares a value with (smt.kernel_confirm.argc_hints): `core.icmp.e (argc, 3I32)`
    switches at 3, which argc 1 and 2 never reach."""
    from verimim.smt.kernel_confirm import argc_hints

    hints = sorted({n for w in (res.before.host, res.after.host) for n in argc_hints(w)})
    return [*ARGVS, *(["prog", *["x"] * (n - 1)] for n in hints if n > len(ARGVS))]


def compare(res: PhaseResult, argvs: Sequence[list[str]] = ARGVS, effects: bool = True) -> tuple[Outcome | None, str]:
    """A refutation (or `unknown` where the input cannot be run) when the program after the
    phase is observably different from before, for some argv; else None and what was seen."""
    seen = []
    # A phase of a sub-pipeline is judged on its side (smt.sides), but one side alone is no
    # program to run (the host's kernels are declarations, the device has no main): both runs
    # stopped alike, and any change of the side passed as "the same execution". The whole
    # program runs, the other side as it was (smt.sides.other_side_changed checks that).
    whole = res.whole or res
    for argv in argvs:
        a, b = run(whole.before, argv, effects), run(whole.after, argv, effects)
        where = f"with argc = {len(argv)}"
        diff = differences(a, b)
        if a.result[0] == "fault" and a.result[1] in CANNOT_RUN:
            # (also where both stop so, alike or at different places: neither run says what the
            # program does, so their agreement is no evidence)
            return Outcome("unknown", f"differential execution {where} is inconclusive: the interpreter "
                           f"cannot run the input ({a.result[1]}); after the phase: {b.result}"), ""
        if diff:
            return _refuted(diff[0], a, b, where, len(argv)), ""
        what = a.result[1] if a.ok else f"fault {a.result[1]}"
        n_effects = sum(n for _, n in a.effects or ())
        seen.append(f"argc = {len(argv)}: {what}" + (f", {n_effects} state-changing effects" if n_effects else ""))
    return None, "; ".join(seen)


def _refuted(aspect: str, a: Observation, b: Observation, where: str, argc: int) -> Outcome:
    """The refutation for the first aspect in which the runs differ, with what each run showed."""
    if aspect == "result":
        return Outcome("refuted", f"differential execution {where}: {a.result} before, {b.result} after",
                       {"argc": argc, "before": a.result, "after": b.result})
    if aspect == "warnings":
        return Outcome("refuted", f"differential execution {where}: warnings {list(a.warnings or ())} before, "
                       f"{list(b.warnings or ())} after",
                       {"argc": argc, "before": list(a.warnings or ()), "after": list(b.warnings or ())})
    if aspect == "effects":
        ea, eb = Counter(dict(a.effects or ())), Counter(dict(b.effects or ()))
        lost, extra = sorted((ea - eb).items())[:5], sorted((eb - ea).items())[:5]
        return Outcome("refuted", f"differential execution {where}: the executed memory effects differ "
                       f"(only before: {lost}; only after: {extra})",
                       {"argc": argc, "only_before": lost, "only_after": extra})
    if aspect == "heap":
        return Outcome("refuted", f"differential execution {where}: the final host heap differs",
                       {"argc": argc, "before": [x.hex() for x in a.heap or ()][:4],
                        "after": [x.hex() for x in b.heap or ()][:4]})
    return Outcome("refuted", f"differential execution {where}: the program prints something else",
                   {"argc": argc, "before": (a.output or b"").decode(errors="replace")[:200],
                    "after": (b.output or b"").decode(errors="replace")[:200]})
