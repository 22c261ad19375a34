"""GPU tests: kernels compiled by verimim.runtime.nvptx run on a real device and agree with the
reference interpreter. Every test here skips cleanly without cuda-python, a driver or a GPU."""
from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import pytest

from verimim.diagnostics import VerimimError
from verimim.runtime.cuda import device_available

from .conftest import expected_result, kernel_programs, program_args
from .known_limits import xfail_if_known_limit

HAVE_GPU = device_available()
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA device (cuda-python, driver or GPU missing)")

PROGRAMS = kernel_programs()


def test_device_available_never_raises() -> None:
    assert device_available() in (True, False)


def _interp(path: Path, args: list[str]) -> int:
    from verimim.frontend.loader import load_program
    from verimim.interp.machine import Machine, find_main

    world, _ = load_program(str(path), [])
    return Machine(world).run_main(find_main(world), [str(path), *args])


def test_a_launch_without_a_device_world_names_the_missing_split() -> None:
    """A program whose own pipeline leaves out `gpu.split_apply` has no device World: the GPU
    backend's refusal names the split, as the host code generator's does, so that the corpus
    tests take it for that known limit (both corpus programs of that kind failed on the GPU)."""
    from verimim.runtime.backend import GpuBackend

    with pytest.raises(VerimimError) as err:
        GpuBackend(None).module()  # refused before any CUDA call: runs without a GPU
    assert err.value.code == "E-UNSUPPORTED"
    assert "does not run `gpu.split_apply`" in str(err.value)


@needs_gpu
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_on_gpu_matches_interpreter(path: Path) -> None:
    from verimim.runtime.backend import run_on_gpu

    args = program_args(path)
    want = _interp(path, args)
    exp = expected_result(path, args)
    if exp is not None:
        assert want == exp
    try:
        got, _warnings = run_on_gpu(str(path), args)
    except VerimimError as e:
        xfail_if_known_limit(e, path)
        raise
    assert got == want


@needs_gpu
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_compiled_program_on_gpu_matches_interpreter(path: Path) -> None:
    """Host code compiled by verimim.runtime.host (llvmlite JIT), kernels on the GPU."""
    from verimim.frontend.loader import load_program
    from verimim.runtime.hostrt import run_native

    args = program_args(path)
    world, _ = load_program(str(path), [])
    try:
        got = run_native(world, [str(path), *args])
    except VerimimError as e:
        xfail_if_known_limit(e, path)
        raise
    assert got == _interp(path, args)


@needs_gpu
def test_shared_reduce_kernel_directly() -> None:
    """Launch the compiled kernel of shared_reduce_barrier.mim (static shared memory, a barrier,
    a loop) by hand and compare device memory with the group sums."""
    from verimim.runtime.cuda import Context
    from verimim.runtime.nvptx import compile_device_module
    from verimim.runtime.pipeline import device_world_of

    path = next(p for p in PROGRAMS if p.name == "shared_reduce_barrier.mim")
    _host, dev = device_world_of(str(path))
    ctx = Context()
    dm = compile_device_module(dev, ctx.sm())
    mod = ctx.load_module(dm.ptx)
    fn = ctx.get_function(mod, "kernel")
    inp = [3 * k - 7 for k in range(8)]
    d_in = ctx.mem_alloc(32)
    d_out = ctx.mem_alloc(32)
    try:
        ctx.memcpy_htod(d_in, struct.pack("<8i", *inp))
        ctx.launch(fn, 2, 4, [ctypes.c_uint64(d_in), ctypes.c_uint64(d_out)])
        ctx.synchronize()
        out = bytearray(32)
        ctx.memcpy_dtoh(out, d_out)
        sums = [sum(inp[0:4])] * 4 + [sum(inp[4:8])] * 4
        assert list(struct.unpack("<8i", out)) == sums
    finally:
        ctx.mem_free(d_in)
        ctx.mem_free(d_out)
        ctx.unload_module(mod)
        ctx.close()


