"""Kernels that capture host values, made closed: the values become launch arguments.

A kernel nested in a host function cannot run on the device as it stands: the device has no
host activation to read the value from. This is what a curried kernel `con k (n: I32) (m1, …)`
launched as `k argc` becomes once β-reduction specialises it (a copy of the inner kernel that
uses `argc`). `gpu.split_apply` appends each such kernel's captured values to its arguments —
`«n; Ts»` becomes `«n + c; (Ts…, C₁, …, C_c)»` — and each launch site passes them: the same
values, which the launch site has at hand (a kernel's creator is an activation the launch sits
in). A capture that is no data (a memory token, a function, a continuation or a type of the
host) is `E-UNSUPPORTED`, naming it.
"""
from __future__ import annotations

from dataclasses import dataclass

from verimim.ir.analysis import Scopes
from verimim.ir.defs import App, Axiom, Def, Lit, MutLam, Pi, Sigma
from verimim.ir.world import World
from verimim.phases.base import is_app_of
from verimim.phases.rewriter import Rewriter
from verimim.printer import show

ARGS = 7  # the kernel parameter holding its arguments: [M1, M3, M4, M5, Idx G, Idx I, smem, args, return]


@dataclass
class Lifted:
    """A capturing kernel: its own argument count `n` (from its launches) and the host nodes
    it captures, in the order they are appended."""

    kernel: MutLam
    n: int
    caps: list[Def]
    cap_types: list[Def]  # in the old World


def captures(world: World, scopes: Scopes, k: MutLam) -> list[Def] | str:
    """The host nodes k's bodies use (maximal ones), or why k cannot be made closed."""
    if scopes.deps(k.pi):
        return f"the type of kernel `{k.name}` depends on host values"
    local = scopes.local_muts(k)
    out: dict[int, Def] = {}
    seen: set[int] = set()
    stack: list[Def] = [m.body for m in local if m.body is not None]
    while stack:
        x = stack.pop()
        if x.gid in seen:
            continue
        seen.add(x.gid)
        if isinstance(x, MutLam):
            if x not in local and scopes.free(x):
                return f"the host continuation `{x.name}`"
            continue
        if not scopes.deps(x):
            continue  # closed: nothing of the host
        if x.bvd > 0 or scopes.is_local(k, x):  # open (inside a λ of the kernel's) or the kernel's own
            stack.extend(x.ops)
            continue
        why = _not_data(world, x)
        if why:
            return f"`{show(x)}` ({why})"
        out[x.gid] = x
    return sorted(out.values(), key=lambda d: d.gid)


def _not_data(world: World, x: Def) -> str | None:
    t = world.type_of(x)
    if world.level(t) >= 1:
        return "a type"
    stack, seen = [t], set()
    while stack:
        y = stack.pop()
        if y.gid in seen:
            continue
        seen.add(y.gid)
        if isinstance(y, Pi):
            return "a function"
        if isinstance(y, App) and isinstance(y.head, Axiom) and y.head.annex == "mem.M":
            return "a memory token"
        stack.extend(y.ops)
    return None


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


def _arg_types(rw: Rewriter, lift: Lifted, ts: Def) -> list[Def]:
    w = rw.new
    return _parts(w, ts, lift.n) + [rw.rewrite(t) for t in lift.cap_types]


def lifted_pi(rw: Rewriter, lift: Lifted, ts: Def) -> Def:
    """The closed kernel's type in rw's new World; `ts` the launch's argument types there."""
    w = rw.new
    dom = lift.kernel.pi.dom
    assert isinstance(dom, Sigma) and len(dom.ops) == 9
    fields = [rw.rewrite(f) for f in dom.ops]
    fields[ARGS] = w.sigma(_arg_types(rw, lift, ts))
    return w.cn(w.sigma(fields))


class LiftedKernel(Rewriter):
    """Copies one capturing kernel into the device World: its arguments extended, its uses of
    the old arguments and of the captured nodes read from the new ones."""

    def __init__(self, old: World, new: World, lift: Lifted, ts: Def) -> None:
        super().__init__(old, new)
        self.lift, self.ts = lift, ts

    def rewrite_mut(self, old: MutLam) -> Def | None:
        lift = self.lift
        if old is not lift.kernel:
            return None
        w = self.new
        pi = lifted_pi(self, lift, self.rewrite(self.ts))
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
        imp, cfg, k = old.args()
        ts = w.extract(rw.rewrite(imp), w.lit_idx(2, 1))
        types = _arg_types(rw, lift, ts)
        new_imp = w.tuple([w.lit_nat(len(types)), _whole(w, types)])
        head = rw.rewrite(old.head)
        return w.app(w.app(w.app(head, new_imp), rw.rewrite(cfg)), rw.rewrite(k))
    lift = is_launch_of(old, 4, lifts)
    if lift is not None:
        parts = _parts(w, ops[1], lift.n) + [rw.rewrite(x) for x in lift.caps]
        return w.app(ops[0], _whole(w, parts))
    return None


def find_lifts(world: World, scopes: Scopes, kernels: list[MutLam],
               launches: list[App]) -> tuple[dict[int, Lifted], dict[int, Def], str | None, MutLam | None]:
    """The capturing kernels (by gid), the argument types `Ts` of their launches, and the first
    reason one cannot be made closed (with that kernel)."""
    lifts: dict[int, Lifted] = {}
    types: dict[int, Def] = {}
    for k in kernels:
        if not scopes.free(k):
            continue
        caps = captures(world, scopes, k)
        if isinstance(caps, str):
            return lifts, types, f"it captures {caps}", k
        sites = [a for a in launches if a.arg is k]
        ns = {launch_arity(world, a) for a in sites}
        if not sites or None in ns or len(ns) != 1:
            return lifts, types, "its launches' argument count is no single literal", k
        imp = sites[0].args()[0]
        types[k.gid] = world.extract(imp, world.lit_idx(2, 1))
        lifts[k.gid] = Lifted(k, ns.pop(), caps, [world.type_of(x) for x in caps])  # type: ignore[arg-type]
    return lifts, types, None, None

