"""The rewriting phases of the default pipeline, each one hook of the shared Rewriter.

- `mem.alloc2malloc_repl`: `mem.alloc (T, a) m` → `mem.malloc (T, a) (m, core.trait.size T)`,
  `mem.slot (T, a) (m, id)` → `mem.mslot (T, a) (m, core.trait.size T, id)`.
- `gpu.host_malloc2gpualloc_repl`: `mem.malloc (T, 1) (m, size)` → `gpu.alloc.block T m` and
  `mem.free (T, 1)` → `gpu.free.block`; a malloc whose size is not its type's is left alone and
  reported (`E-UNSUPPORTED`): upstream drops the size silently, we must not.
- `gpu.remove_double_syncs`: a `gpu.sync_work_items (m1, m3)` whose tokens both come from the
  immediately preceding sync, or are the kernel's entry tokens, is dropped — where it runs right
  after that sync in its block (continuation body), or first in the kernel's entry block.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from verimim.diagnostics import Diagnostic
from verimim.ir.defs import App, Axiom, Def, Extract, Lit, MutLam, Pi, Sigma, Tuple, Var, mentions
from verimim.ir.world import World
from verimim.phases.base import Phase, PhaseResult, Program, is_app_of, type_and_space, walk
from verimim.phases.rewriter import Rewriter
from verimim.printer import show
from verimim.phases.witness import Rewrites

if TYPE_CHECKING:
    from verimim.ir.schedule import Scopes


def full_app(d: Def, annex: str, depth: int) -> bool:
    return isinstance(d, App) and d.depth == depth and is_app_of(d, annex)


class RewritePhase(Phase):
    """A phase that rewrites every World of the program with `make_rewriter`."""

    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        raise NotImplementedError

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        res.witness = Rewrites()
        worlds = []
        for world in prog.worlds():
            worlds.append(self.make_rewriter(world, res).run())
        res.after = Program(worlds[0], worlds[1] if len(worlds) > 1 else None)
        return res


class _Alloc2Malloc(Rewriter):
    def __init__(self, old: World, res: PhaseResult) -> None:
        super().__init__(old)
        self.res = res

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        w = self.new
        if full_app(old, "mem.alloc", 2):
            ty_a, m = ops[0].ops[1], ops[1]  # type: ignore[union-attr]
            t = type_and_space(w, ty_a)[0]
            size = w.app(self.annex("core.trait.size"), t)
            if self._too_large(old, "mem.alloc", t, size):
                return None
            new = w.app(w.app(self.annex("mem.malloc"), ty_a), w.tuple([m, size]))
            self.res.rewrote(old, new)
            return new
        if full_app(old, "mem.slot", 2):
            ty_a, arg = ops[0].ops[1], ops[1]  # type: ignore[union-attr]
            t = type_and_space(w, ty_a)[0]
            m, slot_id = w.extract_n(arg, 2, 0), w.extract_n(arg, 2, 1)
            size = w.app(self.annex("core.trait.size"), t)
            if self._too_large(old, "mem.slot", t, size):
                return None
            new = w.app(w.app(self.annex("mem.mslot"), ty_a), w.tuple([m, size, slot_id]))
            self.res.rewrote(old, new)
            return new
        return None


    def _too_large(self, old: Def, op: str, t: Def, size: Def) -> bool:
        """A type of 2^64 bytes or more has no size a target can pass (`Nat` is 64 bits there):
        rewritten, its malloc would ask for the size modulo 2^64. Rejected, with the operation's
        place, instead."""
        if not (isinstance(size, Lit) and size.value >= 2**64):
            return False
        self.res.diagnostics.append(Diagnostic(
            "E-UNSUPPORTED", f"`{op}` of `{show(t)}`, a type of {size.value} bytes: no 64-bit target can "
            f"allocate 2^64 bytes or more", old.loc))
        return True


class Alloc2Malloc(RewritePhase):
    name = "mem.alloc2malloc_repl"

    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _Alloc2Malloc(world, res)


class _HostMalloc2GpuAlloc(Rewriter):
    def __init__(self, old: World, res: PhaseResult) -> None:
        super().__init__(old)
        self.res = res
        # In a World not split (a `_compile` without gpu.split_apply), the kernels' code is there
        # too: its mallocs are the kernel's own, and `gpu.alloc.block` is a host operation.
        self.kernel_code = launched_code(old)

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        w = self.new
        if old.gid in self.kernel_code:
            return None
        if full_app(old, "mem.malloc", 2):
            ty_a = ops[0].ops[1]  # type: ignore[union-attr]
            if not (isinstance(ty_a, Tuple) and ty_a.ops[1] is w.lit_nat(1)):
                return None
            t = ty_a.ops[0]
            arg = ops[1]
            m, size = w.extract_n(arg, 2, 0), w.extract_n(arg, 2, 1)
            want = w.app(self.annex("core.trait.size"), t)
            if size is not want:
                self.res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"`mem.malloc` in global memory of {show(size)} bytes for a `{show(t)}` "
                    f"of {show(want)} bytes: `gpu.alloc.block` allocates exactly its type, so this malloc "
                    f"cannot be rewritten", old.loc))
                return None
            new = w.app(w.app(self.annex("gpu.alloc.block"), t), m)
            self.res.rewrote(old, new)
            return new
        if full_app(old, "mem.free", 2):
            ty_a = ops[0].ops[1]  # type: ignore[union-attr]
            if not (isinstance(ty_a, Tuple) and ty_a.ops[1] is w.lit_nat(1)):
                return None
            new = w.app(w.app(self.annex("gpu.free.block"), ty_a.ops[0]), ops[1])
            self.res.rewrote(old, new)
            return new
        return None


class HostMalloc2GpuAlloc(RewritePhase):
    name = "gpu.host_malloc2gpualloc_repl"
    host_only = True

    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _HostMalloc2GpuAlloc(world, res)


def _leaf(d: Def) -> bool:
    return isinstance(d, (Lit, Axiom))


def _operands(scopes: "Scopes", d: Def) -> Iterable[Def]:
    """What the schedule computes before d: a mutable's captures, another node's operands."""
    return scopes.avail(d, _leaf).values() if isinstance(d, MutLam) else d.ops


def _may_touch_memory(world: World, d: Def) -> bool:
    """Whether d, an application, may have a memory effect of its own: a memory operation or a
    barrier, a call (of a function in direct style, `direct.cps2ds_dep`, a λ: what the callee
    does — with a token it is given or one it captured — is not looked into here), or any other
    operation of a plugin but the pure ones. These are the operations a barrier orders; one is
    dropped only where none of them runs between it and the one it follows. A partial
    application of an axiom (a function value: `mem.load @(I32, 3)`) and a type compute nothing."""
    if not isinstance(d, App):
        return False
    head = d.head
    if not isinstance(head, Axiom):
        return True
    if head.annex.startswith(("core.", "math.")) or head.annex in ("mem.lea", "mem.M", "mem.Ptr"):
        return False
    return not (d.bvd == 0 and isinstance(world.type_of(d), Pi))  # (open: its type is not at hand)


class _RemoveDoubleSyncs(Rewriter):
    """A continuation's body runs its operations in the one schedule the interpreter, the kernel
    verifier and the code generator share (verimim.ir.schedule), then its jump. A sync `r` whose
    tokens come from the sync `s` is redundant where, in every block that performs r, the block
    performs s too and runs no memory operation or barrier between them: two adjacent barriers
    are one. One on the kernel's entry tokens, where r is the first such operation of the
    kernel's entry block: a barrier before any memory operation is none. Elsewhere (an operation
    the tokens leave free runs between them, or another block did work first) r separates what
    runs before it from what follows, and is kept."""

    def __init__(self, old: World, res: PhaseResult, kernels: set[int]) -> None:
        super().__init__(old)
        self.res = res
        self.kernels = kernels
        self._performed: dict[int, list[tuple[int, list[int]]]] | None = None

    def performed(self, d: Def) -> list[tuple[int, list[int]]]:
        """Each block (by gid) that performs d, with the ordered operations it performs (by gid);
        found once, on demand."""
        if self._performed is None:
            from verimim.ir.schedule import Scopes, activation

            scopes = Scopes(self.old)
            self._performed = {}
            for m in walk(self.old):
                if not (isinstance(m, MutLam) and m.body is not None):
                    continue
                # (a continuation or function made here comes after what its closure captures, as
                # the interpreter makes it: a call of one that captured a barrier's token runs
                # after that barrier)
                ordered = [n.gid for n in activation(m, scopes, _leaf, lambda x: _operands(scopes, x))
                           if _may_touch_memory(self.old, n)]
                for gid in ordered:
                    self._performed.setdefault(gid, []).append((m.gid, ordered))
        return self._performed.get(d.gid, [])

    def redundant(self, old: App) -> bool:
        arg = old.arg
        if isinstance(arg, Tuple) and len(arg.ops) == 2:
            a, b = arg.ops
        else:
            return False
        if not (isinstance(a, Extract) and isinstance(b, Extract)):
            return False
        if not (isinstance(a.index, Lit) and isinstance(b.index, Lit)):
            return False
        src = a.tup
        if src is not b.tup:
            return False
        if (a.index.value, b.index.value) != (0, 1):
            return False
        blocks = self.performed(old)
        if not blocks:
            return False
        if full_app(src, "gpu.sync_work_items", 1):
            # straight from the preceding sync, in its block, nothing in between
            return all(src.gid in ops and ops.index(old.gid) == ops.index(src.gid) + 1 for _, ops in blocks)
        # the kernel's entry tokens, first in its entry block: nothing happened before
        return isinstance(src, Var) and src.mut.gid in self.kernels \
            and all(block == src.mut.gid and ops.index(old.gid) == 0 for block, ops in blocks)

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if full_app(old, "gpu.sync_work_items", 1) and isinstance(old, App) and self.redundant(old):
            new = ops[1]  # the tokens themselves
            self.res.rewrote(old, new)
            return new
        return None


def has_kernel_type(world: World, m: MutLam) -> bool:
    """Whether m has the type `gpu.launch` demands of a kernel: a continuation whose parameters
    begin with the device memory tokens `[gpu.GlobalM, gpu.SharedM, …]`."""
    dom = m.pi.dom
    if not (world.is_cn(m.pi) and isinstance(dom, Sigma) and len(dom.ops) >= 2):
        return False
    if any(mentions(f, 0) for f in dom.ops[:2]):
        return False  # a field depending on another (`m: mem.M (2·a + 3)` after `a: Nat`) is no token of a kernel
    first = [world.shift(f, -1) for f in dom.ops[:2]]  # fields lie under the sigma's binder
    return all(isinstance(f, App) and isinstance(f.head, Axiom) and f.head.annex == "mem.M"
               and isinstance(f.arg, Lit) and f.arg.value == space for f, space in zip(first, (1, 3)))


def launched_code(world: World) -> frozenset[int]:
    """The nodes that may run on the device, by gid: what each continuation of kernel type
    reaches (its body, what it calls). Every such continuation counts, not only those a
    `gpu.launch` names: a kernel may be launched through a parameter or chosen at run time.
    A value the kernel captures from an enclosing function is that function's code (a kernel
    nested in `main` reads main's `d`, it does not run main's mallocs): a node is followed only
    where it depends on no parameter, or on one of a mutable already reached."""
    from verimim.ir.schedule import Scopes

    scopes = Scopes()
    todo: list[Def] = [m for m in walk(world) if isinstance(m, MutLam) and has_kernel_type(world, m)]
    seen: set[int] = set()
    reached: set[MutLam] = set()
    while todo:
        d = todo.pop()
        if d.gid in seen:
            continue
        if not isinstance(d, MutLam):
            deps = scopes.deps(d)
            if deps and deps.isdisjoint(reached):
                continue  # computed outside, captured
        seen.add(d.gid)
        if isinstance(d, MutLam):
            reached.add(d)
            if d.body is not None:
                todo.append(d.body)
        elif not isinstance(d, Var):
            todo.extend(d.ops)
    return frozenset(seen)


def is_kernels_only(world: World) -> bool:
    """Whether `world` is a device World (split_apply's device side): no `main`, and every
    external a continuation of kernel type."""
    ext = world.externals
    return "main" not in ext and bool(ext) and all(has_kernel_type(world, m) for m in ext.values())


def kernels_of(world: World) -> list[MutLam]:
    """The kernels: the continuations passed to `gpu.launch` (the seed's definition), and in a
    device World (which launches nothing) its external continuations. In a World with `main`,
    an external continuation of kernel type that no launch names is host code, not a kernel."""
    from verimim.phases.base import apps_of

    out: dict[int, MutLam] = {}
    for app in apps_of(world, "gpu.launch", 3):
        k = app.arg
        if isinstance(k, MutLam):
            out[k.gid] = k
    if is_kernels_only(world):
        out.update((m.gid, m) for m in world.externals.values())
    return sorted(out.values(), key=lambda m: m.gid)


class RemoveDoubleSyncs(RewritePhase):
    name = "gpu.remove_double_syncs"

    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        # A kernel's parameters are the launch's fresh tokens only where nothing but a launch
        # enters it: a kernel that jumps back to itself gets tokens its own work made.
        entered = _jumped_to(world)
        kernels = {k.gid for k in kernels_of(world) if k.gid not in entered}
        return _RemoveDoubleSyncs(world, res, kernels)


def _jumped_to(world: World) -> set[int]:
    """The mutables the program uses other than as the kernel `gpu.launch` starts (called,
    passed, stored in a tuple, ...)."""
    out: set[int] = set()
    for d in walk(world):
        if isinstance(d, Var):
            continue
        started = d.arg if isinstance(d, App) and full_app(d, "gpu.launch", 3) else None
        out.update(op.gid for op in d.ops if isinstance(op, MutLam) and op is not started)
    return out

