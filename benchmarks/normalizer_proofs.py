"""Cost of proving the `core` normalizers (verimim/smt/normalizer_proofs.py): for every
(normalizer, width) the Z3 time (inside solver calls) and the wall time of the whole proof
(symbolic execution, encoding, samples included), then the median and the slowest, and totals.

    python benchmarks/normalizer_proofs.py [--family wrap] [--timeout-ms 10000] [--brief]

With --brief only the cases that are not proved, or whose Z3 time is above 50 ms, are listed
one by one; the summary always covers every case.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from verimim.smt.normalizer_proofs import (
    DEFAULT_TIMEOUT_MS,
    CaseResult,
    cases,
    plugin_world,
    prove,
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", help="only core.FAMILY.* (wrap, div, bit2, ...)")
    ap.add_argument("--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS, help="per Z3 query")
    ap.add_argument("--brief", action="store_true", help="list only slow or unproved cases")
    a = ap.parse_args()
    plugin_world()  # loading the plugins is not part of any proof
    todo = [c for c in cases() if a.family is None or c.family == a.family]
    results: list[tuple[CaseResult, float]] = []
    t_all = time.perf_counter()
    print(f"{'normalizer':<22}{'width':<16}{'status':<9}{'complete':<10}{'queries':>8}"
          f"{'Z3 ms':>9}{'slowest ms':>12}{'wall ms':>9}")
    for case in todo:
        t0 = time.perf_counter()
        r = prove(case, timeout_ms=a.timeout_ms)
        wall = time.perf_counter() - t0
        results.append((r, wall))
        slowest = r.slowest
        if not a.brief or r.status != "proved" or r.z3_s > 0.05:
            print(f"{case.annex:<22}{case.label:<16}{r.status:<9}{'yes' if r.complete else 'no':<10}"
                  f"{len(r.queries):>8}{r.z3_s * 1000:>9.1f}{(slowest.z3_s if slowest else 0) * 1000:>12.1f}"
                  f"{wall * 1000:>9.1f}")
    total_wall = time.perf_counter() - t_all
    summary(results, total_wall)


def summary(results: list[tuple[CaseResult, float]], total_wall: float) -> None:
    z3_times = [r.z3_s for r, _ in results]
    walls = [w for _, w in results]
    by_status: dict[str, int] = defaultdict(int)
    for r, _ in results:
        by_status[r.status] += 1
    slowest_case, slowest_wall = max(results, key=lambda rw: rw[0].z3_s)
    queries = [(q, r.case) for r, _ in results for q in r.queries]
    q, q_case = max(queries, key=lambda qc: qc[0].z3_s)
    print()
    print(f"cases: {len(results)}  " + "  ".join(f"{k}: {v}" for k, v in sorted(by_status.items())))
    print(f"Z3 per case: median {statistics.median(z3_times) * 1000:.1f} ms, "
          f"slowest {slowest_case.case} {slowest_case.z3_s * 1000:.0f} ms (wall {slowest_wall * 1000:.0f} ms)")
    print(f"slowest query: {q_case} [{q.kind}: {q.application}] {q.z3_s * 1000:.0f} ms")
    print(f"wall per case: median {statistics.median(walls) * 1000:.1f} ms")
    print(f"total: Z3 {sum(z3_times):.2f} s, wall {total_wall:.2f} s")
    per_family: dict[str, float] = defaultdict(float)
    for r, w in results:
        per_family[r.case.family] += w
    print("wall by family: " + ", ".join(f"{f} {t:.1f} s" for f, t in sorted(per_family.items(), key=lambda x: -x[1])))


if __name__ == "__main__":
    main()
