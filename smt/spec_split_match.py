"""`gpu.split_apply` moves code; it must not change it. The program before the phase and the two
Worlds after it are matched node for node (smt.match.Matcher), one Matcher per side, since a
node of the input (a literal, a type) has a copy in each World:

- the host side, from the input's externals: everything the same, except that a kernel is now
  a body-less external declaration of its name (of the same type, when it captured nothing);
- the device side, from each kernel that captured nothing: its external of the same name in
  the device World, with its body, the same node for node, and what it reaches.

A kernel that captured host values (the witness's `lifted_captures`) takes them as launch
arguments: its launches are matched on their configuration and their own `n` arguments, and
the appended values and the kernel's new body are left to the caller, which validates them by
execution (smt.specs._lifted_captures). The kernels are found from the input alone
(smt.reference.kernels: the continuations passed to `gpu.launch`, and external kernels).
"""
from __future__ import annotations

from verimim.ir.defs import App, Axiom, Def, Lit, MutLam, Tuple
from verimim.ir.world import World
from verimim.phases.base import PhaseResult
from verimim.phases.witness import Split
from verimim.smt import reference
from verimim.smt.match import Matcher, Mismatch, Pairs


def _launch(d: Def, depth: int) -> App | None:
    if isinstance(d, App) and d.depth == depth and isinstance(d.head, Axiom) and d.head.annex == "gpu.launch":
        return d
    return None


def _arity(world: World, launch: App) -> int | None:
    """The `n` of `gpu.launch @(n, Ts) …`."""
    imp = launch.args()[0]
    n = imp.ops[0] if isinstance(imp, Tuple) else world.extract(imp, world.lit_idx(2, 0))
    return n.value if isinstance(n, Lit) else None


def _parts(world: World, v: Def, n: int) -> list[Def]:
    """The n components of a launch's argument (`«1; T»` is T itself, `«0; T»` is `()`)."""
    if n == 1:
        return [v]
    return [world.extract(v, world.lit_idx(n, j)) for j in range(n)]


def match_split(res: PhaseResult) -> Mismatch | str | None:
    """None when both sides keep the input's code; else the mismatch, or what is wrong."""
    old, host, dev = res.before.host, res.after.host, res.after.device
    if dev is None:
        return "no device World"
    lifted_names = set(res.claim(Split).lifted_captures)
    kernels = {k.gid: k for k in reference.kernels(old).values()}  # launched, or external kernels
    kernel_names = {k.name for k in kernels.values()}
    extra = set(host.externals) - set(old.externals)
    if not set(old.externals) <= set(host.externals) or not extra <= kernel_names:
        return (f"the host's externals are {sorted(host.externals)}, the input's {sorted(old.externals)} "
                f"and its kernels {sorted(kernel_names)}")

    def host_rule(a: Def, b: Def) -> Pairs | None:
        if isinstance(a, MutLam) and a.gid in kernels:
            if not (isinstance(b, MutLam) and b.body is None and b.external and b.name == a.name
                    and dev.externals.get(a.name or "") is not None):
                return None  # left to the default comparison: a continuation that lost its body
            return [] if a.name in lifted_names else [(a.pi, b.pi)]
        la = _launch(a, 4)
        if la is None or not isinstance(la.callee.arg, MutLam) or la.callee.arg.name not in lifted_names:
            return None
        lb = _launch(b, 4)
        if lb is None:
            return None
        n = _arity(old, la.callee)
        if n is None:
            return None
        _, cfg_a, k_a = la.callee.args()
        _, cfg_b, k_b = lb.callee.args()
        # the input's own n arguments, then (unmatched here) the captured values
        total = _arity(host, lb.callee)
        if total is None or total < n:
            return None
        return [(cfg_a, cfg_b), (k_a, k_b),
                *zip(_parts(old, la.arg, n) if n else [], _parts(host, lb.arg, total)[:n] if n else [])]

    mm = Matcher(host_rule).run([(old.externals[name], host.externals[name]) for name in sorted(old.externals)])
    if mm is not None:
        return mm
    work: Pairs = []
    for k in sorted(kernels.values(), key=lambda k: k.name or ""):
        if k.name in lifted_names:
            continue
        target = dev.externals.get(k.name or "")
        if target is None or target.body is None:
            return f"the device World has no kernel `{k.name}` with a body"
        work.append((k, target))
    return Matcher().run(work)
