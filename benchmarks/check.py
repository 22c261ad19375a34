"""`verimim check` cost per example: wall time of the whole command (process start included,
median of several runs) and Z3 time per phase, with the slowest query.

    python benchmarks/check.py [--runs 5]

Aim of the issue: under 2 s per example and under 100 ms of Z3 per phase at the median. It
also prints `gpu.remove_double_syncs`'s verdict and time on every program (issue 11: the
three-level tree reductions, looped and unrolled, `proved` in at most 1 s each).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT.parent / "shared" / "examples"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    valid = ROOT / "tests" / "programs" / "valid"
    files = sorted(EXAMPLES.glob("*.mim")) + sorted(valid.glob("*.mim"))[:6] + sorted(valid.glob("tree_reduction_*.mim"))
    syncs: list[tuple[str, str, float]] = []
    per_phase: dict[str, list[float]] = defaultdict(list)
    slowest = (0.0, "", "")
    walls = []
    print(f"{'program':<30}{'wall median s':>14}{'exit':>6}{'Z3 s':>8}{'queries':>9}")
    for f in files:
        times, last = [], None
        for _ in range(a.runs):
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "verimim.cli", "check", str(f), "--json"],
                               capture_output=True, text=True, cwd=ROOT)
            times.append(time.perf_counter() - t0)
            last = p
        assert last is not None
        data = json.loads(last.stdout)
        for ph in data.get("phases", []):
            if "z3_s" in ph:
                per_phase[ph["name"]].append(ph["z3_s"])
            if ph["name"] == "gpu.remove_double_syncs":
                syncs.append((f.name, ph["status"], ph["time_s"]))
        z3 = data.get("z3", {})
        if z3.get("slowest", {}).get("time_s", 0) > slowest[0]:
            slowest = (z3["slowest"]["time_s"], z3["slowest"]["query"], f.name)
        med = statistics.median(times)
        walls.append(med)
        print(f"{f.name:<30}{med:>14.3f}{last.returncode:>6}{z3.get('time_s', 0):>8.3f}{z3.get('queries', 0):>9}")
    print(f"\nmedian wall time over {len(files)} programs: {statistics.median(walls):.3f} s (aim: < 2 s)")
    print(f"\n{'phase':<36}{'Z3 median ms':>14}{'Z3 max ms':>12}")
    for name, xs in per_phase.items():
        print(f"{name:<36}{statistics.median(xs) * 1000:>14.2f}{max(xs) * 1000:>12.2f}")
    print(f"\nslowest query: {slowest[0] * 1000:.1f} ms, {slowest[1]!r} on {slowest[2]}")
    print(f"\n{'gpu.remove_double_syncs on':<36}{'status':>10}{'s':>8}")
    for name, status, secs in syncs:
        print(f"{name:<36}{status:>10}{secs:>8.3f}")


if __name__ == "__main__":
    main()
