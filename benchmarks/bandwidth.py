"""Global-memory bandwidth of verimim's NVPTX kernels versus PyTorch, on the GPU.

Doubling a 1 GiB I32 array (y = 2·x) in global memory with thousands of work-groups:

  * `mim-i32`:  one I32 per work-item (4-byte accesses),
  * `mim-v4`:   one «4; I32» per work-item (lowered to 16-byte ld/st.global.v4 because the
                launch pointers are 16-byte aligned),
  * `torch`:    torch.mul(x, 2, out=y) on the same tensors,

each timed with CUDA events (median of --reps runs after warm-up); achieved GB/s counts the bytes
read and written (2 × size). The aim of the issue is at least 0.9× PyTorch (for mim-v4).

    python benchmarks/bandwidth.py                 # 1 GiB, 256 work-items per group
    python benchmarks/bandwidth.py --mib 64 --reps 5

Without a CUDA device (or cuda-python) it says so and exits 0.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verimim.runtime.cuda import device_available  # noqa: E402

SRC = """
plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx {G}, item_id: Idx {I}, (),
            (x: gpu.GlobalPtr «{N}; {T}», y: gpu.GlobalPtr «{N}; {T}»),
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let k = core.bitcast (Idx {N}) (core.nat.add (core.nat.mul (core.bitcast Nat group_id, {I}), core.bitcast Nat item_id));
    let (m1, v) = mem.load (m1, mem.lea (x, k));
    let m1 = mem.store (m1, mem.lea (y, k), {DOUBLE});
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, a) = gpu.alloc.block «{N}; {T}» m1;
    let (m1, b) = gpu.alloc.block «{N}; {T}» m1;
    ret (m0, m1, m4) = gpu.launch ({G}, {I}, gpu.default_stream, ff, ()) kernel (a, b) $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, a);
    let m1 = gpu.free.block (m1, b);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 0I32);
"""


def mim_source(n_i32: int, items: int, vec: int) -> tuple[str, int]:
    n = n_i32 // vec
    groups = n // items
    if vec == 1:
        t, double = "I32", "core.wrap.add 0 (v, v)"
    else:
        t, double = f"«{vec}; I32»", f"‹j: {vec}; core.wrap.add 0 (v#j, v#j)›"
    return SRC.format(G=groups, I=items, N=n, T=t, DOUBLE=double), groups


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="array size in MiB (default 1024 = 1 GiB)")
    ap.add_argument("--items", type=int, default=256, help="work-items per group")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sm", default=None, help="PTX target (default: the device's)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not device_available():
        print("bandwidth: no CUDA device (cuda-python, an NVIDIA driver and a GPU are needed); nothing measured")
        return 0
    try:
        import torch
    except ImportError:
        torch = None  # type: ignore[assignment]
    from verimim.runtime.cuda import Context
    from verimim.runtime.nvptx import compile_device_module
    from verimim.runtime.pipeline import device_world_of

    n_i32 = a.mib * 2**20 // 4
    nbytes = n_i32 * 4
    if torch is not None:
        torch.cuda.init()
        x = torch.randint(-2**30, 2**30, (n_i32,), dtype=torch.int32, device="cuda")
        y = torch.empty_like(x)
        torch.cuda.synchronize()
    ctx = Context()
    sm = a.sm or ctx.sm()
    if torch is None:
        xp, yp = ctx.mem_alloc(nbytes), ctx.mem_alloc(nbytes)
        ctx.memset(xp, 1, nbytes)
    else:
        xp, yp = x.data_ptr(), y.data_ptr()
    results: dict[str, dict[str, float]] = {}

    def time_it(launch) -> float:  # type: ignore[no-untyped-def]
        for _ in range(3):
            launch()
        ctx.synchronize()
        times = []
        start, end = ctx.event_create(), ctx.event_create()
        for _ in range(a.reps):
            ctx.event_record(start)
            launch()
            ctx.event_record(end)
            ctx.event_sync(end)
            times.append(ctx.event_elapsed_ms(start, end) / 1e3)
        return statistics.median(times)

    for name, vec in (("mim-i32", 1), ("mim-v4", 4)):
        src, groups = mim_source(n_i32, a.items, vec)
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / f"{name}.mim"
            f.write_text(src)
            _host, dev = device_world_of(str(f))
        dm = compile_device_module(dev, sm)
        vector = "ld.global.v4" in dm.ptx
        mod = ctx.load_module(dm.ptx)
        fn = ctx.get_function(mod, "kernel")
        args = [ctypes.c_uint64(xp), ctypes.c_uint64(yp)]
        t = time_it(lambda: ctx.launch(fn, groups, a.items, args))
        ok = None
        if torch is not None:
            torch.cuda.synchronize()
            ok = bool(torch.equal(y, x * 2))
            y.zero_()
        results[name] = {"s": t, "GB/s": 2 * nbytes / t / 1e9, "groups": groups, "v4": vector, "correct": ok}
    if torch is not None:
        def tmul() -> None:
            torch.mul(x, 2, out=y)
        # torch runs on its current stream: time it with torch's own events
        for _ in range(3):
            tmul()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            tmul()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        t = statistics.median(times)
        results["torch"] = {"s": t, "GB/s": 2 * nbytes / t / 1e9}
        for name in ("mim-i32", "mim-v4"):
            results[name]["ratio_vs_torch"] = results["torch"]["s"] / results[name]["s"]
    if a.json:
        print(json.dumps({"device": ctx.name(), "sm": sm, "bytes": nbytes, "results": results}, indent=2))
    else:
        print(f"device: {ctx.name()} ({sm}); array {nbytes / 2**30:.3f} GiB of I32; "
              f"{a.items} work-items per group; median of {a.reps}")
        print(f"{'kernel':<10} {'time ms':>9} {'GB/s':>8} {'vs torch':>9}  notes")
        for name, r in results.items():
            ratio = f"{r['ratio_vs_torch']:.3f}x" if "ratio_vs_torch" in r else ""
            notes = "" if name == "torch" else (f"{r['groups']} groups, v4={r['v4']}, correct={r['correct']}")
            print(f"{name:<10} {r['s'] * 1e3:>9.3f} {r['GB/s']:>8.1f} {ratio:>9}  {notes}")
        if "torch" in results:
            best = results["mim-v4"]["ratio_vs_torch"]
            print(f"aim ≥ 0.9x torch with 16-byte accesses: {'met' if best >= 0.9 else 'NOT met'} ({best:.3f}x)")
    if torch is None:
        ctx.mem_free(xp)
        ctx.mem_free(yp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
