"""Kernel verification cost (`verimim check`'s races and divergence part, smt/kernel_verify.py):
median time per kernel over the examples, the shared kernel corpus and generated kernels, by
verdict, and its growth with the number of barriers and with loop depth.

    python benchmarks/kernels.py [--runs 3] [--generated 20] [--programs 60 --seed 11]

`--programs N` adds whole generated programs (several kernels, streams, C calls, defects) as a
campaign of that seed draws them: the verdict table then counts how many of their kernels
the model leaves `unknown`.

The time is verify_kernels on the World the pipeline produced (exploration of the kernel's
paths, the host side, every Z3 query); the pipeline itself is not timed. Aim of the issue:
≤ 1 s per kernel of the examples, no kernel of the corpus `unknown`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from tests.smt import kernel_programs as kp  # noqa: E402
from verimim.diagnostics import VerimimError  # noqa: E402
from verimim.driver import run_with_big_stack  # noqa: E402
from verimim.smt.kernel_verify import verify_kernels  # noqa: E402
from verimim.smt.solver import SpecContext  # noqa: E402


def measure(path: str, runs: int) -> list[tuple[str, str, float]]:
    """(kernel, verdict, median seconds) per launch of the program."""
    prog = kp.device_program(path)
    times: dict[int, list[float]] = defaultdict(list)
    verdicts: dict[int, tuple[str, str]] = {}
    for _ in range(runs):
        t0 = time.perf_counter()
        rep = run_with_big_stack(lambda: verify_kernels(prog, SpecContext(), path))
        total = time.perf_counter() - t0
        for k, e in enumerate(rep.entries):
            times[k].append(e["time_s"] if len(rep.entries) > 1 else total)
            both = (e["races"], e["divergence"])
            worst = next((s for s in ("refuted", "unknown", "bounded") if s in both), "proved")
            verdicts[k] = (e["name"], worst)
    return [(verdicts[k][0], verdicts[k][1], statistics.median(times[k])) for k in sorted(times)]


def barriers_kernel(n: int) -> str:
    """n rounds of a shared exchange, each behind a barrier."""
    rounds = []
    for r in range(n):
        rounds.append(f"""    let m3 = mem.store (m3, mem.lea (sh, item_id), core.bitcast I32 item_id);
    let (m1, m3) = gpu.sync_work_items (m1, m3);
    let (m3, v{r}) = mem.load (m3, mem.lea (sh, core.wrap.add 0 (item_id, 1_4)));
    let (m1, m3) = gpu.sync_work_items (m1, m3);""")
    return "\n".join(["    let (m3, sh) = mem.slot («4; I32», 3) (m3, 0);", *rounds,
                      "    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) ({T})), 1I32);",
                      "    return (m1, m3, m4, m5);"])


def loops_kernel(depth: int, trips: int = 2) -> str:
    """`depth` nested loops of `trips` iterations, the innermost storing the work-item's cell."""
    def level(d: int, indent: str, tok: str) -> str:
        if d == depth:
            return (f"{indent}let m1 = mem.store ({tok}, mem.lea (out, core.bitcast (Idx 16) ({{T}})), 1I32);\n"
                    f"{indent}next{d - 1} m1")
        k = f"k{d}"
        after = f"next{d - 1} m1" if d > 0 else "return (m1, m3, m4, m5)"
        return (f"{indent}loop{d} ({tok}, 0)\n{indent}where\n"
                f"{indent}    con loop{d} (m1: gpu.GlobalM, {k}: Nat) =\n"
                f"{indent}        (exit{d}, body{d})#(core.ncmp.l ({k}, {trips})) m1\n"
                f"{indent}        where\n"
                f"{indent}            con body{d} (m1: gpu.GlobalM) =\n"
                + level(d + 1, indent + "                ", "m1") + ";\n"
                f"{indent}            con next{d} (m1: gpu.GlobalM) = loop{d} (m1, core.nat.add ({k}, 1));\n"
                f"{indent}        end;\n"
                f"{indent}    con exit{d} (m1: gpu.GlobalM) = {after};\n"
                f"{indent}end")
    return level(0, "    ", "m1") + ";"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--generated", type=int, default=20, help="generated race-free kernels")
    ap.add_argument("--programs", type=int, default=0, help="generated whole programs (a campaign's draws)")
    ap.add_argument("--seed", type=int, default=11, help="the campaign seed of --programs")
    a = ap.parse_args()
    groups: dict[str, list[Path]] = {
        "examples": sorted((SHARED / "examples").glob("*.mim")),
        "corpus": sorted((SHARED / "kernels").glob("*.mim")),
        "upstream": sorted((SHARED / "upstream").glob("*.mim")),
        "valid programs": sorted(p for p in (ROOT / "tests" / "programs" / "valid").glob("*.mim")
                                 if "gpu.launch" in (t := p.read_text(encoding="utf-8")) or "btensor." in t),
    }
    tmp = Path(tempfile.mkdtemp(prefix="verimim-kbench-"))
    if a.generated:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed

        from verimim.fuzz.strategies import kernels

        gen: list[Path] = []

        @hseed(0)
        @settings(database=None, deadline=None, max_examples=a.generated, suppress_health_check=list(HealthCheck),
                  phases=[Phase.generate])
        @given(kernels())
        def draw(prog) -> None:  # type: ignore[no-untyped-def]
            gen.append(prog.write(tmp, f"gen{len(gen)}"))

        draw()
        groups["generated"] = gen
    if a.programs:
        from verimim.fuzz.task import generate, program_seed

        progs = []
        for i in range(a.programs):
            prog, _ = run_with_big_stack(lambda i=i: generate(program_seed(a.seed, i)))
            progs.append(Path(prog.write(tmp, f"prog{i}")))
        groups["generated programs"] = progs
    by_verdict: dict[str, list[float]] = defaultdict(list)
    print(f"{'program':<34}{'kernel':<12}{'verdict':<10}{'median s':>10}")
    for group, files in groups.items():
        per: list[float] = []
        for f in files:
            try:
                rows = measure(str(f), a.runs)
            except (AssertionError, VerimimError):  # rejected by the front end or a checker: no kernels
                continue
            for name, verdict, t in rows:
                per.append(t)
                by_verdict[verdict].append(t)
                print(f"{f.name:<34}{name:<12}{verdict:<10}{t:>10.3f}")
        if per:
            print(f"-- {group}: {len(per)} kernels, median {statistics.median(per):.3f} s, max {max(per):.3f} s\n")
    print(f"{'verdict':<12}{'kernels':>8}{'median s':>10}{'max s':>8}")
    for v, xs in sorted(by_verdict.items()):
        print(f"{v:<12}{len(xs):>8}{statistics.median(xs):>10.3f}{max(xs):>8.3f}")
    print(f"\n{'barriers':>8}{'median s':>10}")
    for n in (1, 2, 4, 8, 16):
        path = kp.write(tmp, f"bar{n}", kp.program(barriers_kernel(n)))
        print(f"{2 * n:>8}{measure(path, a.runs)[0][2]:>10.3f}")
    print(f"\n{'loop depth':>10}{'iterations':>11}{'verdict':>9}{'median s':>10}")
    for d in (1, 2, 3):
        path = kp.write(tmp, f"loop{d}", kp.program(loops_kernel(d)))
        (_, verdict, t), = measure(path, a.runs)
        print(f"{d:>10}{2 ** d:>11}{verdict:>9}{t:>10.3f}")


if __name__ == "__main__":
    main()
