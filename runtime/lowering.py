"""The lowering base that the code generators share: a World's types and values in LLVM IR
(llvmlite), a body's nodes emitted in the one body schedule (verimim.ir.schedule), and the
`core` and `mem` operations — for kernels (verimim.runtime.nvptx, through
verimim.runtime.cps's continuation graphs) and for the host (verimim.runtime.host).

- `ModuleContext`: module-wide state (the llvmlite module, intrinsics, shared-memory globals)
  and the mapping of Mim types to LLVM types and their leaves;
- `Scope`: the values one block instance has at hand, chained to its creator's;
- `BodyCompiler`: scheduling and the operations of one function's blocks; subclasses add the
  continuation graph (cps), the kernel entry and the host operations.

Integer arithmetic follows the `core` plugin exactly: `Idx s` lives in the smallest of
i1/i8/i16/i32/i64 holding s - 1; when s is that type's full range, operations are native LLVM
ops (with nuw/nsw from the mode); otherwise (e.g. `Idx 4` in an i8) they are computed in i64 and
reduced modulo s. Anything else raises `VerimimError("E-UNSUPPORTED", …)` naming the construct.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verimim.diagnostics import Loc, VerimimError
from verimim.ir.defs import (
    App, Arr, Axiom, Bot, Def, Extract, IdxT, Insert, Lit, MutLam, NatT, Pack, Pi, Sigma, Top, Tuple,
    TypeU, Univ, Var, mentions,
)
from verimim.ir.schedule import Scopes, schedule
from verimim.frontend.loader import in_program
from verimim.ir.world import World
from verimim.layout import NVPTX64, field_offsets, layout_of
from verimim.plug import core_ops
from verimim.plug.core import BIT2_TAGS as _BIT2_TAGS, MODE_NSW, MODE_NUW  # the core plugin's, not a copy

TRIPLE = "nvptx64-nvidia-cuda"
DYN_SMEM = "verimim_dyn_smem"


def unsupported(what: str, loc: Loc | None = None) -> VerimimError:
    return VerimimError("E-UNSUPPORTED", f"the GPU backend cannot compile {what}", loc)


# Aggregates are kept as one LLVM value per element (loads, stores and packs included): past this
# many, the code would not fit in memory (a pack of 2^32 elements took all of it).
MAX_UNROLLED_ELEMENTS = 1 << 16


def _check_unrolled(n: int, what: str, loc: Loc | None) -> None:
    if n > MAX_UNROLLED_ELEMENTS:
        raise unsupported(f"{what} of {n} elements as values (at most {MAX_UNROLLED_ELEMENTS}; "
                          f"index into memory instead)", loc)


def _at_user_node(e: VerimimError, d: Def) -> VerimimError:
    """The error of compiling the constant d, placed at d when its own place is nowhere or in a
    plugin (a type is hash-consed: the one node of a type a plugin declares carries the plugin's
    place). Nodes a phase made get their places from the rewriter (verimim.phases.rewriter._locate)."""
    if in_program(e.loc) or not in_program(d.loc):
        return e
    return VerimimError(e.code, e.message, d.loc, e.related)


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a compiled kernel: a scalar leaf of the launch arguments.

    `path` indexes into the interpreter's value of `args` (a Python tuple, or the value itself
    for a single argument); `kind` is "int" (bits, unsigned, 1 ⇒ passed as a byte), "ptr"
    (address space `space`) or "stream"."""

    path: tuple[int, ...]
    kind: str
    bits: int = 64
    space: int = 0


@dataclass
class KernelInfo:
    name: str
    n_groups: int
    n_items: int
    params: list[ParamInfo]
    dyn_smem: bool
    static_smem_bytes: int = 0


# ----------------------------------------------------------------------------- values


class Ret:
    """The kernel's `return` continuation."""


RET = Ret()


@dataclass(frozen=True)
class P:
    """A pointer value with what is known of its alignment."""

    v: Any
    align: int
    space: int


def _pointee_align(t: Def) -> int:
    """The alignment a pointer to t has: t's, or, for an array of a length known only at run
    time (`argv`'s «⊤:Nat; Ptr0 …»), its element's (an array is aligned as its elements)."""
    lay = layout_of(t, NVPTX64)
    if lay is not None:
        return lay.align
    if isinstance(t, Arr) and not t.body.bvd:
        return _pointee_align(t.body)
    return 1


def _access_align(q: P) -> int:
    """The alignment a scalar load or store promises LLVM: what is known of the pointer, never
    its type's (memory is bytes, SEMANTICS.md): a pointer cast from a byte array's element
    (`bitcast (Ptr0 I64) (lea (buf, i))`) may be anywhere, and a promised `align 8` let LLVM fold
    its address's low bits to 0."""
    return min(q.align, 16)


def _lowbit(x: int) -> int:
    return x & -x if x else 1 << 30


def _align_at(align: int, off: int) -> int:
    return min(align, _lowbit(off)) if off else align


def _int_bits(s: int) -> int | None:
    if s <= 2:
        return 1
    for b in (8, 16, 32, 64):
        if s <= 2**b:
            return b
    return None


# ----------------------------------------------------------------------------- compiler


