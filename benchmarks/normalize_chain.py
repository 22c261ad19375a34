"""`verimim check` on straight-line programs of n `let`s, each folded by the core normalizers
(`x_i = x_(i-1) + 1`, `x_i = x_(i-1) · argc`): how `core.normalize` (the proof of every fold
the normalizers made) grows with the program. Each fold's query encoded both sides down to
argc, so it was as large as the program before it: n² in all.

    python benchmarks/normalize_chain.py [--sizes 250 500 1000] [--runs 3] [--against REV]

Prints, per size, the median wall time of the whole command, the median time of the
`core.normalize` entry, and the peak memory of the command; with `--against REV`, the same for
that revision (a temporary git worktree) and the ratio.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trees import ROOT, importable, worktree  # noqa: E402


def chain(n: int) -> str:
    lines = ["plugin core;", "plugin mem;", "",
             "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =",
             "    let x0 = core.wrap.add 0 (argc, 1I32);"]
    for i in range(1, n):
        op = "core.wrap.mul 0 (x{p}, argc)" if i % 2 else "core.wrap.add 0 (x{p}, 1I32)"
        lines.append(f"    let x{i} = {op.format(p=i - 1)};")
    lines.append(f"    return (m0, x{n - 1});")
    return "\n".join(lines) + "\n"


def measure(tree: Path, path: Path, runs: int) -> tuple[float, float, float]:
    """(median wall s, median core.normalize s, peak MiB) of `verimim check` by tree's code."""
    walls, folds, peak = [], [], 0.0
    with importable(tree) as env:
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "verimim.cli", "check", str(path), "--json"], cwd=tree,
                                 env=env, capture_output=True, text=True, timeout=3600).stdout
            walls.append(time.perf_counter() - t0)
            peak = max(peak, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024)
            entry = next(p for p in json.loads(out)["phases"] if p["name"] == "core.normalize")
            assert entry["status"] == "proved", entry
            folds.append(entry["time_s"])
    return statistics.median(walls), statistics.median(folds), peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", metavar="REV", help="also measure git revision REV")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        files = {n: Path(d) / f"chain{n}.mim" for n in a.sizes}
        for n, f in files.items():
            f.write_text(chain(n))
        print(f"{'lets':>6} {'tree':<12} {'wall s':>8} {'normalize s':>12} {'peak MiB':>9}")
        ours = {n: measure(ROOT, f, a.runs) for n, f in files.items()}
        base: dict[int, tuple[float, float, float]] = {}
        if a.against:
            with worktree(a.against) as tree:
                base = {n: measure(tree, f, a.runs) for n, f in files.items()}
        for n in a.sizes:
            for name, res in (("this tree", ours[n]), (a.against, base.get(n))):
                if res is not None:
                    print(f"{n:>6} {name:<12} {res[0]:>8.2f} {res[1]:>12.2f} {res[2]:>9.0f}")
            if n in base:
                print(f"{'':>6} ratio: core.normalize {base[n][1] / max(ours[n][1], 1e-6):.1f}x faster, "
                      f"the command {base[n][0] / ours[n][0]:.1f}x")


if __name__ == "__main__":
    main()
