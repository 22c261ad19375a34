"""Mutation analysis: every mutant of verimim.fuzz.mutants' catalogue, and which killer
(`check` on the corpus, `run` against the corpus's EXPECT lines, a short fuzz run) catches it.

    python benchmarks/mutation.py [--jobs 2] [--fuzz 20] [--only ID,ID] [--out mutation.json]

Each mutant runs in its own process (the patched module loaded before anything imports it);
the unmutated compiler's outcomes on the same corpus are the baseline. Prints one row per
mutant, a table per phase (mutants, killed by check / run / fuzz, survivors) and writes every
result to --out.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from verimim.fuzz.mutants import CATALOGUE  # noqa: E402


def corpus() -> list[str]:
    dirs = [ROOT / "tests" / "programs" / d for d in ("valid", "phase_errors", "runtime_errors", "fuzz_found")]
    dirs += [SHARED / d for d in ("examples", "kernels", "upstream")]
    return [str(p) for d in dirs if d.is_dir() for p in sorted(d.glob("*.mim"))]


def one(mid: str, corpus_file: str, baseline_file: str, fuzz_s: float, seed: int, timeout: float) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-m", "verimim.fuzz.mutants", mid, corpus_file, baseline_file,
                              str(fuzz_s), str(seed)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"id": mid, "killed_by": "hang", "program": None, "detail": f"no result in {timeout:.0f} s",
                "seconds": round(time.monotonic() - t0, 1)}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
        return {"id": mid, "killed_by": "crash", "program": None, "detail": tail[0][:300],
                "seconds": round(time.monotonic() - t0, 1)}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fuzz", type=float, default=20.0, help="seconds of fuzzing for a mutant check and run miss")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per mutant")
    ap.add_argument("--out", default="mutation.json")
    a = ap.parse_args()
    mutants = [m for m in CATALOGUE if not a.only or m.id in a.only.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="verimim-mutation-"))
    corpus_file = tmp / "corpus.json"
    programs = corpus()
    corpus_file.write_text(json.dumps(programs), encoding="utf-8")
    t0 = time.monotonic()
    base = one("none", str(corpus_file), "-", 0, a.seed, a.timeout)
    if "check" not in base:
        sys.exit(f"the baseline failed: {base}")
    baseline_file = tmp / "baseline.json"
    baseline_file.write_text(json.dumps(base), encoding="utf-8")
    print(f"baseline: {len(programs)} programs checked, {len(base['run'])} run, in {base['seconds']} s", flush=True)
    results: list[dict[str, Any]] = []
    with ThreadPoolExecutor(a.jobs) as pool:
        futs = {pool.submit(one, m.id, str(corpus_file), str(baseline_file), a.fuzz, a.seed, a.timeout): m
                for m in mutants}
        for fut in futs:
            r = fut.result()
            m = futs[fut]
            results.append(r)
            prog = Path(r["program"]).name if r.get("program") else "-"
            print(f"{m.id:<20} {m.phase:<32} {m.kind:<20} {str(r['killed_by'] or 'SURVIVED'):<9} "
                  f"{r['seconds']:>7.1f} s  {prog}", flush=True)
    by_phase: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for m, r in zip(mutants, results):
        row = by_phase[m.phase]
        row["mutants"] += 1
        row[r["killed_by"] or "survived"] += 1
    cols = ["mutants", "check", "run", "fuzz", "hang", "crash", "survived"]
    print(f"\n{'phase':<32}" + "".join(f"{c:>9}" for c in cols))
    for phase, row in by_phase.items():
        print(f"{phase:<32}" + "".join(f"{row.get(c, 0):>9}" for c in cols))
    total = {c: sum(r.get(c, 0) for r in by_phase.values()) for c in cols}
    print(f"{'all':<32}" + "".join(f"{total[c]:>9}" for c in cols))
    print(f"\n{len(mutants)} mutants in {time.monotonic() - t0:.0f} s")
    Path(a.out).write_text(json.dumps({"baseline_s": base["seconds"], "programs": len(programs),
                                       "results": [dict(r, phase=m.phase, kind=m.kind, what=m.what)
                                                   for m, r in zip(mutants, results)]}, indent=1),
                           encoding="utf-8")


if __name__ == "__main__":
    main()
