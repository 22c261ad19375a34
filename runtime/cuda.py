"""A thin runtime over the CUDA driver API of `cuda-python` (`cuda.bindings.driver`).

`cuda` is imported lazily, on first use: importing this module never needs the package, a
driver or a GPU. `device_available()` answers False (and never raises) when any of them is
missing. Driver errors become `CudaError` (a `VerimimError` with code `E-INTERNAL`: verimim's
GPU backend is at fault, exit 3); asking for a device where there is none is `NoDeviceError`
(`E-USAGE`, exit 2).

Device pointers are plain Python ints throughout (`CUdeviceptr` values converted with int()).
"""
from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from typing import Any

from verimim.diagnostics import VerimimError

_cu: Any = None
_import_error: str | None = None


class CudaError(VerimimError):
    def __init__(self, message: str) -> None:
        super().__init__("E-INTERNAL", message, None)


class NoDeviceError(VerimimError):
    def __init__(self, message: str) -> None:
        super().__init__("E-USAGE", message, None)


def driver() -> Any:
    """The `cuda.bindings.driver` module (or `cuda.cuda` of cuda-python < 12.6)."""
    global _cu, _import_error
    if _cu is not None:
        return _cu
    try:
        from cuda.bindings import driver as cu  # type: ignore[import-not-found]
    except Exception as e1:  # noqa: BLE001 - any import failure means "no CUDA"
        try:
            from cuda import cuda as cu  # type: ignore[import-not-found,no-redef]
        except Exception as e2:  # noqa: BLE001
            _import_error = f"{e1}; {e2}"
            raise NoDeviceError("the GPU target needs cuda-python (`pip install cuda-python`) and an "
                                f"NVIDIA driver: {e1}") from None
    _cu = cu
    return cu


def _name(cu: Any, err: Any) -> str:
    try:
        e2, name = cu.cuGetErrorName(err)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001
        return str(err)


