"""Frontend performance: parse + elaborate time and peak memory.

    python benchmarks/frontend.py [--runs N] [--sizes 1000,2000,4000]

For each ../shared/examples/*.mim (skipped if the directory is missing) and for synthetic
programs of N chained `let`s inside a `fun extern main`, prints the median over N runs
(in-process, after one warm-up) of:

- plugins: loading the plugins the file names (`plugin core; …`): parsing (cached per process)
  and elaborating them into a fresh World, what the first file of a process pays;
- copied:  the same imports copied into a fresh World from the process's first load of them
  (verimim.frontend.loader.adopt_imports, verimim.ir.copy), what every later file pays (the
  baseline of the ratio printed at the end is `plugins`);
- parse:   parsing the user file alone;
- user:    parsing and elaborating the user file in a World whose plugins are already loaded;
- total:   plugins + user (what `verimim check` pays for the frontend);

plus the peak Python memory of one plugins+user run (tracemalloc, measured in a separate run, since
tracing slows everything down) and the number of hash-consed nodes in the World. The last line is
time(4000)/time(1000) for the user part of the synthetic programs: ≈ 4 means linear growth.

Deep programs recurse deeply, so everything runs under `verimim.driver.run_with_big_stack`.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verimim.driver import run_with_big_stack  # noqa: E402
from verimim.frontend.loader import Loader, adopt_imports  # noqa: E402
from verimim.ir.world import World  # noqa: E402
from verimim.syntax import ast  # noqa: E402
from verimim.syntax.parser import parse_module  # noqa: E402

EXAMPLES = ROOT / ".." / "shared" / "examples"
UPSTREAM = ROOT / ".." / "shared" / "upstream"

MAIN = ("fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)\n"
        "              : [mem.M 0, I32] =\n")


def generated(n: int) -> list[str]:
    """The texts of the first n programs a seed-0 fuzz campaign checks (what `fuzz` parses)."""
    from verimim.fuzz.task import generate, program_seed

    return [generate(program_seed(0, i))[0].text for i in range(n)]


def synthetic(n: int) -> str:
    """`n` chained lets; each depends on the previous one and on `argc`, so nothing folds."""
    lines = ["plugin core;", "plugin mem;", "", MAIN, "    let x_0 = argc;\n"]
    lines += [f"    let x_{k} = core.wrap.add 0 (x_{k - 1}, 1I32);\n" for k in range(1, n + 1)]
    lines.append(f"    return (m0, x_{n});\n")
    return "\n".join(lines[:3]) + "\n" + "".join(lines[3:])


def nested(depth: int) -> str:
    """An argument nested `depth` applications deep whose implicit sizes are solved only by the
    last tuple element (`core.wrap.add 0 (core.wrap.add 0 (…), 1I32)`)."""
    e = "(2I32, 1I32)"
    for i in range(depth):
        e = f"core.wrap.add 0 ({e}, 1I32)" if i else f"core.wrap.add 0 {e}"
    return "plugin core;\nlet x = " + e + ";\n"


def wide_sigma(n: int) -> str:
    """A `let` whose declared type is a sigma of n named fields, none depending on another."""
    fields = ", ".join(f"x{i}: I32" for i in range(n))
    return f"plugin core;\nlet t: [{fields}] = ({', '.join(['1I32'] * n)});\n"


def arrows(n: int) -> str:
    """A chain of n arrows `I32 → … → I32`."""
    return "let T = " + " → ".join(["I32"] * (n + 1)) + ";\n"


@dataclass
class Sample:
    plugins: float
    parse: float
    user: float
    nodes: int
    copied: float


def one_run(text: str, path: str, imports: tuple[ast.Import, ...], gc_off: bool = False) -> Sample:
    gc.collect()
    if gc_off:
        gc.disable()
    try:
        return _timed(text, path, imports)
    finally:
        gc.enable()


def _timed(text: str, path: str, imports: tuple[ast.Import, ...]) -> Sample:
    world = World()
    loader = Loader(world)
    t0 = time.perf_counter()
    for imp in imports:
        loader.load_import(imp)
    t1 = time.perf_counter()
    parse_module(text, path)
    t2 = time.perf_counter()
    loader.elaborate(text, path, plugin=None)  # its imports are loaded: parse + elaborate only
    t3 = time.perf_counter()
    copied = Loader(World())
    t4 = time.perf_counter()
    adopt_imports(copied, imports)
    t5 = time.perf_counter()
    return Sample(t1 - t0, t2 - t1, t3 - t2, world.num_nodes, t5 - t4)


def peak_memory(text: str, path: str, imports: tuple[ast.Import, ...]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        world = World()
        loader = Loader(world)
        for imp in imports:
            loader.load_import(imp)
        loader.elaborate(text, path, plugin=None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


@dataclass
class Row:
    name: str
    lines: int
    plugins: float
    parse: float
    user: float
    total: float
    peak: int
    nodes: int
    user_nogc: float | None = None  # the user part with the cyclic GC switched off
    copied: float = 0.0


def measure(name: str, text: str, path: str, runs: int, also_nogc: bool = False) -> Row:
    imports = parse_module(text, path).imports
    one_run(text, path, imports)  # warm-up (imports the plugin modules, fills caches)
    samples = [one_run(text, path, imports) for _ in range(runs)]
    med: Callable[[list[float]], float] = statistics.median
    plugins = med([s.plugins for s in samples])
    user = med([s.user for s in samples])
    total = med([s.plugins + s.user for s in samples])
    row = Row(name, text.count("\n") + 1, plugins, med([s.parse for s in samples]), user, total,
              peak_memory(text, path, imports), samples[-1].nodes, copied=med([s.copied for s in samples]))
    if also_nogc:
        row.user_nogc = med([one_run(text, path, imports, gc_off=True).user for _ in range(runs)])
    return row


def fmt_ms(x: float) -> str:
    return f"{x * 1e3:9.1f}"


def print_table(rows: list[Row]) -> None:
    head = f"{'program':<28} {'lines':>6} {'plugins ms':>10} {'copied ms':>9} {'parse ms':>9} {'user ms':>9} " \
           f"{'total ms':>9} {'peak MiB':>9} {'nodes':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r.name:<28} {r.lines:>6} {fmt_ms(r.plugins):>10} {fmt_ms(r.copied)} {fmt_ms(r.parse)} {fmt_ms(r.user)} "
              f"{fmt_ms(r.total)} {r.peak / 2**20:9.1f} {r.nodes:>7}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per program (median; default 5)")
    ap.add_argument("--sizes", default="1000,2000,4000", help="numbers of chained lets (comma separated)")
    ap.add_argument("--generated", type=int, default=20, help="programs of the fuzz engine (seed 0) to "
                    "measure (default 20; 0: none)")
    ap.add_argument("--depths", default="10,100,900", help="nesting depths of implicit-argument "
                    "applications, lengths/10 of arrow chains and fields/5 of sigmas (comma separated; the parser caps "
                    "nesting at 1000)")
    args = ap.parse_args(argv)
    runs = max(args.runs, 1)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    depths = [int(s) for s in args.depths.split(",") if s]

    def body() -> list[Row]:
        rows: list[Row] = []
        if EXAMPLES.is_dir():
            for f in sorted(EXAMPLES.glob("*.mim")):
                rows.append(measure(f.name, f.read_text(encoding="utf-8"), str(f), runs))
        else:
            print(f"(no examples: {EXAMPLES} is missing)")
        if UPSTREAM.is_dir():
            for f in sorted(UPSTREAM.glob("*.mim")):
                try:
                    rows.append(measure(f"upstream/{f.name}", f.read_text(encoding="utf-8"), str(f), runs))
                except Exception as e:  # a program the frontend rejects (upstream's error_* tests)
                    print(f"(upstream/{f.name}: {type(e).__name__})")
        for i, text in enumerate(generated(args.generated)):
            rows.append(measure(f"generated {i}", text, f"<generated-{i}>", runs))
        for n in sizes:
            rows.append(measure(f"synthetic {n} lets", synthetic(n), f"<synthetic-{n}>", runs, also_nogc=True))
        for d in depths:
            rows.append(measure(f"nesting {d} deep", nested(d), f"<nested-{d}>", runs))
        for d in depths:
            rows.append(measure(f"arrows {d * 10} long", arrows(d * 10), f"<arrows-{d * 10}>", runs))
        for d in depths:
            rows.append(measure(f"sigma {d * 5} fields", wide_sigma(d * 5), f"<sigma-{d * 5}>", runs))
        return rows

    rows = run_with_big_stack(body)
    print(f"verimim frontend: median of {runs} runs after one warm-up (Python {sys.version.split()[0]})")
    print()
    print_table(rows)
    ups = sorted(r.total for r in rows if r.name.startswith("upstream/"))
    if ups:
        print()
        print(f"upstream corpus: {len(ups)} programs, median parse + check {fmt_ms(statistics.median(ups)).strip()} ms "
              f"(plugins loaded per World; aim ≤ 50 ms)")
    gen = [r for r in rows if r.name.startswith("generated ")]
    if gen:
        print(f"generated programs (the fuzz engine's, seed 0): {len(gen)}, median {statistics.median(r.lines for r in gen):.0f} "
              f"lines, parse {fmt_ms(statistics.median(r.parse for r in gen)).strip()} ms, parse + check "
              f"{fmt_ms(statistics.median(r.total for r in gen)).strip()} ms (median)")
    pairs = [(r.plugins, r.copied) for r in rows if r.copied > 0]
    if pairs:
        fresh, copied = statistics.median(p for p, _ in pairs), statistics.median(c for _, c in pairs)
        print(f"imports: elaborated {fmt_ms(fresh).strip()} ms, copied {fmt_ms(copied).strip()} ms "
              f"(median over {len(pairs)} programs; ×{fresh / copied:.1f} against elaborating them)")
    for kind in ("nesting", "arrows", "sigma"):
        series = [r for r in rows if r.name.startswith(kind)]
        if len(series) >= 2:
            a, b = series[0], series[-1]
            na, nb = int(a.name.split()[1]), int(b.name.split()[1])
            print(f"{kind}: {na} → {nb}: user time ×{b.user / a.user:.1f} for ×{nb / na:.0f} the size")
    by_size = {int(r.name.split()[1]): r for r in rows if r.name.startswith("synthetic")}
    if 1000 in by_size and 4000 in by_size:
        r1, r4 = by_size[1000], by_size[4000]
        print()
        print(f"time(4000)/time(1000): user {r4.user / r1.user:.2f}, parse {r4.parse / r1.parse:.2f}, "
              f"peak memory {r4.peak / r1.peak:.2f}  (linear growth: ≈ 4)")
        if r1.user_nogc and r4.user_nogc:
            print(f"with the cyclic GC off: user {fmt_ms(r1.user_nogc).strip()} ms → "
                  f"{fmt_ms(r4.user_nogc).strip()} ms, ratio {r4.user_nogc / r1.user_nogc:.2f} "
                  f"(the excess over 4 with the GC on is Python's full collections over a growing heap)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
