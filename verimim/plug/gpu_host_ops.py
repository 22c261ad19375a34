"""The `gpu` operations only the host may run (the CUDA driver API: sessions, streams,
allocations, copies, launches), with the number of arguments that applies each fully: a
kernel that calls one is not a GPU program. `gpu.split_apply` rejects it and the interpreter
stops at it in a work-item (E-UNSUPPORTED). (The specifications keep their own list.)"""
from __future__ import annotations

HOST_OPERATIONS: dict[str, int] = {
    "gpu.init": 1, "gpu.deinit": 1, "gpu.auto_init": 1, "gpu.auto_deinit": 1,
    "gpu.stream_init": 1, "gpu.stream_deinit": 1, "gpu.stream_sync": 1,
    "gpu.alloc.block": 2, "gpu.alloc.asyn": 2, "gpu.free.block": 2, "gpu.free.asyn": 2,
    "gpu.copy_to_device.block": 2, "gpu.copy_to_device.asyn": 2,
    "gpu.copy_to_host.block": 2, "gpu.copy_to_host.asyn": 2,
    "gpu.buf_alloc_copy": 2, "gpu.buf_copy_to_host": 2,
    "gpu.launch": 5,
}


def in_kernel_message(annex: str) -> str:
    return f"`{annex}` is a host operation (the CUDA driver's): a kernel cannot call it"
