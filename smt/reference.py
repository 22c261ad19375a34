"""What the specifications compare with, computed from the documents' rules and never by the
phases' own helpers (PHASES.md: "a specification never calls the phase's own helpers to compute
what it compares with"):

- `abi_layout`: the size and alignment of a type as LLVM gives them under the target's data
  layout (SEMANTICS.md: "sizes and alignments follow the LLVM data layout of the target"),
  through llvmlite's target data; the type is built here from the Mim type, never through
  verimim.layout, which the normalizers, `mem.alloc2malloc_repl` and `buffer.lower_ptr` use;
- `kernels`: the kernels of a World by the seed's definition of `gpu.launch` — the continuations
  it is applied to, and (after `gpu.split_apply`, where the device World launches nothing) the
  device World's external continuations whose parameters begin with the four device memory
  tokens `GlobalM, SharedM, ConstM, LocalM` — not by `verimim.phases.repl.kernels_of`.
"""
from __future__ import annotations

import functools
from typing import Any, cast

import z3

from verimim.ir.defs import App, Arr, Axiom, Def, IdxT, Lit, MutLam, NatT, Pi, Sigma
from verimim.ir.world import World
from verimim.smt.names import Namer

# LLVM's data layouts of the two targets (what clang and the NVPTX backend use).
DATA_LAYOUTS = {
    "nvptx64": "e-i64:64-i128:128-v16:16-v32:32-n16:32:64",
    "x86_64": "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128",
}
KERNEL_TOKENS = (1, 3, 4, 5)  # GlobalM, SharedM, ConstM, LocalM: the address spaces of mem.M


def abi_layout(t: Def, target: str = "nvptx64") -> tuple[int, int] | None:
    """(ABI size, ABI alignment) in bytes of t's LLVM type under the target's data layout, or
    None for a type with no fixed LLVM type (a symbolic size, a dependent sigma)."""
    from llvmlite import ir

    def ty(d: Def) -> ir.Type | None:
        if isinstance(d, NatT):
            return ir.IntType(64)
        if isinstance(d, IdxT) and isinstance(d.size, Lit) and isinstance(d.size.value, int):
            n = d.size.value  # the smallest of i1/i8/i16/i32/i64 that holds n - 1
            bits = next((b for b in (1, 8, 16, 32, 64) if n <= 2 ** b), None)
            return None if bits is None else ir.IntType(bits)
        if isinstance(d, Axiom) and d.annex == "gpu.Stream":
            return ir.IntType(8).as_pointer()
        if isinstance(d, Pi):
            return ir.IntType(8).as_pointer()  # a function (or continuation) is a function pointer
        if isinstance(d, App) and isinstance(d.head, Axiom):
            if d.head.annex in ("mem.Ptr", "buffer.Buf"):
                return ir.IntType(8).as_pointer()
            if d.head.annex == "mem.M":
                return ir.LiteralStructType([])
            return None
        if isinstance(d, Sigma) and not d.dependent:
            fields = [ty(f) for f in d.ops]
            return None if any(f is None for f in fields) else ir.LiteralStructType(fields)  # type: ignore[arg-type]
        if isinstance(d, Arr) and isinstance(d.shape, Lit) and not d.body.bvd:
            elem = ty(d.body)
            return None if elem is None else ir.ArrayType(elem, d.shape.value)
        return None

    lt = ty(t)
    if lt is None or _may_reach_2p64(lt):
        return None
    td = _target_data(target)
    # (llvmlite reads LLVM's unsigned 64-bit size as signed: one of 2^63 bytes or more is negative)
    return lt.get_abi_size(td) % 2 ** 64, lt.get_abi_alignment(td)


def _may_reach_2p64(lt: Any) -> bool:
    """Whether an LLVM type may be 2^64 bytes or more: LLVM's sizes are 64-bit, so its answer
    for such a type wraps, and an array of 2^64 elements is no LLVM type at all. An upper bound
    of the size, without a layout: a scalar is its bytes, and a field's padding (and a
    struct's tail) is less than its alignment, at most 8 here."""
    from llvmlite import ir

    def bound(x: Any) -> int:
        if isinstance(x, ir.ArrayType):
            return x.count * bound(x.element)
        if isinstance(x, ir.LiteralStructType):
            return sum(bound(f) + 8 for f in x.elements) + 8
        if isinstance(x, ir.IntType):
            return (x.width + 7) // 8
        return 8  # a pointer

    return bound(lt) >= 2 ** 64


def size_term(t: Def, namer: Namer, target: str = "x86_64") -> z3.ArithRef:
    """A type's size as a Z3 term: LLVM's value for a laid-out type; else an unknown named by
    the type's structure (the same in both Worlds, whatever the printer shows)."""
    lay = abi_layout(t, target)
    return z3.IntVal(lay[0]) if lay else z3.Int(f"size_of[{namer.key(t)}]")


@functools.lru_cache(maxsize=4)
def _target_data(target: str) -> Any:
    import llvmlite.binding as llvm

    return llvm.create_target_data(DATA_LAYOUTS[target])


def kernels(world: World) -> list[MutLam]:
    """The kernels of world, each once, in creation order (see the module's docstring). Two
    may share a name (a generic kernel specialised twice) until split_apply names them apart."""
    from verimim.phases.base import apps_of

    out: dict[int, MutLam] = {}
    for app in apps_of(world, "gpu.launch", 3):
        if isinstance(app.arg, MutLam):
            out[app.arg.gid] = app.arg
    for m in world.externals.values():
        if _takes_device_tokens(world, m):
            out[m.gid] = m
    return sorted(out.values(), key=lambda m: m.gid)


def kernels_by_name(world: World) -> dict[str, MutLam] | str:
    """The kernels of world by name (World.mut_lam names every mutable), or why not: two of
    one name, which no name pairs with their copies in another World."""
    out: dict[str, MutLam] = {}
    for k in kernels(world):
        name = cast(str, k.name)
        if name in out:
            return f"two kernels are named `{name}`"
        out[name] = k
    return out


def _takes_device_tokens(world: World, m: MutLam) -> bool:
    """Whether m is a continuation whose parameters begin with GlobalM, SharedM, ConstM, LocalM."""
    pi = m.pi
    if not isinstance(pi, Pi) or not world.is_cn(pi) or not isinstance(pi.dom, Sigma):
        return False
    fields = pi.dom.ops
    if len(fields) < len(KERNEL_TOKENS):
        return False
    for k, space in enumerate(KERNEL_TOKENS):
        f = world.shift(fields[k], -1)  # the fields lie under the sigma's binder
        if not (isinstance(f, App) and isinstance(f.head, Axiom) and f.head.annex == "mem.M"
                and isinstance(f.arg, Lit) and f.arg.value == space):
            return False
    return True
