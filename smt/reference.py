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


def abi_layout(t: Def, target: str = "nvptx64") -> tuple[int | None, int] | None:
    """(ABI size, ABI alignment) in bytes of t's LLVM type under the target's data layout, or
    None for a type with no fixed LLVM type (a symbolic size, a dependent sigma). The size is
    None for a type of 2^64 bytes or more: LLVM's sizes are 64-bit, so its answer wraps (and
    llvmlite reads one of 2^63 bytes or more as negative), and an array of 2^64 elements or
    more is no LLVM type at all; its alignment is still LLVM's."""
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
    if lt is None:
        return None
    key = (str(lt), target)  # (LLVM parses a type for every question: the specs ask often)
    hit = _LAYOUTS.get(key)
    if hit is None:
        td = _target_data(target)
        align = _fewest(lt).get_abi_alignment(td)
        size = None if _size_at_least_2p64(lt, td) else lt.get_abi_size(td) % 2 ** 64
        hit = _LAYOUTS[key] = (size, align)
        if len(_LAYOUTS) > 4096:
            _LAYOUTS.pop(next(iter(_LAYOUTS)))
    return hit


_LAYOUTS: dict[tuple[str, str], tuple[int | None, int]] = {}


def _fewest(lt: Any) -> Any:
    """lt with every array of one element at most: the same alignment (an array is aligned as
    its element), and a type LLVM can parse whatever the counts."""
    from llvmlite import ir

    if isinstance(lt, ir.ArrayType):
        return ir.ArrayType(_fewest(lt.element), min(lt.count, 1))
    if isinstance(lt, ir.LiteralStructType):
        return ir.LiteralStructType([_fewest(f) for f in lt.elements])
    return lt


def _size_at_least_2p64(lt: Any, td: Any) -> bool:
    """Whether lt is 2^64 bytes or more, computed with Python's integers from LLVM's sizes of
    its scalars and LLVM's alignments (C's struct layout, arrays packed by the element's
    padded size), so that LLVM is asked for a size only where its 64 bits hold it."""
    from llvmlite import ir

    def up(n: int, a: int) -> int:
        return -(-n // a) * a

    def size(x: Any) -> int:
        if isinstance(x, ir.ArrayType):
            return x.count * up(size(x.element), _fewest(x.element).get_abi_alignment(td))
        if isinstance(x, ir.LiteralStructType):
            off = 0
            for f in x.elements:
                off = up(off, _fewest(f).get_abi_alignment(td)) + size(f)
            return up(off, _fewest(x).get_abi_alignment(td)) if x.elements else 0
        return int(x.get_abi_size(td))  # an integer or a pointer

    return size(lt) >= 2 ** 64


def size_term(t: Def, namer: Namer, target: str = "x86_64") -> z3.ArithRef:
    """A type's size as a Z3 term: LLVM's value for a laid-out type; else an unknown named by
    the type's structure (the same in both Worlds, whatever the printer shows)."""
    lay = abi_layout(t, target)
    return z3.IntVal(lay[0]) if lay and lay[0] is not None else z3.Int(f"size_of[{namer.key(t)}]")


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
