"""What the type check of every phase's output (verimim.ir.typecheck, run by `check` before each
specification) costs, and that it finds nothing on valid programs.

    python benchmarks/typecheck.py [GLOB ...]     (default: the corpus and the shared programs)

For each program that loads: the pipeline without specifications (what `check` runs before
them), then `ill_typed_output` on every phase result. Prints the median per program of both, the
type check's share of the sum, the number of phase outputs checked and of ill-typed ones (each
named: on a valid program it is a phase bug or a gap in the checker's rules), and the peak
resident memory. Baseline: the pipeline itself (the ratio is the check's added cost; `check`
also runs the specifications, so its share of a whole `check` is smaller).
"""
from __future__ import annotations

import glob
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT = [str(ROOT / "tests" / "programs" / "**" / "*.mim"), str(ROOT.parent / "shared" / "*" / "*.mim")]


def measure(path: str) -> tuple[float, float, int, list[str]]:
    """(pipeline seconds, type-check seconds, outputs checked, ill-typed findings)."""
    from verimim.frontend.loader import load_program
    from verimim.phases.runner import ill_typed_output, run_pipeline

    world, _ = load_program(path, [])
    t0 = time.perf_counter()
    run = run_pipeline(world, verify=False)
    t1 = time.perf_counter()
    found, checked = [], 0
    for res in run.results:
        if res.skipped is None and not res.rejected:
            checked += 1
            ill = ill_typed_output(res)
            if ill is not None:
                found.append(f"{res.label}: {ill['detail'][:300]}")
    return t1 - t0, time.perf_counter() - t1, checked, found


def main() -> None:
    from verimim.diagnostics import VerimimError
    from verimim.driver import run_with_big_stack

    patterns = sys.argv[1:] or DEFAULT
    files = sorted({f for p in patterns for f in glob.glob(p, recursive=True)})
    pipe, tc, outputs, bad, skipped = [], [], 0, 0, 0
    for f in files:
        try:
            p, t, n, found = run_with_big_stack(lambda: measure(f))
        except VerimimError:
            skipped += 1  # (a program that does not load or whose pipeline stops: nothing to check)
            continue
        pipe.append(p)
        tc.append(t)
        outputs += n
        for line in found:
            bad += 1
            print(f"ILL-TYPED {f}: {line}")
    if not pipe:
        print("no program loaded")
        return
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(pipe)} programs ({skipped} not loaded), {outputs} phase outputs checked, {bad} ill-typed")
    print(f"pipeline (baseline)  median {statistics.median(pipe) * 1000:7.1f} ms  total {sum(pipe):6.1f} s")
    print(f"type check           median {statistics.median(tc) * 1000:7.1f} ms  total {sum(tc):6.1f} s")
    print(f"ratio type check / pipeline: {sum(tc) / sum(pipe):.2f}; peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