class ModuleContext:
    """Module-wide state: the llvmlite module, intrinsics, globals."""

    def __init__(self, world: World, param_align: int) -> None:
        from llvmlite import ir

        self.ir = ir
        self.world = world
        self.param_align = param_align
        self.module = ir.Module(name="verimim_device")
        self.module.triple = TRIPLE
        self.i1, self.i8, self.i32, self.i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
        self.ptr = ir.PointerType()  # generic (address space 0): what `malloc` returns
        self._fns: dict[str, Any] = {}
        self._dyn: Any = None
        self._static: dict[tuple[int, int], Any] = {}
        self._static_count = 0
        self._static_cache: dict[int, bool] = {}

    def intrinsic(self, name: str, ret: Any, args: list[Any]) -> Any:
        fn = self._fns.get(name)
        if fn is None:
            ir = self.ir
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
            self._fns[name] = fn
        return fn

    def dyn_smem(self) -> Any:
        if self._dyn is None:
            ir = self.ir
            g = ir.GlobalVariable(self.module, ir.ArrayType(self.i8, 0), DYN_SMEM, addrspace=3)
            g.linkage = "external"
            # llvmlite's GlobalVariable.__init__ sets align and initializer to None: pyright takes that as their type
            g.align = 16  # pyright: ignore[reportAttributeAccessIssue]
            g.type = ir.PointerType(addrspace=3)  # an opaque pointer (llvmlite types it)
            self._dyn = g
        return self._dyn

    def static_slot(self, key: tuple[int, int], size: int, align: int, kernel: str) -> Any:
        g = self._static.get(key)
        if g is None:
            ir = self.ir
            ty = ir.ArrayType(self.i8, size)
            g = ir.GlobalVariable(self.module, ty, f"{kernel}.smem.{self._static_count}", addrspace=3)
            self._static_count += 1
            g.initializer = ir.Constant(ty, ir.Undefined)  # pyright: ignore[reportAttributeAccessIssue] (see dyn_smem)
            g.linkage = "internal"
            g.align = max(16, align)  # pyright: ignore[reportAttributeAccessIssue]
            g.type = ir.PointerType(addrspace=3)
            self._static[key] = g
        return g

    # ------------------------------------------------------------------ types

    def is_static(self, d: Def) -> bool:
        """A type-level node (a type, a tuple of types): no run-time value."""
        hit = self._static_cache.get(d.gid)
        if hit is not None:
            return hit
        if isinstance(d, (TypeU, Univ)):
            res = True
        elif isinstance(d, Tuple):
            res = bool(d.ops) and all(self.is_static(x) for x in d.ops)
        elif isinstance(d, (Var, MutLam, Lit)):
            res = False
        else:
            try:
                res = d.bvd == 0 and self.world.level(self.world.type_of(d)) >= 1
            except Exception:
                res = False
        self._static_cache[d.gid] = res
        return res

    def field_types(self, t: Def) -> list[Def]:
        w = self.world
        if isinstance(t, Sigma):
            if t.dependent:
                raise unsupported(f"the dependent type `{show_short(t)}`", t.loc)
            return [w.shift(f, -1) for f in t.ops]
        if isinstance(t, Arr):
            if not isinstance(t.shape, Lit) or t.body.bvd:
                raise unsupported(f"the array type `{show_short(t)}` (its length must be a literal)", t.loc)
            _check_unrolled(t.shape.value, f"the array type `{show_short(t)}`", t.loc)
            return [w.shift(t.body, -1)] * t.shape.value
        raise AssertionError

    def scalar(self, t: Def) -> tuple[str, int, int] | None:
        """("int", bits, modulus) / ("ptr", space, pointee-align) / ("stream", 64, 0) / ("mem", …);
        None for aggregates."""
        if isinstance(t, NatT):
            return ("int", 64, 2**64)
        if isinstance(t, IdxT):
            if isinstance(t.size, Top):
                return ("int", 64, 2**64)  # `Idx ⊤:Nat`, the index of an array of unknown length: as a Nat
            if not isinstance(t.size, Lit):
                # `Idx n` of a run-time n (the cells of a buffer of `argc + 2`): held as its Nat,
                # as `Idx ⊤:Nat` is; an operation that needs the modulus (`core.wrap` …) is refused
                # where it asks for it (`_mod`)
                if not isinstance(self.world.type_of(t.size), NatT):
                    raise unsupported(f"the type `{show_short(t)}` (an `Idx` of unknown size)", t.loc)
                return ("int", 64, 2**64)
            bits = _int_bits(t.size.value)
            if bits is None:
                raise unsupported(f"the type `{show_short(t)}` (wider than 64 bits)", t.loc)
            return ("int", bits, t.size.value)
        if isinstance(t, Axiom) and t.annex == "gpu.Stream":
            return ("stream", 64, 0)
        if isinstance(t, App) and isinstance(t.head, Axiom):
            if t.head.annex == "mem.M":
                return ("mem", 0, 0)
            if t.head.annex == "mem.Ptr":
                pointee, space = _ptr_parts(t)
                return ("ptr", space, _pointee_align(pointee))
        if isinstance(t, (Sigma, Arr)):
            return None
        if isinstance(t, Pi):
            return ("cont", 0, 0)  # known at compile time (verimim.runtime.cps), never a φ
        raise unsupported(f"values of type `{show_short(t)}` in a kernel", t.loc)

    def llty(self, kind: tuple[str, int, int]) -> Any:
        k, a, _ = kind
        if k == "int":
            return self.ir.IntType(a)
        if k == "stream":
            return self.i64
        if k == "ptr":
            # A local pointer is generic: a slot of an activation of a genuine recursion is a heap
            # block (runtime.cps), which no addrspace(5) pointer reaches; LLVM's address-space
            # inference gives an `alloca`'s accesses back to the local space.
            return self.ir.PointerType(addrspace=a) if a and a != 5 else self.ir.PointerType()
        if k == "cont":  # a function stored in memory or loaded from it: nothing the backends lay out
            raise unsupported("a function or continuation value as data (stored in or loaded from memory)", None)
        raise AssertionError(k)

    def leaves(self, t: Def, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], tuple[str, int, int]]]:
        """The scalar leaves of a type (memory tokens and units have none)."""
        sc = self.scalar(t)
        if sc is not None:
            if sc[0] == "cont":
                raise unsupported(f"a continuation `{show_short(t)}` passed as data", t.loc)
            return [] if sc[0] == "mem" else [(path, sc)]
        out = []
        for i, f in enumerate(self.field_types(t)):
            out += self.leaves(f, path + (i,))
        return out

    def build(self, t: Def, it: Any, static: Any = None) -> Any:
        """A structured value of type t from an iterator over its scalar leaves' values (and one
        over its continuation-typed leaves, known at compile time: verimim.runtime.cps)."""
        sc = self.scalar(t)
        if sc is not None:
            if sc[0] == "cont":
                if static is None:
                    raise unsupported(f"a continuation `{show_short(t)}` passed as data", t.loc)
                return next(static)
            if sc[0] == "mem":
                return None
            v = next(it)
            return P(v, sc[2], sc[1]) if sc[0] == "ptr" else v
        return tuple(self.build(f, it, static) for f in self.field_types(t))

    def flatten(self, t: Def, v: Any, out: list[Any], loc: Loc | None, static: list[Any] | None = None,
                fit: Callable[[Any, int], Any] | None = None) -> None:
        """The inverse of `build`: v's scalar leaves into out, its continuation-typed ones into
        static (which must then be given); `fit`: each integer leaf made the bits of its type
        (an `Idx ⊤:Nat` value passed for an I32 parameter)."""
        sc = self.scalar(t)
        if sc is not None:
            if sc[0] == "mem":
                return
            if sc[0] == "cont":
                if static is None or hasattr(v, "type") or isinstance(v, tuple) or v is None:
                    raise unsupported(f"a continuation-typed value {v!r} that is not known at compile time", loc)
                static.append(v)
                return
            if isinstance(v, P):
                v = v.v
            if v is None or isinstance(v, (tuple, Ret)) or not hasattr(v, "type"):
                raise unsupported(f"a value {v!r} where a `{show_short(t)}` is expected", loc)
            out.append(fit(v, sc[1]) if fit is not None and sc[0] == "int" else v)
            return
        fts = self.field_types(t)
        if not isinstance(v, tuple) or len(v) != len(fts):
            raise unsupported(f"a value of the wrong shape for `{show_short(t)}`", loc)
        for f, x in zip(fts, v):
            self.flatten(f, x, out, loc, static, fit)


