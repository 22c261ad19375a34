"""Fuzzing throughput: programs fully checked per second per core (rendered, re-parsed, the
pipeline with every phase's specification, every kernel verified, the interpreter on the source
under two schedules and after every phase), with and without the campaign machinery, the
scaling from 1 to N workers, where a program's time goes, peak memory, and program sizes.

    python benchmarks/fuzz.py [--seconds 60] [--workers 1,2] [--no-verify]
    python benchmarks/fuzz.py --against REV [--programs 40] [--rounds 3]

  plain      the plain `fuzz` engine (run_campaign: a Hypothesis @given loop, one process)
  direct     the campaign's own task (generate from a seed, check) in a loop, one process,
             no Dask and no journal: the cost of a program itself
  campaign   `fuzz --campaign` on a LocalCluster of N workers: Dask, the journal, failure
             directories and reductions included (the cluster's start is reported apart)

It also prints where a program's time goes (the journal's seconds per oracle stage), the peak
resident memory of one process checking programs (what each worker holds), the distribution
of operations, kernels and launches per program, and the load average, since the cores may be
shared. Baseline: 1 worker (the scaling ratio) and the issue's aim of 10 programs/s/core.
`--against REV` measures a change instead: the same programs checked by this tree and by git
revision REV, alternately, with medians and their ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AIM = 10.0  # programs per second per core (issue 13)


def plain(seconds: float, verify: bool) -> tuple[int, float, list[tuple[int, int, int]]]:
    from verimim.fuzz.strategies import run_campaign

    res = run_campaign(seconds, seed=0, verify=verify, max_failures=10 ** 6)
    return res.programs, res.seconds, res.sizes


def _direct_child(seconds: float, verify: bool, out: Any) -> None:
    out.send(direct(seconds, verify))


def direct_with_memory(seconds: float, verify: bool) -> tuple[int, float, float]:
    """`direct` in a child process: (programs, seconds, the child's peak RSS in MiB)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    rx, tx = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_direct_child, args=(seconds, verify, tx))
    p.start()
    n, s = rx.recv()
    p.join()
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: KiB
    return n, s, peak_kib / 1024


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


# A child process checking programs 1..N of seed 0 (after program 0, which loads the plugins):
# prints the seconds they took.
_TIMED = ("import time\nfrom verimim.fuzz.task import Settings, check_index\n"
          "s = Settings(seed=0, verify={verify})\ncheck_index(s, 0)\nt = time.monotonic()\n"
          "for i in range(1, {n} + 1):\n    check_index(s, i)\nprint(time.monotonic() - t)\n")
def _timed_in(tree: Path, n: int, verify: bool) -> float:
    """Seconds for programs 1..n checked by the verimim of `tree` (its own code, not the installed one)."""
    import subprocess

    from trees import importable

    with importable(tree) as env:
        out = subprocess.run([sys.executable, "-c", _TIMED.format(verify=verify, n=n)], cwd=tree, env=env,
                             check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def against(rev: str, n: int, rounds: int, verify: bool) -> None:
    """This tree against revision `rev` (a temporary git worktree) on the same n programs,
    alternately, `rounds` times each: medians, their ratio. The same programs and the same load
    for both (a 60 s run's count varies by a quarter between runs on a shared machine)."""
    from trees import worktree

    times: dict[str, list[float]] = {"this tree": [], rev: []}
    with worktree(rev) as base:
        for _ in range(rounds):
            times[rev].append(_timed_in(base, n, verify))
            times["this tree"].append(_timed_in(ROOT, n, verify))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:<12} {n} programs: median {med[k]:6.1f} s = {n / med[k]:5.2f} /s  "
              f"(runs {', '.join(f'{x:.1f}' for x in v)})")
    print(f"ratio: this tree checks {med[rev] / med['this tree']:.2f}x as many programs per second as {rev}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--against", metavar="REV", help="compare with git revision REV on the same programs instead")
    ap.add_argument("--programs", type=int, default=40, help="with --against: programs per run")
    ap.add_argument("--rounds", type=int, default=3, help="with --against: runs of each tree")
    a = ap.parse_args()
    verify = not a.no_verify
    if a.against:
        against(a.against, a.programs, a.rounds, verify)
        return
    print(f"{'with' if verify else 'without'} Z3 specifications, {a.seconds:.0f} s each, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    n, s, sizes = plain(a.seconds, verify)
    print(f"plain      1 process   {n:5d} programs  {n / s:6.2f} /s/core  ({n / s / AIM:.2f} of the aim of {AIM:g})")
    n, s, peak = direct_with_memory(a.seconds, verify)
    print(f"direct     1 process   {n:5d} programs  {n / s:6.2f} /s/core  peak RSS {peak:.0f} MiB")
    base = None
    for w in (int(x) for x in a.workers.split(",")):
        n, s, start, stages = campaign(a.seconds, verify, w)
        rate = n / s
        base = base or rate
        print(f"campaign   {w} worker{'s' if w > 1 else ' '}   {n:5d} programs  {rate / w:6.2f} /s/core  "
              f"(x{rate / base:.2f} of 1 worker; cluster start and stop {start:.1f} s)")
        print("           per program: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in stages.items()))
    print(f"{'size':<12}{'min':>6}{'median':>8}{'mean':>8}{'p90':>6}{'max':>6}   (the plain run's programs)")
    for i, name in enumerate(("operations", "kernels", "launches")):
        xs = sorted(s[i] for s in sizes) or [0]
        p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
        print(f"{name:<12}{xs[0]:>6}{statistics.median(xs):>8.1f}{statistics.mean(xs):>8.1f}{p90:>6}{xs[-1]:>6}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
