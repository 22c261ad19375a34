"""Host-side overhead of one `gpu.launch` versus a hand-written cuLaunchKernel of the same PTX.

Three ways to launch the same compiled one-store kernel (1 group × 32 work-items) on a
non-default stream, each timed per call on the host (time.perf_counter_ns around the call, the
device drained every 256 launches outside the timing), median of --n launches:

  * `raw`:        cu.cuLaunchKernel with pre-packed arguments (the floor),
  * `backend`:    GpuBackend.launch (argument marshalling from interpreter values + launch),
  * `gpu.launch`: the interpreter's `gpu.launch` semantics with the backend installed (session and
                  stream checks, then GpuBackend.launch): what one launch with `--host interp` costs
                  on the host, beyond the interpreter's dispatch of the jump.

And, for compiled host code (what `verimim run --target gpu` runs): a Mim `main` that launches the
kernel --n times in a host loop on the default stream, compiled to native code with llvmlite
(verimim.runtime.host) and timed as a whole, against a Python loop of --n raw cuLaunchKernel
calls on the default stream: the mean per launch of each loop, median of 5 repetitions.

Reports the medians and the ratios to `raw`. Without a CUDA device it says so and exits 0.

    python benchmarks/launch.py [--n 20000] [--json]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verimim.runtime.cuda import device_available  # noqa: E402

KERNEL = """
con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 32, (), data: gpu.GlobalPtr «32; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let m1 = mem.store (m1, mem.lea (data, item_id), 42I32);
    return (m1, m3, m4, m5);
"""

HEADER = "\nplugin core;\nplugin mem;\nplugin gpu;\n"

SRC = HEADER + KERNEL + """
fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «32; I32» m1;
    ret (m0, m1, m4) = gpu.launch (1, 32, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 0I32);
