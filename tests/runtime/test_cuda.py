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
