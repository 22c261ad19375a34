"""Interpreter throughput: interpreted operations per second on a kernel of G groups × I
work-items × about 50 operations each, with race detection on (every global store is tracked),
and the time of each shared example.

    python benchmarks/interp.py            # the table of the issue (64 × 256), growth, examples
    python benchmarks/interp.py --quick    # smaller sizes

An "operation" is one executed instruction of a compiled body (an axiom application, a tuple,
an extract, a closure) or one jump: the interpreter's step counter (`--fuel` counts the same).
Baseline: the issue's aim of 300,000 operations/s on this machine.
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

TARGET_OPS = 300_000


def kernel_program(groups: int, items: int, iters: int, barriers: int) -> str:
    """Each work-item runs `iters` loop iterations of arithmetic, then stores its result into its
    own cell of a global array; with `barriers` > 0 it also passes that many barriers."""
    n = groups * items
    syncs = "\n".join("    let (m1, m3) = gpu.sync_work_items (m1, m3);" for _ in range(barriers))
    return f"""plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx {groups}, item_id: Idx {items}, (), out: gpu.GlobalPtr «{n}; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
{syncs}
    let g = core.nat.add (core.nat.mul (core.bitcast Nat group_id, {items}), core.bitcast Nat item_id);
    loop (m1, 0, core.bitcast I32 g)
    where
        con loop (m1: gpu.GlobalM, i: Nat, acc: I32) =
            (exit, body)#(core.ncmp.l (i, {iters})) (m1, acc)
            where
                con body (m1: gpu.GlobalM, acc: I32) =
                    let x = core.wrap.mul 0 (acc, 3I32);
                    let y = core.wrap.add 0 (x, core.bitcast I32 i);
                    loop (m1, core.nat.add (i, 1), core.bit2.xor_ 0 (y, 5I32));
            end;
        con exit (m1: gpu.GlobalM, acc: I32) =
            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx {n}) g), acc);
            return (m1, m3, m4, m5);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d_out) = gpu.alloc.block «{n}; I32» m1;
    ret (m0, m1, m4) = gpu.launch ({groups}, {items}, gpu.default_stream, ff, ()) kernel d_out $ (m0, m1, m4);
    let (m0, out) = mem.alloc («{n}; I32», 0) m0;
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d_out, out);
    let (m0, v) = mem.load (m0, mem.lea (out, core.bitcast (Idx {n}) argc));
    let m1 = gpu.free.block (m1, d_out);
    let m0 = mem.free (m0, out);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""


def measure(text: str, repeats: int) -> tuple[float, int, float]:
    """Median seconds of the run (after elaboration), steps, peak MiB of the run."""
    world, _ = run_with_big_stack(lambda: load_text(text, "<bench>"))
    times, steps, peak = [], 0, 0.0
    for k in range(repeats):
        machine = Machine(world)
        main = find_main(world)
        if k == 0:
            tracemalloc.start()
        t0 = time.perf_counter()
        run_with_big_stack(lambda: machine.run_main(main, ["bench"]))
        times.append(time.perf_counter() - t0)
        if k == 0:
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        steps = machine.steps
    return statistics.median(times[1:] if len(times) > 1 else times), steps, peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    groups, items = (8, 64) if a.quick else (64, 256)
    iters = 3  # about 50 operations per work-item
    print(f"kernel: {groups} groups × {items} work-items, {iters} loop iterations each; race detection on")
    print(f"{'configuration':<30}{'steps':>10}{'ops/item':>9}{'median s':>10}{'ops/s':>12}{'vs 300k':>9}{'peak MiB':>10}")
    rows = [("base", groups, items, iters, 0)]
    rows += [("2× work-items", groups * 2, items, iters, 0)] if not a.quick else []
    rows += [("1/4 work-items", max(groups // 4, 1), items, iters, 0)]
    rows += [("1 barrier", groups, items, iters, 1), ("4 barriers", groups, items, iters, 4)]
    for label, g, i, it, b in rows:
        secs, steps, peak = measure(kernel_program(g, i, it, b), a.repeats)
        ops = steps / secs
        print(f"{label + f' ({g}×{i})':<30}{steps:>10}{steps / (g * i):>9.0f}{secs:>10.3f}{ops:>12,.0f}"
              f"{ops / TARGET_OPS:>8.2f}×{peak:>10.1f}")
    examples = ROOT.parent / "shared" / "examples"
    if examples.is_dir():
        print("\nexamples (run only, median of 5, after elaboration):")
        for f in sorted(examples.glob("*.mim")):
            try:
                secs, steps, _ = measure(f.read_text(encoding="utf-8"), 5)
                print(f"  {f.name:<28}{secs * 1000:>8.1f} ms {steps:>8} steps")
            except Exception as e:  # examples with undefined behaviour stop early with their error
                print(f"  {f.name:<28}  stops with {getattr(e, 'code', type(e).__name__)}")


if __name__ == "__main__":
    main()
