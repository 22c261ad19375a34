"""Device World → LLVM IR for `nvptx64-nvidia-cuda` → PTX, with llvmlite.

Each kernel (an external of the device World, `Cn [M1, M3, M4, M5, Idx G, Idx I, smem, args,
return]`) becomes a `ptx_kernel` function whose parameters are the leaves of `args` (scalars,
and pointers in their NVPTX address space: 1 global, 3 shared, 4 constant, 5 local). Memory
tokens are erased; `group_id`/`item_id` are `ctaid.x`/`tid.x`; dynamic shared memory is one
module-wide `extern` `addrspace(3)` array; static shared slots are `addrspace(3)` globals (one
per slot operation and id); local slots are `alloca`s.

Control flow: every continuation nested in a kernel is one basic block whose parameters are
φ-nodes (one per scalar leaf of its parameter type); a jump adds the leaves of its argument as
incoming values. A branch `(f, t)#c args` is a `br i1`/`switch`, a loop is a back edge to a
continuation's block, and the kernel's `return` is `ret void`.

Scheduling mirrors the reference interpreter (verimim.interp.compile): a body's nodes are
emitted in post-order from its jump (operands left to right), except those its *creator*
(the innermost continuation whose parameter it uses, verimim.ir.schedule.Scopes.creator) or
the creator's creators have already computed. A nested continuation is only entered from the
continuations nested in its creator, so the creator's block dominates it and SSA is valid.

Types, values, scheduling and the `core`/`mem` operations are the lowering base's
(verimim.runtime.lowering), shared with the host backend; the continuation graph is
verimim.runtime.cps's. This module makes the device module: LLVM IR, optimised, to PTX.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import VerimimError
from verimim.ir.world import World
from verimim.runtime.cps import KernelCompiler
from verimim.runtime.cps_dyn import compile_until_static
from verimim.runtime.lowering import TRIPLE, KernelInfo, ModuleContext, llvm_binding


@dataclass
class DeviceModule:
    llvm_ir: str
    ptx: str
    sm: str
    kernels: dict[str, KernelInfo] = field(default_factory=dict)
    param_align: int = 16  # pointer parameters were compiled as aligned to this (bytes)


def llvm_knows(sm: str) -> bool:
    """Whether LLVM's NVPTX target knows the architecture `sm`: it takes any name, says on the
    process's stderr that it ignores one it does not know, and writes it into the PTX. Asked
    once per name with stderr (file descriptor 2: LLVM's C++ writes there) sent to a file."""
    if sm not in _KNOWN:
        import os
        import sys
        import tempfile

        with tempfile.TemporaryFile() as said:
            sys.stderr.flush()
            saved = os.dup(2)
            os.dup2(said.fileno(), 2)
            try:
                target_machine(sm)
            except Exception:  # noqa: BLE001 — no NVPTX target here: compile says so itself
                return True
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            said.seek(0)
            _KNOWN[sm] = b"not a recognized processor" not in said.read()
    return _KNOWN[sm]


_KNOWN: dict[str, bool] = {}


def target_machine(sm: str = "sm_90", opt: int = 3) -> Any:
    llvm = llvm_binding()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=sm, opt=opt)


def emit_llvm(device_world: World, *, param_align: int = 16, sm: str = "sm_90") -> tuple[str, dict[str, KernelInfo]]:
    """The (unoptimized) LLVM IR text of every kernel of the device World (the module compiled
    again, all kernels, where a recursion needs continuations known at run time: cps_dyn)."""
    tm = target_machine(sm)

    def attempt(dynamic: set[int]) -> tuple[str, dict[str, KernelInfo]]:
        ctx = ModuleContext(device_world, param_align)
        ctx.module.data_layout = str(tm.target_data)
        kernels: dict[str, KernelInfo] = {}
        for name, k in sorted(device_world.externals.items()):
            if k.body is None:
                continue
            comp = KernelCompiler(ctx, k, name)
            comp.dyn_muts = dynamic
            kernels[name] = comp.compile()
        return str(ctx.module), kernels

    return compile_until_static(attempt)


def optimize(mod: Any, tm: Any, level: int = 3) -> None:
    llvm = llvm_binding()
    try:
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pb = llvm.create_pass_builder(tm, pto)
        mpm = pb.getModulePassManager()
        mpm.run(mod, pb)
    except AttributeError:  # an llvmlite without the new pass manager: leave it to codegen
        pass


def compile_device_module(device_world: World, sm: str = "sm_90", *, param_align: int = 16,
                          opt: int = 3) -> DeviceModule:
    """Compile every kernel of the device World to LLVM IR and PTX for `sm`."""
    llvm = llvm_binding()
    text, kernels = emit_llvm(device_world, param_align=param_align, sm=sm)
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as e:
        raise VerimimError("E-INTERNAL", f"the NVPTX backend produced invalid LLVM IR: {e}", None) from None
    tm = target_machine(sm, opt=min(opt, 3))
    if opt:
        optimize(mod, tm, opt)
    ptx = tm.emit_assembly(mod)
    return DeviceModule(text, ptx, sm, kernels, param_align)


def empty_ptx(sm: str = "sm_90") -> str:
    """The PTX of a module with no kernel (a program that launches none): its header, which
    ptxas and the driver take (a file of a comment alone is no PTX: "Missing .version")."""
    llvm = llvm_binding()
    tm = target_machine(sm)
    mod = llvm.parse_assembly(f'target triple = "{TRIPLE}"\ntarget datalayout = "{tm.target_data}"\n')
    return tm.emit_assembly(mod)


def compile_device(device_world: World, sm: str = "sm_90") -> tuple[str, str]:
    """(LLVM IR text, PTX text) of the device World's kernels."""
    dm = compile_device_module(device_world, sm)
    return dm.llvm_ir, dm.ptx
