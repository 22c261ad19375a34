"""Kernels that capture host values, made closed: the values become launch arguments.

A kernel nested in a host function cannot run on the device as it stands: the device has no
host activation to read the value from. This is what a curried kernel `con k (n: I32) (m1, …)`
launched as `k argc` becomes once β-reduction specialises it (a copy of the inner kernel that
uses `argc`). `gpu.split_apply` appends each such kernel's captured values to its arguments —
`«n; Ts»` becomes `«n + c; (Ts…, C₁, …, C_c)»` — and each launch site passes them: the same
values, which the launch site has at hand (a kernel's creator is an activation the launch sits
in). A capture that is no data (a function, a continuation or a type of the host) is
`E-UNSUPPORTED`, naming it; a memory token of the host is a `mem.M` crossing into the kernel
(`E-MEM-CROSSING`), and so is a memory operation on host values that only the kernel demands
(`kernel_only_effect`: made a capture, the host would perform it before the launch), or
`E-ADDR-SPACE` where that operation is on host memory, as for any kernel code.
"""
from __future__ import annotations

from dataclasses import dataclass

from verimim.ir.analysis import apps_with_head
from verimim.ir.defs import App, Def, Lit, MutLam, Pi, Sigma
from verimim.ir.schedule import Scopes
from verimim.ir.world import World
from verimim.phases.base import is_app_of, walk
from verimim.phases.inline import higher_order
from verimim.phases.rewriter import Rewriter
from verimim.printer import show

ARGS = 7  # the kernel parameter holding its arguments: [M1, M3, M4, M5, Idx G, Idx I, smem, args, return]


@dataclass
class Lifted:
    """A capturing kernel: its own argument count `n` and types `ts` (from its launches, in
    the old World), and the host nodes it captures, in the order they are appended."""

    kernel: MutLam
    n: int
    ts: Def
    caps: list[Def]


def captures(world: World, scopes: Scopes, k: MutLam) -> list[Def] | str:
    """The host nodes k's bodies use (maximal ones), or why k cannot be made closed."""
    if scopes.deps(k.pi):
        return "its type depends on host values"
    out: list[Def] = []
    for x in scopes.outside(k):
        if isinstance(x, MutLam):
            return f"it captures the host continuation `{x.name}`"
        why = _not_data(world, x)
        if why:
            return f"it captures `{show(x)}` ({why})"
        out.append(x)
    return sorted(out, key=lambda d: d.gid)


def _not_data(world: World, x: Def) -> str | None:
    t = world.type_of(x)
    if world.level(t) >= 1:
        return "a type"
    if higher_order(t):
        return "a function"
    if apps_with_head(t, "mem.M"):
        return "a memory token"
    return None


def host_demanded(world: World, kernels: list[MutLam]) -> set[int]:
    """The nodes the host's own code reaches (gids): a walk from the externals that does not
    enter the kernels. A captured value computed by an effect outside this set is one only a
    kernel demands (`kernel_only_effect`)."""
    return {d.gid for d in walk(world, stop={k.gid for k in kernels})}


def kernel_only_effect(world: World, scopes: Scopes, k: MutLam, host: set[int]) -> App | None:
    """A memory operation that k's bodies take from outside k (it uses only host values: a host
    token, `⊥:(mem.M 0)`) and that no host code demands: `run` performs it in the kernel, where
    its result is demanded (SEMANTICS.md), but made a capture it would move to the host, before
    the launch — another program (a load of global memory by the host, a host load a kernel
    made). The first such operation found, or None."""
    seen: set[int] = set()
    stack = [x for x in scopes.outside(k) if not isinstance(x, MutLam)]
    while stack:
        d = stack.pop()
        if d.gid in seen or d.gid in host or isinstance(d, MutLam):
            continue
        seen.add(d.gid)
        t = world.type_of(d)
        if isinstance(d, App) and not isinstance(t, Pi) and apps_with_head(t, "mem.M"):
            return d  # (a partial application is a function value, no effect yet)
        stack.extend(d.ops)
    return None


def captured_token(world: World, scopes: Scopes, k: MutLam) -> Def | None:
    """A host value holding a memory token that k's bodies use (the host's own `m1`), or None."""
    return next((x for x in scopes.outside(k) if not isinstance(x, MutLam) and _not_data(world, x) == "a memory token"),
                None)


def launch_arity(world: World, launch3: App) -> int | None:
    """The `n` of `gpu.launch @(n, Ts) cfg k` (None when it is no literal)."""
    n = world.extract(launch3.args()[0], world.lit_idx(2, 0))
    return n.value if isinstance(n, Lit) else None