def show_short(d: Def) -> str:
    try:
        from verimim.printer import show

        return show(d)
    except Exception:
        return type(d).__name__


def _ptr_parts(t: App) -> tuple[Def, int]:
    arg = t.arg
    if isinstance(arg, Tuple) and len(arg.ops) == 2 and isinstance(arg.ops[1], Lit):
        return arg.ops[0], arg.ops[1].value
    raise unsupported(f"the pointer type `{show_short(t)}` (address space not a literal)", t.loc)


def literal_of(d: Def, what: str, loc: Loc | None) -> int:
    if isinstance(d, Lit):
        return d.value
    raise unsupported(f"{what} `{show_short(d)}` that is not a literal", loc)


# runtime operand positions in `app.args()` of the axioms the backend compiles, and their arity
AXIOMS: dict[str, tuple[int, tuple[int, ...]]] = {}
for _n in ("add", "sub", "mul"):
    AXIOMS[f"core.nat.{_n}"] = (1, (0,))
for _n in ("e", "ne", "l", "le", "g", "ge"):
    AXIOMS[f"core.ncmp.{_n}"] = (1, (0,))
for _n in ("e", "ne", "ul", "ule", "ug", "uge", "sl", "sle", "sg", "sge"):
    AXIOMS[f"core.icmp.{_n}"] = (2, (1,))
for _n in ("add", "sub", "mul", "shl"):
    AXIOMS[f"core.wrap.{_n}"] = (3, (2,))
for _n in ("sdiv", "udiv", "srem", "urem"):
    AXIOMS[f"core.div.{_n}"] = (2, (1,))
for _n in _BIT2_TAGS:
    AXIOMS[f"core.bit2.{_n}"] = (3, (2,))
for _n in ("f", "neg", "id", "t"):
    AXIOMS[f"core.bit1.{_n}"] = (3, (2,))
for _n in ("a", "l"):
    AXIOMS[f"core.shr.{_n}"] = (2, (1,))
for _n in ("umin", "umax", "smin", "smax"):
    AXIOMS[f"core.extrema.{_n}"] = (2, (1,))
AXIOMS.update({
    "core.idx": (3, (2,)), "core.idx_unsafe": (1, (0,)),
    "core.bitcast": (3, (2,)), "core.conv.s": (3, (2,)), "core.conv.u": (3, (2,)),
    "core.trait.size": (1, ()), "core.trait.align": (1, ()),
    "mem.load": (2, (1,)), "mem.store": (2, (1,)), "mem.slot": (2, (1,)), "mem.mslot": (2, (1,)),
    "mem.lea": (2, (1,)), "mem.remem": (2, (1,)), "buffer.ptr_copy": (2, (1,)),
    "gpu.sync_work_items": (1, (0,)),
})


class Scope:
    def __init__(self, parent: Scope | None) -> None:
        self.parent = parent
        self.vals: dict[int, Any] = {}

    def get(self, gid: int) -> Any:
        s: Scope | None = self
        while s is not None:
            if gid in s.vals:
                return s.vals[gid]
            s = s.parent
        raise KeyError(gid)

    def has(self, gid: int) -> bool:
        s: Scope | None = self
        while s is not None:
            if gid in s.vals:
                return True
            s = s.parent
        return False


_MISSING = object()


