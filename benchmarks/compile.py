"""Compile time of each example: frontend + phases (unverified) + code generation, median.

    python benchmarks/compile.py [--runs N] [--sm sm_90] [--json]

For each ../shared/examples/*.mim that the pipeline accepts, and the kernel and btensor programs
of the corpus, prints the median over N in-process runs of: frontend (parse + elaborate, plugins
included), phases (the default pipeline without Z3: what `verimim compile` runs), device
(NVPTX LLVM IR → optimized PTX), host (host LLVM IR, verified by llvmlite) and the total, plus the
peak Python memory of one run (tracemalloc, a separate run). Baseline named in the last column:
the frontend's share of the total, since the frontend is what every command pays anyway.
No GPU is needed: PTX is produced by llvmlite's NVPTX target.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verimim.diagnostics import VerimimError  # noqa: E402
from verimim.driver import run_with_big_stack  # noqa: E402
from verimim.frontend.loader import load_program  # noqa: E402
from verimim.runtime.host import emit_host, verify_ir  # noqa: E402
from verimim.runtime.nvptx import compile_device_module  # noqa: E402
from verimim.runtime.pipeline import split_program  # noqa: E402


def once(path: Path, sm: str) -> dict[str, float]:
    t0 = time.perf_counter()
    world, _ = load_program(str(path), [])
    t1 = time.perf_counter()
    prog = split_program(world)  # the program's plan, buffer.lower_ptr included
    t2 = time.perf_counter()
    dm = compile_device_module(prog.device, sm) if prog.device is not None and prog.device.externals else None
    t3 = time.perf_counter()
    host = emit_host(prog.host, dm.kernels if dm is not None else {})
    verify_ir(host.llvm_ir)
    t4 = time.perf_counter()
    return {"frontend": t1 - t0, "phases": t2 - t1, "device": t3 - t2, "host": t4 - t3, "total": t4 - t0}


def programs() -> list[Path]:
    ex = sorted((ROOT / ".." / "shared" / "examples").glob("*.mim"))
    corpus = [p for p in sorted((ROOT / "tests" / "programs" / "valid").glob("*.mim"))
              if "gpu.launch" in p.read_text() or "btensor." in p.read_text()]
    return ex + corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--sm", default="sm_90")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for path in programs():
        try:
            run_with_big_stack(lambda: once(path, a.sm))  # warm-up (and: does it compile?)
        except VerimimError as e:
            rows.append({"file": path.name, "skipped": f"{e.code}"})
            continue
        samples = [run_with_big_stack(lambda: once(path, a.sm)) for _ in range(a.runs)]
        med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
        tracemalloc.start()
        run_with_big_stack(lambda: once(path, a.sm))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append({"file": path.name, **{k: round(v * 1000, 1) for k, v in med.items()},
                     "peak_mib": round(peak / 2**20, 1), "frontend_share": round(med["frontend"] / med["total"], 2)})
    done = [r for r in rows if "total" in r]
    summary = {"programs": len(done), "median_total_ms": statistics.median(r["total"] for r in done) if done else None,
               "slowest": max(done, key=lambda r: r["total"])["file"] if done else None}
    if a.json:
        print(json.dumps({"rows": rows, **summary}, indent=2))
        return 0
    print(f"{'program':32} {'frontend':>9} {'phases':>8} {'device':>8} {'host':>7} {'total':>8} {'peak MiB':>9} {'fe share':>9}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['file']:32} skipped: the pipeline rejects it ({r['skipped']})")
            continue
        print(f"{r['file']:32} {r['frontend']:9.1f} {r['phases']:8.1f} {r['device']:8.1f} {r['host']:7.1f} "
              f"{r['total']:8.1f} {r['peak_mib']:9.1f} {r['frontend_share']:9.2f}")
    print(f"median total {summary['median_total_ms']} ms over {summary['programs']} programs "
          f"(ms, median of {a.runs} runs); slowest: {summary['slowest']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