def check(result: Any, what: str = "CUDA call") -> Any:
    """Unpack a driver call's (CUresult, values...) tuple, raising on an error."""
    cu = driver()
    if not isinstance(result, tuple):
        result = (result,)
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CudaError(f"{what} failed: {_name(cu, err)}")
    rest = result[1:]
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def device_available() -> bool:
    """Whether cuda-python, a driver and at least one GPU are there (and VERIMIM_NO_GPU is not
    set: it makes a GPU machine behave as one without, e.g. for tests of the defaults). Never
    raises."""
    if os.environ.get("VERIMIM_NO_GPU"):
        return False
    try:
        cu = driver()
        (err,) = cu.cuInit(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return False
        err, n = cu.cuDeviceGetCount()
        return err == cu.CUresult.CUDA_SUCCESS and n > 0
    except Exception:  # noqa: BLE001
        return False


def _ptr(x: Any) -> int:
    return int(x)


DEVICE_HEAP_BYTES = 256 << 20  # the device heap of kernels' `malloc` (cps_dyn's records)


class Context:
    """The primary context of one device, made current on this thread."""

    def __init__(self, ordinal: int = 0) -> None:
        cu = driver()
        try:
            check(cu.cuInit(0), "cuInit")
            n = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        except CudaError as e:
            raise NoDeviceError(f"no usable CUDA device: {e.message}") from None
        if not n or ordinal >= n:
            raise NoDeviceError(f"no CUDA device {ordinal} (found {n})")
        self.cu = cu
        self.device = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = check(cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        # Records of continuations known only at run time (runtime/cps_dyn.py) come from the
        # device heap, never freed: CUDA's default 8 MiB is some 250,000 of them across a launch.
        # The limit is fixed once a kernel that calls malloc has run in the process's primary
        # context; a later setting fails and the first one stands.
        try:
            check(cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE, DEVICE_HEAP_BYTES), "cuCtxSetLimit")
        except CudaError:
            pass
        self.closed = False

    # ------------------------------------------------------------------ device facts

    def attribute(self, name: str) -> int:
        cu = self.cu
        attr = getattr(cu.CUdevice_attribute, name)
        return int(check(cu.cuDeviceGetAttribute(attr, self.device), "cuDeviceGetAttribute"))

    def sm(self) -> str:
        major = self.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = self.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        return f"sm_{major}{minor}"

    def name(self) -> str:
        raw = check(self.cu.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        return raw.split(b"\0")[0].decode() if isinstance(raw, bytes) else str(raw)

    # ------------------------------------------------------------------ modules

    def load_module(self, ptx: str) -> Any:
        data = ptx.encode() + b"\0"
        try:
            return check(self.cu.cuModuleLoadData(data), "cuModuleLoadData")
        except TypeError:
            buf = ctypes.create_string_buffer(data)
            return check(self.cu.cuModuleLoadData(ctypes.addressof(buf)), "cuModuleLoadData")

    def get_function(self, module: Any, name: str) -> Any:
        return check(self.cu.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")

    def unload_module(self, module: Any) -> None:
        check(self.cu.cuModuleUnload(module), "cuModuleUnload")

    def set_max_dynamic_shared(self, fn: Any, nbytes: int) -> None:
        cu = self.cu
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(cu.cuFuncSetAttribute(fn, attr, nbytes), "cuFuncSetAttribute")

    # ------------------------------------------------------------------ memory

    def mem_alloc(self, nbytes: int) -> int:
        return _ptr(check(self.cu.cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc({nbytes})"))

    def mem_free(self, dptr: int) -> None:
        check(self.cu.cuMemFree(dptr), "cuMemFree")

    def memset(self, dptr: int, byte: int, nbytes: int) -> None:
        if nbytes:
            check(self.cu.cuMemsetD8(dptr, byte, nbytes), "cuMemsetD8")

    def memcpy_htod(self, dptr: int, src: bytes | bytearray | memoryview, nbytes: int | None = None,
                    stream: Any = None) -> Any:
        """Copy host bytes to the device; returns the host buffer that must stay alive until an
        asynchronous copy is done."""
        n = len(src) if nbytes is None else nbytes
        if n == 0:
            return None
        buf = ctypes.create_string_buffer(bytes(src[:n]), n)
        if stream is None:
            check(self.cu.cuMemcpyHtoD(dptr, ctypes.addressof(buf), n), "cuMemcpyHtoD")
        else:
            check(self.cu.cuMemcpyHtoDAsync(dptr, ctypes.addressof(buf), n, stream), "cuMemcpyHtoDAsync")
        return buf

    def memcpy_dtoh(self, dst: bytearray, dptr: int, nbytes: int | None = None, offset: int = 0,
                    stream: Any = None) -> None:
        """Copy device bytes into dst[offset:offset+n] (synchronously, or on a stream: then dst
        is written when the stream is synchronized)."""
        n = len(dst) - offset if nbytes is None else nbytes
        if n == 0:
            return
        view = (ctypes.c_char * n).from_buffer(dst, offset)
        if stream is None:
            check(self.cu.cuMemcpyDtoH(ctypes.addressof(view), dptr, n), "cuMemcpyDtoH")
        else:
            check(self.cu.cuMemcpyDtoHAsync(ctypes.addressof(view), dptr, n, stream), "cuMemcpyDtoHAsync")

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        if stream is None:
            check(self.cu.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")
        else:
            check(self.cu.cuMemcpyDtoDAsync(dst, src, nbytes, stream), "cuMemcpyDtoDAsync")

    # ------------------------------------------------------------------ streams and events

    def default_stream(self) -> Any:
        return self.cu.CUstream(0)

    def stream_create(self) -> Any:
        return check(self.cu.cuStreamCreate(0), "cuStreamCreate")

    def stream_destroy(self, stream: Any) -> None:
        check(self.cu.cuStreamDestroy(stream), "cuStreamDestroy")

    def stream_sync(self, stream: Any) -> None:
        check(self.cu.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def synchronize(self) -> None:
        check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def event_create(self) -> Any:
        return check(self.cu.cuEventCreate(0), "cuEventCreate")

    def event_record(self, ev: Any, stream: Any = None) -> None:
        check(self.cu.cuEventRecord(ev, stream if stream is not None else self.default_stream()), "cuEventRecord")

    def event_sync(self, ev: Any) -> None:
        check(self.cu.cuEventSynchronize(ev), "cuEventSynchronize")

    def event_elapsed_ms(self, start: Any, end: Any) -> float:
        return float(check(self.cu.cuEventElapsedTime(start, end), "cuEventElapsedTime"))

    def event_destroy(self, ev: Any) -> None:
        check(self.cu.cuEventDestroy(ev), "cuEventDestroy")

    # ------------------------------------------------------------------ launches

    def launch(self, fn: Any, grid: int | tuple[int, int, int], block: int | tuple[int, int, int],
               args: Sequence[Any], shared_bytes: int = 0, stream: Any = None) -> None:
        """cuLaunchKernel with ctypes argument values (c_uint32(…), c_uint64(ptr), …)."""
        g = (grid, 1, 1) if isinstance(grid, int) else grid
        b = (block, 1, 1) if isinstance(block, int) else block
        params = pack_args(args)
        s = stream if stream is not None else self.default_stream()
        check(self.cu.cuLaunchKernel(fn, *g, *b, shared_bytes, s, params.address, 0), "cuLaunchKernel")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                check(self.cu.cuDevicePrimaryCtxRelease(self.device), "cuDevicePrimaryCtxRelease")
            except CudaError:
                pass


class KernelArgs:
    """A `void*[]` of pointers to ctypes values, kept alive with them."""

    def __init__(self, values: Sequence[Any]) -> None:
        self.values = list(values)
        n = len(self.values)
        self.array = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(v) for v in self.values])
        self.address: int | None = ctypes.addressof(self.array) if n else None


def pack_args(values: Sequence[Any] | KernelArgs) -> KernelArgs:
    return values if isinstance(values, KernelArgs) else KernelArgs(values)