class BodyCompiler:
    """Scheduling and the `core`/`mem` operations of one function's blocks (verimim.runtime.cps
    adds the continuation graph, verimim.runtime.host the host operations)."""

    # runtime operand positions of the operations this side compiles, and where that is
    axioms: dict[str, tuple[int, tuple[int, ...]]] = AXIOMS
    where = "in a kernel"

    def __init__(self, ctx: ModuleContext, kernel: MutLam, name: str) -> None:
        self.ctx = ctx
        self.ir = ctx.ir
        self.w = ctx.world
        self.kernel = kernel
        self.name = name
        self.scopes = Scopes(self.w)
        self.builder: Any = None
        self.entry_builder: Any = None  # the entry block's builder and the function: set by the
        self.fn: Any = None             # subclass that makes the function (verimim.runtime.cps)
        self.scope = Scope(None)

    def _with_param_align(self, v: Any) -> Any:
        if isinstance(v, P):
            return P(v.v, max(v.align, self.ctx.param_align), v.space)
        if isinstance(v, tuple):
            return tuple(self._with_param_align(x) for x in v)
        return v

    def _sreg(self, which: str, n: int, t: Def) -> Any:
        ctx = self.ctx
        bits = _int_bits(n)
        assert bits is not None
        ty = self.ir.IntType(bits)
        if n == 1:
            return self.ir.Constant(ty, 0)
        fn = ctx.intrinsic(f"llvm.nvvm.read.ptx.sreg.{which}.x", ctx.i32, [])
        v = self.entry_builder.call(fn, [])
        if bits < 32:
            return self.entry_builder.trunc(v, ty)
        if bits > 32:
            return self.entry_builder.zext(v, ty)
        return v

    # ------------------------------------------------------------------ bodies

    def _as_i1(self, v: Any, loc: Loc | None) -> Any:
        if v.type == self.ctx.i1:
            return v
        return self.builder.icmp_unsigned("!=", v, self.ir.Constant(v.type, 0))

    # ------------------------------------------------------------------ scheduling

    def _is_leaf(self, d: Def) -> bool:
        return isinstance(d, (Var, Lit, MutLam, Axiom, Bot, Top)) or self.ctx.is_static(d)

    def _operands(self, d: Def) -> list[Def]:
        if self._is_leaf(d):
            return []
        if isinstance(d, App):
            head = d.head
            if isinstance(head, Axiom):
                spec = self.axioms.get(head.annex)
                if spec is None:
                    raise unsupported(f"`{head.annex}` {self.where}", d.loc)
                arity, pos = spec
                if d.depth != arity:
                    raise unsupported(f"`{head.annex}` applied to {d.depth} of its {arity} arguments", d.loc)
                args = d.args()
                return [args[i] for i in pos]
            raise unsupported(f"the call `{show_short(d)}` for a value (only continuations are compiled)", d.loc)
        if isinstance(d, Pack):
            return [d.body] if d.body.bvd == 0 else []
        return list(d.ops)

    def _compute(self, root: Def | list[Def]) -> None:
        """Emit the nodes below root (or roots, in order) not yet available, in the one body schedule
        (verimim.ir.schedule: operands left to right), which the interpreter follows too."""
        scope = self.scope
        for d in schedule(root if isinstance(root, list) else [root], lambda x: self._is_leaf(x) or scope.has(x.gid), self._operands):
            if not scope.has(d.gid):
                scope.vals[d.gid] = self._emit(d)

    def _val(self, d: Def) -> Any:
        ctx, ir = self.ctx, self.ir
        if isinstance(d, (Lit, Bot, Top)):
            try:
                return self._constant(d)
            except VerimimError as e:  # its type's place may be a plugin's declaration
                raise _at_user_node(e, d) from None
        if isinstance(d, MutLam):
            raise unsupported(f"the continuation `{d.name}` as a value", d.loc)
        if ctx.is_static(d):
            return d
        try:
            return self.scope.get(d.gid)
        except KeyError:
            pass
        if isinstance(d, Var):
            raise unsupported(f"a parameter of `{d.mut.name}` (`{show_short(d)}`) used outside it", d.loc)
        if isinstance(d, Axiom):
            raise unsupported(f"the value `{d.annex}` {self.where}", d.loc)
        raise VerimimError("E-INTERNAL", f"nvptx: `{show_short(d)}` used before it was computed", d.loc)

    def _constant(self, d: Lit | Bot | Top) -> Any:
        ctx, ir = self.ctx, self.ir
        if isinstance(d, Lit):
            sc = ctx.scalar(d.ops[0])
            if sc is None or sc[0] != "int":
                raise unsupported(f"the literal `{show_short(d)}`", d.loc)
            if isinstance(d.value, int) and d.value >= 1 << sc[1]:
                # (a `Nat` is 64 bits on a target: LLVM would cut the literal to its low bits
                # without a word, as docs/semantics.md refuses to store such a Nat)
                raise unsupported(f"the `Nat` literal {d.value}, 2^64 or more: a target's `Nat` has 64 bits", d.loc)
            return ir.Constant(ir.IntType(sc[1]), d.value)
        return self._undef(d.ops[0])

    def _undef(self, t: Def) -> Any:
        ctx = self.ctx
        sc = ctx.scalar(t)
        if sc is None:
            return tuple(self._undef(f) for f in ctx.field_types(t))
        if sc[0] == "mem":
            return None
        undef = self.ir.Constant(ctx.llty(sc), self.ir.Undefined)
        # a pointer is a P everywhere (its loads and stores read `.v`): ⊥ of a pointer type too
        return P(undef, 1, sc[1]) if sc[0] == "ptr" else undef

    # ------------------------------------------------------------------ nodes

    def _emit(self, d: Def) -> Any:
        if isinstance(d, Tuple):
            return tuple(self._val(x) for x in d.ops)
        if isinstance(d, Pack):
            n = d.shape.value if isinstance(d.shape, Lit) else None
            if n is None:
                raise unsupported(f"the pack `{show_short(d)}` of unknown length", d.loc)
            _check_unrolled(n, f"the pack `{show_short(d)}`", d.loc)
            if d.body.bvd == 0:
                v = self._val(d.body)
                return tuple(v for _ in range(n))
            out = []
            for j in range(n):
                e = self.w.open(d.body, self.w.lit_idx(n, j))
                self._compute(e)
                out.append(self._val(e))
            return tuple(out)
        if isinstance(d, Extract):
            tv = self._val(d.tup)
            if isinstance(d.index, Lit):
                if isinstance(tv, tuple):
                    return tv[d.index.value]
                if d.index.value == 0:
                    return tv
                raise unsupported(f"`{show_short(d)}`", d.loc)
            if not isinstance(tv, tuple):
                return tv
            return self._select_element(self._val(d.index), list(tv), d)
        if isinstance(d, Insert):
            tv = self._val(d.ops[0])
            idx, v = d.ops[1], self._val(d.ops[2])
            if not isinstance(tv, tuple):
                return v
            if isinstance(idx, Lit):
                out = list(tv)
                out[idx.value] = v
                return tuple(out)
            iv = self._val(idx)
            return tuple(self._select2(self._eq(iv, j), v, x, d.loc) for j, x in enumerate(tv))
        if isinstance(d, App):
            head = d.head
            assert isinstance(head, Axiom)
            annex = head.annex
            args = d.args()
            if annex.startswith("core."):
                return self._core(annex, args, d)
            if annex.startswith("mem.") or annex == "buffer.ptr_copy":
                return self._mem(annex, args, d)
            if annex == "gpu.sync_work_items":
                # `barrier.sync 0`, not `bar.sync 0` (llvm.nvvm.barrier0, which is `.aligned`: every
                # thread of a warp must execute the same barrier instruction). One barrier of the
                # program may become several instructions here (a continuation is compiled once
                # per static argument), and work-items that met at it in the source may reach
                # different copies: with `.aligned` that is undefined and hung the GPU (campaign).
                i32 = self.ir.IntType(32)
                fn = self.ctx.intrinsic("llvm.nvvm.barrier.sync", self.ir.VoidType(), [i32])
                self.builder.call(fn, [self.ir.Constant(i32, 0)])
                return (None, None)
        raise unsupported(f"`{show_short(d)}` ({type(d).__name__})", d.loc)

    def _eq(self, iv: Any, j: int) -> Any:
        return self.builder.icmp_unsigned("==", iv, self.ir.Constant(iv.type, j))

    def _select2(self, c: Any, a: Any, b: Any, loc: Loc | None) -> Any:
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
            return tuple(self._select2(c, x, y, loc) for x, y in zip(a, b))
        if a is None and b is None:
            return None
        if isinstance(a, P) and isinstance(b, P):
            return P(self.builder.select(c, a.v, b.v), min(a.align, b.align), a.space)
        if not hasattr(a, "type") or not hasattr(b, "type"):
            raise unsupported("choosing between continuations or values of different shapes by a run-time index", loc)
        return self.builder.select(c, a, b)

    def _select_element(self, iv: Any, elems: list[Any], d: Extract) -> Any:
        """The element of `d.tup` at the run-time index iv (the code generators of continuations
        override it: a continuation chosen at run time)."""
        return self._select(iv, elems, d.loc)

    def _select(self, iv: Any, elems: list[Any], loc: Loc | None) -> Any:
        res = elems[0]
        for j in range(1, len(elems)):
            res = self._select2(self._eq(iv, j), elems[j], res, loc)
        return res

    # ------------------------------------------------------------------ core

    def _mod(self, s: Def, loc: Loc | None) -> tuple[int, int, bool]:
        sv = literal_of(s, "an integer width", loc)
        bits = _int_bits(sv)
        if bits is None:
            raise unsupported(f"integers modulo {sv} (wider than 64 bits)", loc)
        return sv, bits, sv == 2**bits

    def _reduce64(self, x: Any, s: int, bits: int, signed_in: bool = False) -> Any:
        """x (i64, exact; signed when signed_in) modulo s, truncated to the container."""
        b, ir = self.builder, self.ir
        i64 = self.ctx.i64
        if s & (s - 1) == 0:
            r = b.and_(x, ir.Constant(i64, s - 1))
        elif signed_in and s > 2 ** 63:
            # (`srem` reads a modulus past 2^63 as negative; every x of i64 is above -s and below
            # s: x, or x + s where x is negative)
            neg = b.icmp_signed("<", x, ir.Constant(i64, 0))
            r = b.select(neg, b.add(x, ir.Constant(i64, s)), x)
        elif signed_in:
            r0 = b.srem(x, ir.Constant(i64, s))
            neg = b.icmp_signed("<", r0, ir.Constant(i64, 0))
            r = b.select(neg, b.add(r0, ir.Constant(i64, s)), r0)
        else:
            r = b.urem(x, ir.Constant(i64, s))
        return r if bits == 64 else b.trunc(r, ir.IntType(bits))

    def _bit2_not_pow2(self, op: str, s: int, x: Any, y: Any) -> Any:
        """`core.bit2.OP` on an `Idx s`, s not a power of two: and_/or_/xor_ reduced modulo s
        and the complement s - 1 - x, composed as the interpreter composes them
        (core_ops.bit2_composed). A bitwise result is below 2^⌈log2 s⌉ < 2s: one subtraction
        reduces it."""
        b, ir = self.builder, self.ir
        ty = x.type
        modulus = ir.Constant(ty, s)

        def positive(name: str, p: Any, q: Any) -> Any:
            r = {"and_": b.and_, "or_": b.or_, "xor_": b.xor}[name](p, q)
            return b.select(b.icmp_unsigned(">=", r, modulus), b.sub(r, modulus), r)

        return core_ops.bit2_composed(op, x, y, positive, lambda v: b.sub(ir.Constant(ty, s - 1), v),
                                      ir.Constant(ty, 0), ir.Constant(ty, s - 1))

    def _wide(self, x: Any) -> Any:
        return x if x.type.width == 64 else self.builder.zext(x, self.ctx.i64)

    def _signed64(self, x: Any, s: int, native: bool, loc: Loc | None) -> Any:
        """The signed value of an `Idx s` as an i64."""
        b, ir, i64 = self.builder, self.ir, self.ctx.i64
        if native:
            return x if x.type.width == 64 else b.sext(x, i64)
        if s > 2**63:
            raise unsupported(f"signed arithmetic modulo {s}", loc)
        # (up to 2^63 the negative value w - s of an upper-half w is an i64)
        w = b.zext(x, i64)
        neg = b.icmp_unsigned(">=", w, ir.Constant(i64, (s + 1) // 2))
        return b.select(neg, b.sub(w, ir.Constant(i64, s)), w)

    def _core(self, annex: str, args: list[Def], d: App) -> Any:
        b, ir, ctx = self.builder, self.ir, self.ctx
        i64 = ctx.i64
        loc = d.loc
        op = annex.split(".")[-1]
        if annex.startswith("core.nat."):
            x, y = self._val(args[0])
            if op == "add":
                return b.add(x, y)
            if op == "mul":
                return b.mul(x, y)
            return b.select(b.icmp_unsigned("<", x, y), ir.Constant(i64, 0), b.sub(x, y))
        if annex.startswith("core.ncmp."):
            x, y = self._val(args[0])
            return b.icmp_unsigned({"e": "==", "ne": "!=", "l": "<", "le": "<=", "g": ">", "ge": ">="}[op], x, y)
        if annex.startswith("core.icmp."):
            s, bits, native = self._mod(args[0], loc)
            x, y = self._val(args[1])
            rel = {"e": "==", "ne": "!=", "ul": "<", "ule": "<=", "ug": ">", "uge": ">=",
                   "sl": "<", "sle": "<=", "sg": ">", "sge": ">="}[op]
            if op.startswith("s"):
                if native:
                    return b.icmp_signed(rel, x, y)
                return b.icmp_signed(rel, self._signed64(x, s, False, loc), self._signed64(y, s, False, loc))
            return b.icmp_unsigned(rel, x, y)
        if annex.startswith("core.wrap."):
            s, bits, native = self._mod(args[0], loc)
            mode = literal_of(args[1], "a wrap mode", loc)
            x, y = self._val(args[2])
            if native:
                flags = (["nsw"] if mode & MODE_NSW else []) + (["nuw"] if mode & MODE_NUW else [])
                if bits == 1:
                    flags = []
                fn = {"add": b.add, "sub": b.sub, "mul": b.mul, "shl": b.shl}[op]
                return fn(x, y, flags=flags)
            if s > 2**32 and s & (s - 1):
                # (a product of two such operands overflows an i64; below 2^32 it does not, and a
                # power of two divides 2^64: the i64 result wraps to the same residue)
                raise unsupported(f"`{annex}` modulo {s}", loc)
            wx, wy = self._wide(x), self._wide(y)
            if op == "add":
                r = b.add(wx, wy)
            elif op == "sub":
                r = b.sub(b.add(wx, ir.Constant(i64, s)), wy)
            elif op == "mul":
                r = b.mul(wx, wy)
            else:
                r = b.shl(wx, wy)
            return self._reduce64(r, s, bits)
        if annex.startswith("core.div."):
            s, bits, native = self._mod(args[0], loc)
            _mem, (x, y) = self._val(args[1])
            if op in ("udiv", "urem"):
                return (None, (b.udiv if op == "udiv" else b.urem)(x, y))
            if native:
                return (None, (b.sdiv if op == "sdiv" else b.srem)(x, y))
            sx, sy = self._signed64(x, s, False, loc), self._signed64(y, s, False, loc)
            r = (b.sdiv if op == "sdiv" else b.srem)(sx, sy)
            return (None, self._reduce64(r, s, bits, signed_in=True))
        if annex.startswith("core.bit2."):
            s, bits, native = self._mod(args[0], loc)
            table = _BIT2_TAGS.index(op)
            x, y = self._val(args[2])
            ty = x.type
            if s == 1:
                return ir.Constant(ty, 0)  # (`Idx 1` holds 0 only: its one bit is no value of it)
            if s & (s - 1):
                return self._bit2_not_pow2(op, s, x, y)
            ones = ir.Constant(ty, (1 << ty.width) - 1)
            acc = ir.Constant(ty, 0)
            for xb in (0, 1):
                for yb in (0, 1):
                    if (table >> (xb << 1 | yb)) & 1:
                        term = b.and_(x if xb else b.xor(x, ones), y if yb else b.xor(y, ones))
                        acc = b.or_(acc, term)
            if native:
                return acc
            kbits = core_ops.width(s)
            return b.and_(acc, ir.Constant(ty, (1 << kbits) - 1)) if kbits < ty.width else acc
        if annex.startswith("core.bit1."):
            s, bits, native = self._mod(args[0], loc)
            x = self._val(args[2])
            ty = ir.IntType(bits)
            if op == "f":
                return ir.Constant(ty, 0)
            if op == "t":
                return ir.Constant(ty, s - 1)
            if op == "id":
                return x
            return b.sub(ir.Constant(ty, s - 1), x)
        if annex.startswith("core.shr."):
            s, bits, native = self._mod(args[0], loc)
            x, y = self._val(args[1])
            if op == "l":
                return b.lshr(x, y)
            if native:
                return b.ashr(x, y)
            r = b.ashr(self._signed64(x, s, False, loc), self._wide(y))
            return self._reduce64(r, s, bits, signed_in=True)
        if annex.startswith("core.extrema."):
            s, bits, native = self._mod(args[0], loc)
            x, y = self._val(args[1])
            if op.startswith("s"):
                sx, sy = (x, y) if native else (self._signed64(x, s, False, loc), self._signed64(y, s, False, loc))
                lt = b.icmp_signed("<", sx, sy)
            else:
                lt = b.icmp_unsigned("<", x, y)
            return b.select(lt, x, y) if op.endswith("min") else b.select(lt, y, x)
        if annex == "core.idx":
            # l mod s: what mode 0 gives for l ≥ s (any other mode leaves that undefined)
            s, bits, native = self._mod(args[0], loc)
            return self._reduce64(self._wide(self._val(args[2])), s, bits)
        if annex == "core.idx_unsafe":
            # an index of unknown range (`Idx ⊤:Nat`) is held as its Nat; the access through it is
            # what is checked (as the interpreter does)
            return self._val(args[0])
        if annex == "core.bitcast":
            src, dst = args[0], args[1]
            x = self._val(args[2])
            if src is dst:
                return x
            src_k, dst_k = ctx.scalar(src), ctx.scalar(dst)
            if src_k is not None and dst_k is not None:
                kinds = (src_k[0], dst_k[0])
                if kinds == ("int", "int"):
                    return self._resize(x, dst_k[1])
                if kinds == ("ptr", "ptr") and src_k[1] == dst_k[1]:
                    return x
                if kinds == ("ptr", "int") and isinstance(x, P):  # NULL is 0 (upstream: ptrtoint)
                    return b.ptrtoint(x.v, ir.IntType(dst_k[1]))
                if kinds == ("int", "ptr"):  # inttoptr; what it points to is the address's
                    return P(b.inttoptr(x, ctx.llty(dst_k)), 1, dst_k[1])
            raise unsupported(f"`core.bitcast` from `{show_short(src)}` to `{show_short(dst)}`", loc)
        if annex in ("core.conv.s", "core.conv.u"):
            ss, sbits, snat = self._mod(args[0], loc)
            ds, dbits, dnat = self._mod(args[1], loc)
            x = self._val(args[2])
            if annex == "core.conv.u":
                if dnat or ss <= ds:
                    return self._resize(x, dbits)
                return self._reduce64(self._wide(x), ds, dbits)
            if snat and dnat:
                if dbits > sbits:
                    return b.sext(x, ir.IntType(dbits))
                return self._resize(x, dbits)
            sx = self._signed64(x, ss, snat, loc)
            if dnat:
                return self._resize(sx, dbits)
            return self._reduce64(sx, ds, dbits, signed_in=True)
        if annex in ("core.trait.size", "core.trait.align"):
            trait = self._trait(op, args[0])
            if trait is None:
                raise unsupported(f"`{annex}` of `{show_short(args[0])}`", loc)
            return trait
        raise unsupported(f"`{annex}` in a kernel", loc)

    def _trait(self, op: str, t: Def) -> Any:
        """`core.trait.size`/`align` of `t` (None: no layout). The World folds it for a type of
        literal sizes; what is left is an array of a run-time length, `«n; T»` (a buffer of
        `argc + 2` cells): n times its element's size (arrays are packed), aligned as its element."""
        lay = layout_of(t, NVPTX64)
        if lay is not None:
            return self.ir.Constant(self.ctx.i64, lay.size if op == "size" else lay.align)
        if not isinstance(t, Arr) or isinstance(t.shape, (Top, Bot)) or mentions(t.body, 0):
            return None  # (`«⊤:Nat; T»` has no size; an element depending on its index no one size)
        if not isinstance(self.w.type_of(t.shape), NatT):
            return None
        elem = self._trait(op, t.body)
        if elem is None or op == "align":
            return elem
        self._compute(t.shape)  # (a type's operands are not the call's: not scheduled before it)
        return self.builder.mul(self._val(t.shape), elem)

    def fit_int(self, x: Any, bits: int) -> Any:
        """x (an integer) in a container of `bits` bits (ModuleContext.scalar's: an `Idx ⊤:Nat`
        value where the type holds fewer is cut); anything else as it is."""
        if not isinstance(getattr(x, "type", None), self.ir.IntType) or x.type.width == bits:
            return x
        return self._resize(x, bits)

    def _resize(self, x: Any, bits: int) -> Any:
        w = x.type.width
        if w == bits:
            return x
        ty = self.ir.IntType(bits)
        return self.builder.zext(x, ty) if bits > w else self.builder.trunc(x, ty)

    # ------------------------------------------------------------------ mem

    def _implicit(self, d: Def, n: int, loc: Loc | None) -> tuple[Def, ...]:
        if n == 1:
            return (d,)
        if isinstance(d, Tuple) and len(d.ops) == n:
            return d.ops
        raise unsupported(f"the implicit arguments `{show_short(d)}`", loc)

    def _slot_memory(self, size: int, align: int) -> Any:
        """A stack block of one activation: an `alloca` in the entry block, one per slot operation
        per compiled instance (every instance is one activation at a time)."""
        entry = self.fn.entry_basic_block
        ab = self.ir.IRBuilder(entry)
        ab.position_at_start(entry)
        mem = ab.alloca(self.ir.ArrayType(self.ctx.i8, size))
        mem.align = align  # pyright: ignore[reportAttributeAccessIssue] (None in llvmlite's __init__)
        mem.type = self.ir.PointerType()  # an opaque pointer (llvmlite types it)
        return mem

    def _mem(self, annex: str, args: list[Def], d: App) -> Any:
        loc = d.loc
        ctx = self.ctx
        if annex == "mem.remem":
            return None
        if annex == "mem.load":
            t, _a = self._implicit(args[0], 2, loc)
            _m, p = self._val(args[1])
            return (None, self._load(t, p, 0, loc))
        if annex == "mem.store":
            t, _a = self._implicit(args[0], 2, loc)
            _m, p, v = self._val(args[1])
            self._store(t, p, 0, v, loc)
            return None
        if annex == "buffer.ptr_copy":
            # The bytes, padding and all, as the interpreter copies them (a load and store of the
            # value dropped the padding, and made a store per cell of a large array); memmove:
            # a hand-written copy may overlap. Natively, unwritten bytes are copied as they are.
            _m, dst, src = self._val(args[1])
            size = self._trait("size", args[0])
            if size is None:
                raise unsupported(f"`buffer.ptr_copy` of a `{show_short(args[0])}` (no size)", loc)
            i1 = self.ir.IntType(1)
            move = ctx.intrinsic("llvm.memmove.p0.p0.i64", self.ir.VoidType(), [ctx.ptr, ctx.ptr, ctx.i64, i1])
            self.builder.call(move, [dst.v, src.v, size, self.ir.Constant(i1, 0)])
            return None
        if annex in ("mem.slot", "mem.mslot"):
            t, a = self._implicit(args[0], 2, loc)
            space = literal_of(a, "an address space", loc)
            lay = layout_of(t, NVPTX64)
            if annex == "mem.slot":
                if lay is None:
                    raise unsupported(f"a slot of type `{show_short(t)}` (no layout)", loc)
                if not isinstance(args[1], Tuple):
                    raise unsupported(f"`{show_short(d)}` (slot id not visible)", loc)
                size, id_node = lay.size, args[1].ops[1]
            else:
                if not isinstance(args[1], Tuple):
                    raise unsupported(f"`{show_short(d)}`", loc)
                size = literal_of(args[1].ops[1], "a slot size", loc)
                id_node = args[1].ops[2]
            align = max(lay.align if lay else 1, 16)
            if space == 3:
                slot_id = literal_of(id_node, "a shared slot id", loc) if id_node is not None else 0
                g = ctx.static_slot((d.gid, slot_id), max(size, 1), align, self.name)
                return (None, P(g, align, 3))
            if space in (0, 5):  # (a local slot's pointer is generic: ModuleContext.llty)
                return (None, P(self._slot_memory(max(size, 1), align), align, space))
            raise unsupported(f"`{annex}` in address space {space} in a kernel", loc)
        if annex == "mem.lea":
            n, ts, _a = self._implicit(args[0], 3, loc)
            p, i = self._val(args[1])
            if not isinstance(p, P):
                raise unsupported("`mem.lea` of a non-pointer", loc)
            if isinstance(ts, Pack):
                if ts.body.bvd:
                    raise unsupported(f"`mem.lea` into `{show_short(ts)}`", loc)
                lay = layout_of(ts.body, NVPTX64)
                if lay is None:
                    raise unsupported(f"`mem.lea` into elements of type `{show_short(ts.body)}`", loc)
                stride = lay.size
                if isinstance(i, self.ir.Constant):
                    return self._offset(p, int(i.constant) * stride)
                off = self.builder.mul(self._wide(i), self.ir.Constant(ctx.i64, stride))
                v = self.builder.gep(p.v, [off], inbounds=True, source_etype=ctx.i8)
                return P(v, max(min(p.align, _lowbit(stride)), 1), p.space)
            if isinstance(ts, Tuple):
                sig = self.w.sigma(self.w.shift(f, 1) for f in ts.ops)
                offs = field_offsets(sig, NVPTX64) if isinstance(sig, Sigma) else None
                if offs is None or not isinstance(i, self.ir.Constant):
                    raise unsupported(f"`mem.lea` into `{show_short(ts)}` by a run-time index", loc)
                return self._offset(p, offs[int(i.constant)])
            return p
        raise unsupported(f"`{annex}` in a kernel", loc)

    def _offset(self, p: P, off: int) -> P:
        if off == 0:
            return p
        v = self.builder.gep(p.v, [self.ir.Constant(self.ctx.i64, off)], inbounds=True, source_etype=self.ctx.i8)
        return P(v, _align_at(p.align, off), p.space)

    def _load(self, t: Def, p: P, off: int, loc: Loc | None) -> Any:
        ctx, b, ir = self.ctx, self.builder, self.ir
        sc = ctx.scalar(t)
        if sc is not None:
            if sc[0] == "mem":
                return None
            q = self._offset(p, off)
            if sc[0] == "int" and sc[1] == 1:
                return b.trunc(b.load(q.v, typ=ctx.i8, align=1), ctx.i1)
            v = b.load(q.v, typ=ctx.llty(sc), align=_access_align(q))
            return P(v, sc[2], sc[1]) if sc[0] == "ptr" else v
        if isinstance(t, Arr):
            elems = ctx.field_types(t)
            vec = self._vector_plan(elems[0], len(elems), p, off)
            if vec is not None:
                k, w = vec
                out: list[Any] = []
                for start in range(0, len(elems), k):
                    q = self._offset(p, off + start * w)
                    vty = ir.VectorType(ir.IntType(8 * w), k)
                    v = b.load(q.v, typ=vty, align=k * w)
                    out += [b.extract_element(v, ir.Constant(ctx.i32, j)) for j in range(k)]
                return tuple(out)
            lay = layout_of(elems[0], NVPTX64)
            assert lay is not None
            return tuple(self._load(e, p, off + j * lay.size, loc) for j, e in enumerate(elems))
        offs = field_offsets(t, NVPTX64) if isinstance(t, Sigma) else None
        if offs is None:
            raise unsupported(f"loading a `{show_short(t)}`", loc)
        return tuple(self._load(f, p, off + o, loc) for f, o in zip(ctx.field_types(t), offs))

    def _vector_plan(self, elem: Def, n: int, p: P, off: int) -> tuple[int, int] | None:
        """(elements per vector, element bytes) when an array of n integer elements can be moved
        with aligned vector loads/stores of up to 16 bytes."""
        sc = self.ctx.scalar(elem)
        if sc is None or sc[0] != "int" or sc[1] < 8:
            return None
        w = sc[1] // 8
        align = _align_at(p.align, off)
        k = min(16 // w, align // w, n)
        while k >= 2 and (n % k or k & (k - 1)):
            k //= 2
        return (k, w) if k >= 2 else None

    def _store(self, t: Def, p: P, off: int, v: Any, loc: Loc | None) -> None:
        ctx, b, ir = self.ctx, self.builder, self.ir
        sc = ctx.scalar(t)
        if sc is not None:
            if sc[0] == "mem":
                return
            q = self._offset(p, off)
            if isinstance(v, P):
                v = v.v
            if sc[0] == "int":
                # (an `Idx ⊤:Nat` value, held as its i64 Nat, where the type has fewer bits —
                # `core.idx_unsafe l` stored into an I32 cell — is cut to them, as the
                # interpreter stores it; it was stored whole, over the cells beside it)
                v = self.fit_int(v, sc[1])
            if sc[0] == "int" and sc[1] == 1:
                b.store(b.zext(v, ctx.i8), q.v, align=1)
                return
            b.store(v, q.v, align=_access_align(q))
            return
        if not isinstance(v, tuple):
            raise unsupported(f"storing a `{show_short(t)}` from a value of another shape", loc)
        if isinstance(t, Arr):
            elems = ctx.field_types(t)
            vec = self._vector_plan(elems[0], len(elems), p, off)
            if vec is not None:
                k, w = vec
                for start in range(0, len(elems), k):
                    q = self._offset(p, off + start * w)
                    vty = ir.VectorType(ir.IntType(8 * w), k)
                    acc = ir.Constant(vty, ir.Undefined)
                    for j in range(k):
                        acc = b.insert_element(acc, v[start + j], ir.Constant(ctx.i32, j))
                    b.store(acc, q.v, align=k * w)
                return
            lay = layout_of(elems[0], NVPTX64)
            assert lay is not None
            for j, e in enumerate(elems):
                self._store(e, p, off + j * lay.size, v[j], loc)
            return
        offs = field_offsets(t, NVPTX64) if isinstance(t, Sigma) else None
        if offs is None:
            raise unsupported(f"storing a `{show_short(t)}`", loc)
        for f, o, x in zip(ctx.field_types(t), offs, v):
            self._store(f, p, off + o, x, loc)


# ----------------------------------------------------------------------------- driver


_initialized = False


def llvm_binding() -> Any:
    global _initialized
    import llvmlite.binding as llvm

    if not _initialized:
        try:
            llvm.initialize()
        except Exception:
            pass  # llvmlite ≥ 0.45 initializes itself (and may refuse the call)
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True
    return llvm
