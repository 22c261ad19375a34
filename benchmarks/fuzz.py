"""Fuzzer throughput and program sizes: programs generated and fully checked per second
(render, re-parse, pipeline with every phase's specification, interpreter on the source under
two schedules and after every phase), and the distribution of operations, kernels and launches.

    python benchmarks/fuzz.py [--seconds 30] [--no-verify]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verimim.fuzz.strategies import run_campaign  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-verify", action="store_true")
    a = ap.parse_args()
    res = run_campaign(a.seconds, seed=a.seed, verify=not a.no_verify, max_failures=10 ** 6)
    print(f"{res.programs} programs in {res.seconds:.1f} s: {res.per_second:.2f} programs/s "
          f"({'with' if not a.no_verify else 'without'} Z3 specifications), {len(res.failures)} failures")
    print(f"{'measure':<12}{'min':>6}{'median':>8}{'mean':>8}{'p90':>6}{'max':>6}")
    for i, name in enumerate(("operations", "kernels", "launches")):
        xs = sorted(s[i] for s in res.sizes) or [0]
        p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
        print(f"{name:<12}{xs[0]:>6}{statistics.median(xs):>8.1f}{statistics.mean(xs):>8.1f}{p90:>6}{xs[-1]:>6}")


if __name__ == "__main__":
    main()
