"""The kernel verifier against the interpreter: `check`'s race and divergence verdicts must
agree with what `run` finds.

`run` sees one input and a few schedules; `check` claims all of them. So:

- `run` reports `E-RACE` / `E-BARRIER-DIVERGENCE` → `check` must refute (a race or divergence
  verdict `refuted`, or the same code among its diagnostics): else a *missed* defect;
- `check` proves everything → `run` must be clean of those codes (the same condition seen from
  the other side);
- a refutation whose counterexample carries a `verimim run` command must reproduce: that
  command's run reports the code;
- on a program known to be race- and divergence-free (a generated one without a defect), a
  refutation is a *false alarm*.

`unknown` and `bounded` verdicts are counted, never taken as proofs.
"""
from __future__ import annotations

import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KERNEL_CODES = ("E-RACE", "E-BARRIER-DIVERGENCE")


@dataclass
class KernelVerdicts:
    """What `check` said about the kernels of one program."""

    entries: list[dict[str, Any]]
    codes: set[str]

    def refutes(self, code: str) -> bool:
        key = "races" if code == "E-RACE" else "divergence"
        return code in self.codes or any(e[key] == "refuted" for e in self.entries)

    def statuses(self) -> Counter[str]:
        return Counter(e[k] for e in self.entries for k in ("races", "divergence"))


@dataclass
class OracleResult:
    ok: bool = True
    kind: str = ""  # missed | false-alarm | reproducer | internal; "rejected" (not compared) when ok
    message: str = ""
    check: KernelVerdicts | None = None
    run_codes: set[str] = field(default_factory=set)
    time_s: float = 0.0
    check_s: float = 0.0  # of which check's kernel verification (the pipeline included)

    def fail(self, kind: str, message: str) -> OracleResult:
        self.ok, self.kind, self.message = False, kind, message
        return self


def kernel_verdicts(path: str, timeout_ms: int = 5_000) -> KernelVerdicts:
    """`check`'s kernel part on a program file (the pipeline without its phase proofs, which
    other oracles cover; the kernels are verified on the same device World either way)."""
    from verimim.driver import load, run_with_big_stack
    from verimim.phases.runner import run_pipeline
    from verimim.smt.kernel_verify import verify_kernels

    def go() -> KernelVerdicts:
        world, _ = load(path, [])
        run = run_pipeline(world, verify=False, timeout_ms=timeout_ms)
        if run.stopped:
            return KernelVerdicts([], {d.code for d in run.diagnostics if d.severity == "error"})
        rep = verify_kernels(run.program, run.ctx, path)
        return KernelVerdicts(rep.entries, {d.code for d in rep.diagnostics if d.severity == "error"})

    return run_with_big_stack(go)


def run_codes(path: str, args: list[str], schedules: int = 2) -> set[str]:
    """The kernel codes `run` reports for these arguments under `schedules` schedules."""
    from verimim import driver

    codes: set[str] = set()
    for seed in range(schedules):
        rep = driver.run(path, [], args, seed=seed)
        codes |= {d.code for d in rep.diagnostics if d.severity == "error" and d.code in KERNEL_CODES}
    return codes


def _command_args(cmd: str) -> tuple[list[str], int]:
    """The arguments and schedule of a `verimim run FILE ARGS... --schedule N` line."""
    words = shlex.split(cmd)
    schedule = 0
    if "--schedule" in words:
        k = words.index("--schedule")
        schedule = int(words[k + 1])
        del words[k:k + 2]
    return words[3:], schedule


def reproduces(path: str, cmd: str, code: str) -> bool:
    from verimim import driver

    args, schedule = _command_args(cmd)
    rep = driver.run(path, [], args, seed=schedule)
    return any(d.code == code for d in rep.diagnostics)