def _parts(w: World, v: Def, n: int) -> list[Def]:
    """The n components of a launch's argument tuple (`«1; T» = T`, `«0; T» = []`)."""
    if n == 0:
        return []
    if n == 1:
        return [v]
    return [w.extract(v, w.lit_idx(n, j)) for j in range(n)]


def _whole(w: World, parts: list[Def]) -> Def:
    return parts[0] if len(parts) == 1 else w.tuple(parts)


def _arg_types(rw: Rewriter, lift: Lifted) -> list[Def]:
    """The closed kernel's argument types in rw's new World: its own, then the captures'."""
    return _parts(rw.new, rw.rewrite(lift.ts), lift.n) + [rw.rewrite(rw.old.type_of(x)) for x in lift.caps]


def lifted_pi(rw: Rewriter, lift: Lifted) -> Def:
    """The closed kernel's type in rw's new World."""
    w = rw.new
    dom = lift.kernel.pi.dom
    assert isinstance(dom, Sigma) and len(dom.ops) == 9
    fields = [rw.rewrite(f) for f in dom.ops]
    fields[ARGS] = w.sigma(_arg_types(rw, lift))
    return w.cn(w.sigma(fields))


class LiftedKernel(Rewriter):
    """Copies one capturing kernel into the device World: its arguments extended, its uses of
    the old arguments and of the captured nodes read from the new ones."""

    def __init__(self, old: World, new: World, lift: Lifted) -> None:
        super().__init__(old, new)
        self.lift = lift

    def rewrite_mut(self, old: MutLam) -> Def | None:
        lift = self.lift
        if old is not lift.kernel:
            return None
        w = self.new
        pi = lifted_pi(self, lift)
        assert isinstance(pi, Pi)
        nk = w.mut_lam(pi, old.name or "kernel", old.kind)
        for attr in ("doc", "param_names", "loc"):
            setattr(nk, attr, getattr(old, attr))
        self.memo[old.gid] = nk
        v = w.var(nk)
        fields = [w.extract(v, w.lit_idx(9, i)) for i in range(9)]
        total = lift.n + len(lift.caps)
        parts = _parts(w, fields[ARGS], total)
        old_args = w.tuple(parts[:lift.n]) if lift.n != 1 else parts[0]
        self.memo[self.old.var(old).gid] = w.tuple(fields[:ARGS] + [old_args] + fields[ARGS + 1:])
        for j, x in enumerate(lift.caps):
            self.memo[x.gid] = parts[lift.n + j]
        self.pending.append((old, nk))
        return nk


def is_launch_of(d: Def, depth: int, lifts: dict[int, Lifted]) -> Lifted | None:
    """The lift of the kernel that `d` (a `gpu.launch` application of that depth) launches."""
    if not isinstance(d, App) or d.depth != depth or not is_app_of(d, "gpu.launch"):
        return None
    k = d.args()[2]
    return lifts.get(k.gid) if isinstance(k, MutLam) else None


def host_launch(rw: Rewriter, old: App, ops: tuple[Def, ...], lifts: dict[int, Lifted]) -> Def | None:
    """A launch of a lifted kernel in the host World: `@(n + c, (Ts…, C…))`, and the argument
    tuple with the captured values appended (rw.rewrite_imm's hook)."""
    w = rw.new
    lift = is_launch_of(old, 3, lifts)
    if lift is not None:
        _, cfg, k = old.args()
        types = _arg_types(rw, lift)
        new_imp = w.tuple([w.lit_nat(len(types)), _whole(w, types)])
        head = rw.rewrite(old.head)
        return w.app(w.app(w.app(head, new_imp), rw.rewrite(cfg)), rw.rewrite(k))
    lift = is_launch_of(old, 4, lifts)
    if lift is not None:
        parts = _parts(w, ops[1], lift.n) + [rw.rewrite(x) for x in lift.caps]
        return w.app(ops[0], _whole(w, parts))
    return None


def find_lifts(world: World, scopes: Scopes, kernels: list[MutLam],
               launches: list[App]) -> tuple[dict[int, Lifted], str | None, MutLam | None]:
    """The capturing kernels (by gid), and the first reason one cannot be made closed (with
    that kernel)."""
    lifts: dict[int, Lifted] = {}
    for k in kernels:
        if not scopes.free(k):
            continue
        caps = captures(world, scopes, k)
        if isinstance(caps, str):
            return lifts, caps, k
        sites = [a for a in launches if a.arg is k]
        ns = {launch_arity(world, a) for a in sites}
        n = ns.pop() if len(ns) == 1 else None
        if n is None:
            return lifts, "its launches' argument count is no single literal", k
        ts = world.extract(sites[0].args()[0], world.lit_idx(2, 1))
        lifts[k.gid] = Lifted(k, n, ts, caps)
    return lifts, None, None
