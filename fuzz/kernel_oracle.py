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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KERNEL_CODES = ("E-RACE", "E-BARRIER-DIVERGENCE")


def kernel_summary(verdicts: dict[str, int], programs: int, false_alarms: int) -> dict[str, Any]:
    """`fuzz --json`'s `kernels`: the kernels verified (each has a races and a divergence
    verdict), their verdicts by status, the programs whose kernels were verified, and the false
    alarms among the failures (shared by the plain run and a campaign's run)."""
    return {"kernels": sum(verdicts.values()) // 2, "verdicts": dict(sorted(verdicts.items())),
            "programs": programs, "false_alarms": false_alarms}


def is_false_alarm(phase: str, kind: str) -> bool:
    """Whether a failure is the kernel verifier's false alarm (a race or divergence on a
    program whose runs found none)."""
    return phase == "kernels" and kind == "false-positive"


@dataclass
class KernelVerdicts:
    """What `check` said about the kernels of one program."""

    entries: list[dict[str, Any]]
    codes: set[str]
    rejected: bool = False  # a phase rejected the program: no kernel or stream was verified
    # The statuses of the stream verdicts a program without a launch has as notes only
    # (verimim.verdicts.from_stream_diagnostics): no entry carries them.
    stream_notes: tuple[str, ...] = ()

    @staticmethod
    def of(entries: list[dict[str, Any]], diagnostics: list[Any]) -> KernelVerdicts:
        """From a kernel report's entries and diagnostics."""
        from verimim.verdicts import from_stream_diagnostics

        return KernelVerdicts(entries, {d.code for d in diagnostics if d.severity == "error"},
                              stream_notes=tuple(v.status for v in from_stream_diagnostics(diagnostics, launches=bool(entries))))

    def refutes(self, code: str) -> bool:
        return code in self.codes or self._has(code, "refuted")

    def bounded(self, code: str) -> bool:
        """Whether some kernel's verdict for `code` is `bounded` (paths were cut)."""
        return self._has(code, "bounded")

    def _has(self, code: str, status: str) -> bool:
        """Whether some kernel's verdict for `code` (races or divergence) has this status."""
        key = "races" if code == "E-RACE" else "divergence"
        return any(e[key] == status for e in self.entries) or (code == "E-RACE" and status in self.stream_notes)

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
            return KernelVerdicts([], {d.code for d in run.diagnostics if d.severity == "error"}, rejected=True)
        rep = verify_kernels(run.kernels_program, run.ctx, path, earlier=run.earlier)
        return KernelVerdicts.of(rep.entries, rep.diagnostics)

    return run_with_big_stack(go)


def _run_file(path: str, args: list[str], seed: int) -> set[str]:
    """The codes `verimim run path args --schedule seed` reports."""
    from verimim import driver

    return {d.code for d in driver.run(path, [], args, seed=seed).diagnostics}


def run_codes(path: str, args: list[str], schedules: int = 2) -> set[str]:
    """The kernel codes `run` reports for these arguments under `schedules` schedules."""
    return {c for seed in range(schedules) for c in _run_file(path, args, seed) if c in KERNEL_CODES}


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
    return code in _run_file(path, *_command_args(cmd))


def judge(verdicts: KernelVerdicts, run_codes: set[str], race_free: bool,
          reproduce: Callable[[list[str], int], set[str]], past_bound: bool = False) -> tuple[str, str] | None:
    """(failure kind, message) where check's kernel verdicts disagree with what the runs found,
    else None. `reproduce(args, schedule)` runs the program and gives the codes it reports.

    `past_bound`: the program may put its defect after a loop longer than the unrolling bound
    (the generator knows): there a `bounded` verdict is the honest one, and only the absence of
    any `bounded` verdict for that code (a `proved` claim) is a miss."""
    for code in sorted(run_codes & set(KERNEL_CODES)):
        if verdicts.refutes(code) or (past_bound and verdicts.bounded(code)):
            continue
        return "missed", f"run reports {code}; check says {dict(verdicts.statuses())}"
    if race_free and any(verdicts.refutes(c) for c in KERNEL_CODES):
        return "false-alarm", (f"check refutes a program without races or divergence: "
                               f"{[(e['name'], e['races'], e['divergence']) for e in verdicts.entries]}")
    if "E-STREAM" in verdicts.codes and "E-STREAM" not in run_codes:
        # (the host model's stream states against the runs': no run of a program check says
        # misuses a stream reports it)
        return "false-alarm", "check reports E-STREAM, an operation on an ended stream, which no run reports"
    for e in verdicts.entries:
        for part in counterexample_parts(e):
            cmd = part.get("run")
            if not cmd:
                continue
            shown = part.get("shown_by_run")  # a refutation a run confirmed names its code
            code = (shown["code"] if isinstance(shown, dict) else
                    "E-BARRIER-DIVERGENCE" if "barriers" in part or e["races"] != "refuted" else "E-RACE")
            args, schedule = _command_args(cmd)
            if code not in reproduce(args, schedule):
                return "reproducer", f"`{cmd}` does not report {code}"
    return None


def counterexample_parts(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A kernel entry's counterexample and the counterexamples nested in it (a race's and a
    divergence's), each of which may carry its own `run` line."""
    cex = entry.get("counterexample") or {}
    return [cex, *(v for v in cex.values() if isinstance(v, dict))]


def compare(path: str, args_list: list[list[str]], race_free: bool | None = None,
            schedules: int = 2, timeout_ms: int = 5_000) -> OracleResult:
    """Check's kernel verdicts on the program file `path` against runs with each argument list
    (the oracle of `check_generated`'s "kernels" stage, on a file)."""
    t0 = time.perf_counter()
    res = OracleResult()
    try:
        res.check = verdicts = kernel_verdicts(path, timeout_ms)
        res.check_s = time.perf_counter() - t0
        if verdicts.rejected:
            # A phase rejected the program before any kernel was verified: nothing to compare
            # (other oracles judge the rejection). A program that launches no kernel has no
            # entries either, but its streams were verified: its E-RACEs are compared.
            res.kind = "rejected"
            return res
        for args in args_list:
            res.run_codes |= run_codes(path, args, schedules)
        bad = judge(verdicts, res.run_codes, bool(race_free), lambda args, seed: _run_file(path, args, seed))
        if bad is not None:
            return res.fail(*bad)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a crash is a failure of the verifier, never a pass
        return res.fail("internal", f"{type(e).__name__}: {e}")
    finally:
        res.time_s = time.perf_counter() - t0
    return res
