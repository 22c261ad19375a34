"""Fuzzing throughput with and without the campaign machinery: programs fully checked per
second per core.

    python benchmarks/fuzz_throughput.py [--seconds 60] [--workers 1,2] [--no-verify]

  plain      the plain `fuzz` engine (run_campaign: a Hypothesis @given loop, one process)
  direct     the campaign's own task (generate from a seed, check) in a loop, one process,
             no Dask and no journal: the cost of a program itself
  campaign   `fuzz --campaign` on a LocalCluster of N workers: Dask, the journal, failure
             directories and reductions included (the cluster's start is reported apart)

It also prints where a program's time goes (the journal's seconds per oracle stage) and the
load average, since the cores may be shared.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def plain(seconds: float, verify: bool) -> tuple[int, float]:
    from verimim.fuzz.strategies import run_campaign

    res = run_campaign(seconds, seed=0, verify=verify, max_failures=10 ** 6)
    return res.programs, res.seconds


def direct(seconds: float, verify: bool) -> tuple[int, float]:
    from verimim.fuzz.task import Settings, check_index

    settings = Settings(seed=0, verify=verify)
    start, n = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        check_index(settings, n)
        n += 1
    return n, time.monotonic() - start


def campaign(seconds: float, verify: bool, workers: int) -> tuple[int, float, float, dict[str, list[float]]]:
    from verimim.fuzz.campaign import run
    from verimim.fuzz.journal import Journal

    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        s = run(Path(d) / "c", seconds, seed=0, verify=verify, workers=workers, reduce_budget=10)
        total = time.monotonic() - t0
        j = Journal.open(Path(d) / "c")
        stages: dict[str, list[float]] = defaultdict(list)
        for p in j.programs():
            for k, v in json.loads(p["times"]).items():
                stages[k].append(v)
        j.close()
    return s.programs, s.seconds, total - s.seconds, stages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--no-verify", action="store_true")
    a = ap.parse_args()
    verify = not a.no_verify
    print(f"{'with' if verify else 'without'} Z3 specifications, {a.seconds:.0f} s each, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    n, s = plain(a.seconds, verify)
    print(f"plain      1 process   {n:5d} programs  {n / s:6.2f} /s/core")
    n, s = direct(a.seconds, verify)
    print(f"direct     1 process   {n:5d} programs  {n / s:6.2f} /s/core")
    base = None
    for w in (int(x) for x in a.workers.split(",")):
        n, s, start, stages = campaign(a.seconds, verify, w)
        rate = n / s
        base = base or rate
        print(f"campaign   {w} worker{'s' if w > 1 else ' '}   {n:5d} programs  {rate / w:6.2f} /s/core  "
              f"(x{rate / base:.2f} of 1 worker; cluster start and stop {start:.1f} s)")
        print("           per program: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in stages.items()))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