@needs_gpu
def test_vector_kernel_doubles(tmp_path: Path) -> None:
    """«4; I32» per work-item with v4 loads/stores: device results equal the interpreter's rule."""
    from verimim.runtime.cuda import Context
    from verimim.runtime.nvptx import compile_device_module
    from verimim.runtime.pipeline import device_world_of

    from .test_nvptx import VEC_KERNEL

    f = tmp_path / "vec.mim"
    f.write_text(VEC_KERNEL)
    _host, dev = device_world_of(str(f))
    ctx = Context()
    dm = compile_device_module(dev, ctx.sm())
    assert "ld.global.v4" in dm.ptx
    mod = ctx.load_module(dm.ptx)
    fn = ctx.get_function(mod, "kernel")
    vals = [(-1) ** k * (k * 1000003) % 2**31 for k in range(32)]
    a, b = ctx.mem_alloc(128), ctx.mem_alloc(128)
    try:
        ctx.memcpy_htod(a, struct.pack("<32i", *vals))
        ctx.launch(fn, 2, 4, [ctypes.c_uint64(a), ctypes.c_uint64(b)])
        ctx.synchronize()
        out = bytearray(128)
        ctx.memcpy_dtoh(out, b)
        want = [((2 * v + 2**31) % 2**32) - 2**31 for v in vals]
        assert list(struct.unpack("<32i", out)) == want
    finally:
        ctx.mem_free(a)
        ctx.mem_free(b)
        ctx.unload_module(mod)
        ctx.close()


DEEP_CARRIED = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 4, item_id: Idx 256, (), out: gpu.GlobalPtr «1024; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let t = core.nat.add (core.nat.mul (256, core.bitcast Nat group_id), core.bitcast Nat item_id);
    loop (m1, 0, core.bitcast I32 t, after)
    where
        con after (m1: gpu.GlobalM, r: I32) =
            return (mem.store (m1, mem.lea (out, core.idx 1024 0 t), r), m3, m4, m5);
        con adjust (m1: gpu.GlobalM, r: I32) = after (m1, core.wrap.add 0 (r, 7I32));
        con loop (m1: gpu.GlobalM, i: Nat, acc: I32, k: Cn [gpu.GlobalM, I32]) =
            (fin, body)#(core.ncmp.l (i, ITERS)) m1
            where
                con fin (m1: gpu.GlobalM) = k (m1, acc);
                con body (m1: gpu.GlobalM) =
                    loop (m1, core.nat.add (i, 1), core.wrap.add 0 (core.wrap.mul 0 (acc, 3I32), core.bitcast I32 i),
                          (after, adjust)#(core.ncmp.e (i, t)));
            end;
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, arr) = mem.alloc («1024; I32», 0) m0;
    let m0 = mem.store (m0, arr, ‹1024; 0I32›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, arr);
    ret (m0, m1, m4) = gpu.launch (4, 256, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, arr);
    let m1 = gpu.free.block (m1, d);
    let (m0, a) = mem.load (m0, mem.lea (arr, core.idx 1024 0 (core.nat.sub (ITERS, 1))));
    let (m0, b) = mem.load (m0, mem.lea (arr, 1000_1024));
    let m0 = mem.free (m0, arr);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, core.bit2.xor_ 0 (a, b));
"""


@needs_gpu
def test_a_loop_carrying_continuations_past_cudas_default_heap_runs(tmp_path: Path) -> None:
    """1024 work-items carry a continuation chosen at run time through 300 back edges: a few
    device-heap records per edge (cps_dyn: each candidate, and the return continuation they
    capture), tens of MB, past CUDA's default 8 MiB heap (the launch trapped:
    cuda.DEVICE_HEAP_BYTES raises it)."""
    from verimim.frontend.loader import load_program
    from verimim.runtime.hostrt import run_native

    iters = 300

    def final(t: int) -> int:
        acc = t
        for i in range(iters):
            acc = (acc * 3 + i) % 2**32
        return (acc + 7 * (t == iters - 1)) % 2**32

    f = tmp_path / "deep.mim"
    f.write_text(DEEP_CARRIED.replace("ITERS", str(iters)))
    world, _ = load_program(str(f), [])
    want = final(iters - 1) ^ final(1000)
    got = run_native(world, [str(f)]) % 2**32
    assert got == want