def compare(path: str, args_list: list[list[str]], race_free: bool | None = None,
            schedules: int = 2, timeout_ms: int = 5_000) -> OracleResult:
    """Check's kernel verdicts on `path` against runs with each argument list."""
    t0 = time.perf_counter()
    res = OracleResult()
    try:
        res.check = verdicts = kernel_verdicts(path, timeout_ms)
        res.check_s = time.perf_counter() - t0
        if not verdicts.entries and verdicts.codes:
            # A phase rejected the program before any kernel was verified: nothing to compare
            # (other oracles judge the rejection).
            res.kind = "rejected"
            return res
        for args in args_list:
            got = run_codes(path, args, schedules)
            res.run_codes |= got
            for code in got:
                if not verdicts.refutes(code):
                    return res.fail("missed", f"run {' '.join(args)} reports {code}; check says "
                                    f"{dict(verdicts.statuses())}")
        if race_free and any(verdicts.refutes(c) for c in KERNEL_CODES):
            return res.fail("false-alarm", f"check refutes a program without races or divergence: "
                            f"{[(e['name'], e['races'], e['divergence']) for e in verdicts.entries]}")
        for e in verdicts.entries:
            cex = e.get("counterexample") or {}
            for part in ([cex] + [v for v in cex.values() if isinstance(v, dict)]):
                cmd = part.get("run") if isinstance(part, dict) else None
                if not cmd:
                    continue
                code = "E-RACE" if e["races"] == "refuted" else "E-BARRIER-DIVERGENCE"
                if "barriers" in part:
                    code = "E-BARRIER-DIVERGENCE"
                if not reproduces(path, cmd, code):
                    return res.fail("reproducer", f"`{cmd}` does not report {code}")
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a crash is a failure of the verifier, never a pass
        return res.fail("internal", f"{type(e).__name__}: {e}")
    finally:
        res.time_s = time.perf_counter() - t0
    return res


@dataclass
class CampaignStats:
    programs: int = 0
    kernels: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    refuted_programs: int = 0
    false_alarms: int = 0
    race_free_programs: int = 0
    failures: list[str] = field(default_factory=list)
    time_s: float = 0.0
    by_defect: Counter[str] = field(default_factory=Counter)
    slowest: tuple[float, str] = (0.0, "")  # seconds of check + runs, and the program
    check_s: list[float] = field(default_factory=list)  # check's kernel part per program


def campaign(budget_s: float, seed: int = 0, workdir: str | None = None) -> CampaignStats:
    """Generated kernels (`fuzz.strategies`) for `budget_s` seconds: race-free ones and ones with
    an injected race or divergence, each compared by `compare`."""
    import tempfile

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from verimim.fuzz.strategies import programs

    out = Path(workdir or tempfile.mkdtemp(prefix="verimim-kernel-oracle-"))
    stats = CampaignStats()
    start = time.monotonic()

    class _Over(Exception):
        pass

    def _one(prog: Any, defect: str | None) -> None:
        path = prog.write(out, f"p{stats.programs}")
        stats.programs += 1
        stats.by_defect[defect or "none"] += 1
        race_free = defect is None and not prog.expected_codes
        res = compare(str(path), [list(prog.args)], race_free=race_free)
        if res.time_s > stats.slowest[0]:
            stats.slowest = (res.time_s, str(path))
        stats.check_s.append(res.check_s)
        if res.check is not None:
            stats.kernels += len(res.check.entries)
            stats.statuses.update(res.check.statuses())
            if any(res.check.refutes(c) for c in KERNEL_CODES):
                stats.refuted_programs += 1
        stats.race_free_programs += race_free
        if not res.ok:
            stats.false_alarms += res.kind == "false-alarm"
            stats.failures.append(f"{path}: {res.kind}: {res.message[:300]}")
        else:
            path.unlink()

    # Half of the budget on race-free programs, a quarter each on injected races and divergence;
    # one Hypothesis run per kind (a draw must not depend on state outside the test).
    shares: list[tuple[str | None, float]] = [(None, 0.5), ("race", 0.25), ("divergence", 0.25)]
    for defect, share in shares:
        until = time.monotonic() + budget_s * share

        @hseed(seed)
        @settings(database=None, deadline=None, max_examples=10 ** 6, suppress_health_check=list(HealthCheck),
                  phases=[Phase.generate])
        @given(programs(defect=defect))
        def one(prog: Any) -> None:
            if time.monotonic() > until:
                raise _Over()
            _one(prog, defect)

        try:
            one()
        except _Over:
            pass
    stats.time_s = time.monotonic() - start
    return stats
