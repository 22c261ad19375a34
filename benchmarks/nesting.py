"""How interpreting a program grows with the nesting depth of its continuations: main jumps to
k0, whose `where` block defines k1, … down to kN, each loading, adding and storing through one
slot. Scheduling (verimim.ir.schedule) decides what each continuation's closure captures; a
chain of N nested continuations asks it about every pair.

    python benchmarks/nesting.py            # depths 50, 100, 200, 400
    python benchmarks/nesting.py --quick    # 50, 100, 200

Prints, per depth, the median time of elaborating and of running (3 repetitions), the peak
memory of one run, and the growth against linear from the smallest depth (baseline: time(d0)
× d / d0; 1.0 is linear, d/d0 quadratic).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verimim.driver import run_with_big_stack  # noqa: E402
from verimim.frontend.loader import load_text  # noqa: E402
from verimim.interp.machine import Machine, find_main  # noqa: E402


def chain_program(depth: int) -> str:
    def cont(i: int, pad: str) -> list[str]:
        if i == depth:
            return [f"{pad}con k{i} (mem: %mem.M 0, x: I32) = return (mem, x);"]
        return [f"{pad}con k{i} (mem: %mem.M 0, x: I32) =",
                f"{pad}    let (mem, y) = %mem.load (mem, p);",
                f"{pad}    let mem = %mem.store (mem, p, %core.wrap.add 0 (y, x));",
                f"{pad}    k{i + 1} (mem, %core.wrap.add 0 (x, argc))",
                f"{pad}    where", *cont(i + 1, pad + "        "), f"{pad}    end;"]
    lines = ["plugin core;", "plugin mem;",
             "con extern main (mem: %mem.M 0, argc: I32, argv: %mem.Ptr0 «⊤:Nat; %mem.Ptr0 «⊤:Nat; I8»», "
             "return: Cn [%mem.M 0, I32]) =",
             "    let (mem, p) = %mem.slot (I32, 0) (mem, 0);",
             "    let mem = %mem.store (mem, p, argc);",
             "    k0 (mem, argc)",
             "    where", *cont(0, "        "), "    end;"]
    return "\n".join(lines) + "\n"


def measure(depth: int, reps: int = 3) -> tuple[float, float, int]:
    text = chain_program(depth)
    elab, run = [], []
    peak = 0
    for rep in range(reps):
        t0 = time.perf_counter()
        world, _ = load_text(text, f"chain{depth}.mim")
        elab.append(time.perf_counter() - t0)
        if rep == 0:
            tracemalloc.start()
        t0 = time.perf_counter()
        result = Machine(world).run_main(find_main(world), ["chain"])
        run.append(time.perf_counter() - t0)
        if rep == 0:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert result == depth + 1, result  # argc = 1: the slot sums 1 + depth ones
    return statistics.median(elab), statistics.median(run), peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    depths = [50, 100, 200] if opts.quick else [50, 100, 200, 400]
    print(f"{'depth':>6} {'elaborate s':>12} {'run s':>8} {'peak MiB':>9} {'run vs linear':>14}")
    base: float | None = None
    for d in depths:
        elab, run, peak = measure(d)
        base = base if base is not None else run / d
        print(f"{d:>6} {elab:>12.3f} {run:>8.3f} {peak / 2**20:>9.1f} {run / (base * d):>14.2f}")


if __name__ == "__main__":
    run_with_big_stack(main)
