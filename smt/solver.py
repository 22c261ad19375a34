"""Running Z3 queries for specifications: a time-out per query, SMT-LIB export, honest outcomes.

A query that times out (or that Z3 cannot decide) is `unknown`, never `proved`. Every query can
be written out as SMT-LIB 2 (`--emit-smt2 DIR`) so that any solver can re-check it.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verimim.smt import z3_threads

if TYPE_CHECKING:  # z3 is imported when a query runs: the GPU machine has no z3
    import z3

DEFAULT_TIMEOUT_MS = 10_000


@dataclass
class Outcome:
    status: str  # spec/CLI.md: "proved" | "bounded" | "validated" | "refuted" | "unknown" | "skipped"
    detail: str = ""
    counterexample: Any = None
    time_s: float = 0.0
    z3_s: float = 0.0


@dataclass
class SpecContext:
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    emit_dir: Path | None = None
    queries: int = 0
    z3_s: float = 0.0
    slowest: tuple[float, str] = (0.0, "")
    files: list[Path] = field(default_factory=list)

    def solver(self) -> z3.Solver:
        import z3

        z3_threads.install()
        z3_threads.drain()
        s = z3.Solver()
        s.set("timeout", self.timeout_ms)
        return s

    def check(self, s: z3.Solver, label: str) -> z3.CheckSatResult:
        """Run one query (written out first when asked), timing it."""
        self.queries += 1
        path = None
        if self.emit_dir is not None:
            self.emit_dir.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
            path = self.emit_dir / f"{self.queries:03d}_{name}.smt2"
            path.write_text(f"; {label}\n" + s.to_smt2(), encoding="utf-8")
            self.files.append(path)
        z3_threads.drain()  # between Z3 calls: what other threads' collections left
        t0 = time.perf_counter()
        r = s.check()
        dt = time.perf_counter() - t0
        if path is not None and str(r) in ("sat", "unsat"):
            # SMT-LIB's own way to say what the answer was, so a re-check can compare.
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("(set-info :status unknown)", f"(set-info :status {r})", 1),
                            encoding="utf-8")
        self.z3_s += dt
        if dt > self.slowest[0]:
            self.slowest = (dt, label)
        return r


def verdict_unsat_means_proved(ctx: SpecContext, s: z3.Solver, label: str) -> tuple[str, z3.ModelRef | None]:
    """A query asking for a violation: unsat → proved, sat → refuted (with the model), else unknown."""
    import z3

    r = ctx.check(s, label)
    if r == z3.unsat:
        return "proved", None
    if r == z3.sat:
        return "refuted", s.model()
    return "unknown", None