"""


LOOP_SRC = HEADER + KERNEL + """
fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «32; I32» m1;
    loop (m0, m1, m4, 0)
    where
    con loop (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM, i: Nat) =
        (done, body)#(core.ncmp.l (i, N_LAUNCHES)) (m0, m1, m4)
        where
        con body (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM) =
            ret (m0, m1, m4) = gpu.launch (1, 32, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
            loop (m0, m1, m4, core.nat.add (i, 1));
        con done (m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM) =
            let m1 = gpu.free.block (m1, d);
            let m0 = gpu.deinit (m0, m1, m4);
            return (m0, 0I32);
        end;
    end;
"""


def native_loop(n: int) -> dict[str, float]:
    """Per-launch host time of compiled host code versus a raw cuLaunchKernel loop (µs)."""
    from verimim.frontend.loader import load_program
    from verimim.runtime.cuda import Context, KernelArgs
    from verimim.runtime.hostrt import compile_program, jit, run_jitted

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "loop.mim"
        f.write_text(LOOP_SRC.replace("N_LAUNCHES", str(n)))
        world, _ = load_program(str(f), [])
    ctx = Context(0)
    prog = compile_program(world, ctx.sm())
    assert prog.device is not None
    native = []
    for _ in range(5):
        jm = jit(prog)
        t0 = time.perf_counter_ns()
        assert run_jitted(jm, ["loop"]) == 0
        native.append((time.perf_counter_ns() - t0) / n / 1e3)
    ctx = Context(0)  # the runtime released the context it used; take it again
    mod = ctx.load_module(prog.device.ptx)
    fn = ctx.get_function(mod, "kernel")
    dptr = ctx.mem_alloc(128)
    packed = KernelArgs([ctypes.c_uint64(dptr)])
    cu = ctx.cu
    s = ctx.default_stream()
    raw = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, packed.address, 0)
        ctx.synchronize()
        raw.append((time.perf_counter_ns() - t0) / n / 1e3)
    ctx.mem_free(dptr)
    ctx.unload_module(mod)
    return {"native_loop_us": statistics.median(native), "raw_loop_us": statistics.median(raw)}


def per_call(fn, n: int, drain) -> float:  # type: ignore[no-untyped-def]
    for _ in range(100):
        fn()
    drain()
    times = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
        if i % 256 == 255:
            drain()
    drain()
    return statistics.median(times) / 1e3  # µs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="launches per method")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not device_available():
        print("launch: no CUDA device (cuda-python, an NVIDIA driver and a GPU are needed); nothing measured")
        return 0
    from verimim.frontend.loader import load_program
    from verimim.interp.machine import Machine, Thread
    from verimim.interp.memory import Ptr
    from verimim.interp.values import Closure, Stream, Token
    from verimim.plug import gpu_interp
    from verimim.runtime.backend import GpuBackend, install
    from verimim.runtime.cuda import KernelArgs
    from verimim.runtime.pipeline import split_program

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "launch.mim"
        f.write_text(SRC)
        world, _ = load_program(str(f), [])
    prog = split_program(world)
    backend = GpuBackend(prog.device)
    machine = Machine(world)
    install(machine, backend)
    backend.init()
    ctx = backend.ctx
    assert ctx is not None
    st = gpu_interp.state(machine)
    st.open = True
    # a non-default stream, as the interpreter's stream_init makes one
    h = st.next_handle
    st.next_handle += 1
    st.live_streams.add(h)
    backend.stream_init(h)
    stream = backend.stream(h)
    block = machine.memory.alloc(1, 128, "heap", None, "data")
    backend.alloc(block)
    ptr = Ptr(block, 0)
    ld = backend.module(16)
    fn = ctx.get_function(ld.module, "kernel")
    cu = ctx.cu
    packed = KernelArgs([ctypes.c_uint64(backend.device_ptr(ptr))])

    def drain() -> None:
        ctx.stream_sync(stream)

    def raw() -> None:
        cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, packed.address, 0)

    def via_backend() -> None:
        backend.launch("kernel", 1, 32, h, ptr, 0)

    launch_sem = machine.semantics["gpu.launch"][1]
    th = Thread("host")
    kernel_decl = world.externals.get("kernel") or next(m for m in world.muts if m.name == "kernel")
    largs = [None, (1, 32, Stream(h), 0, ()), Closure(kernel_decl, {}), ptr, (Token(0), Token(1), Token(4))]

    def via_gpu_launch() -> None:
        launch_sem(machine, th, largs, None)

    res = {"raw_us": per_call(raw, a.n, drain), "backend_us": per_call(via_backend, a.n, drain),
           "gpu_launch_us": per_call(via_gpu_launch, a.n, drain)}
    res.update(native_loop(a.n))
    res["native_ratio"] = res["native_loop_us"] / res["raw_loop_us"]
    res["backend_ratio"] = res["backend_us"] / res["raw_us"]
    res["gpu_launch_ratio"] = res["gpu_launch_us"] / res["raw_us"]
    # correctness: the kernel stored 42 everywhere
    data = backend.read_device(ptr, 128)
    res["correct"] = data == (42).to_bytes(4, "little") * 32
    name = ctx.name()
    backend.close()
    if a.json:
        print(json.dumps({"device": name, "launches": a.n, **res}, indent=2))
    else:
        print(f"device: {name}; median host time per launch over {a.n} launches (µs)")
        print(f"  raw cuLaunchKernel        {res['raw_us']:8.2f}")
        print(f"  GpuBackend.launch         {res['backend_us']:8.2f}   {res['backend_ratio']:.2f}x raw")
        print(f"  gpu.launch (interpreter)  {res['gpu_launch_us']:8.2f}   {res['gpu_launch_ratio']:.2f}x raw")
        print(f"  kernel result correct: {res['correct']}")
        print(f"loops of {a.n} launches on the default stream, mean per launch, median of 5 (µs)")
        print(f"  raw cuLaunchKernel loop   {res['raw_loop_us']:8.2f}")
        print(f"  compiled host code loop   {res['native_loop_us']:8.2f}   {res['native_ratio']:.2f}x raw")
    return 0


if __name__ == "__main__":
    sys.exit(main())
