"""`gpu.split_apply` moves code; it must not change it. The program before the phase and the two
Worlds after it are matched node for node (smt.match.Matcher), one Matcher per side, since a
node of the input (a literal, a type) has a copy in each World:

- the host side, from the input's externals: everything the same, except that a kernel is now
  a body-less external declaration of its name (of the same type, when it captured nothing);
- the device side, from each kernel that captured nothing: its external of the same name in
  the device World, with its body, the same node for node, and what it reaches.

A kernel that captured host values (the witness's `lifted_captures`) takes them as launch
arguments, `«n; Ts»` becoming `«n + c; (Ts…, C…)»`. Its device copy is matched against the
input's kernel by the same rule plus the lifting's: its own arguments are the first n
components of the new argument field, and a use of component n + j stands for one host node
x_j of the input (always the same one, computed outside the kernel); then every launch of it
must pass, as component n + j, the host's copy of x_j (matched with the rest of the host side),
with the type x_j has. The same node evaluated where the kernel is launched and where its
closure was made has the same value: the launch names the kernel, so it lies in the activation
that makes the closure, or in one nested in it, which reads the same parameters. Every launch
of a lifted kernel declares it with the device kernel's type. Where the match fails (a lifting
it does not model), `match_split` says so in `unproved` and the caller validates the captures
by execution (smt.specs._lifted_captures) instead of proving them. The kernels are found from
the input alone (smt.reference.kernels: the continuations passed to `gpu.launch`, and external
kernels). The host match's pairing then shows the host performs only memory operations the
input's host code demands (host_effect_not_demanded): a kernel's own effect made a captured
value would be matched node for node, yet run on the host before the launch.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from itertools import chain, count
from typing import cast

from verimim.ir.analysis import apps_with_head
from verimim.ir.defs import App, Arr, Def, Extract, Lit, MutLam, Pi, Sigma, Tuple, Var
from verimim.ir.schedule import Scopes
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, apps_of, is_app_of, walk
from verimim.phases.witness import Split
from verimim.smt import reference
from verimim.printer import show
from verimim.smt.match import Matcher, Mismatch, Pairs
from verimim.smt.names import Namer

ARGS = 7  # a kernel's parameter field holding its arguments (GPU_KERNEL_CC in the seed)


def _launch(d: Def | None, depth: int) -> App | None:
    """d when it is a `gpu.launch` applied to `depth` arguments."""
    return d if isinstance(d, App) and d.depth == depth and is_app_of(d, "gpu.launch") else None


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


def _type_parts(t: Def, n: int) -> list[Def] | None:
    """The n component types of an argument type (a sigma, or an array of one type)."""
    if n == 1:
        return [t]
    if isinstance(t, Sigma) and len(t.ops) == n:
        return list(t.ops)
    if isinstance(t, Arr) and isinstance(t.shape, Lit) and t.shape.value == n and t.body.bvd == 0:
        return [t.body] * n
    return None


class _Lifting:
    """The rule for one lifted kernel k (input) and its device copy kd: its own n arguments,
    then the captured nodes, found as the match meets them (`caps`: j → the input's node)."""

    def __init__(self, old: World, scopes: Scopes, k: MutLam, kd: MutLam, n: int, total: int) -> None:
        self.old, self.scopes, self.k, self.kd, self.n, self.total = old, scopes, k, kd, n, total
        self.caps: dict[int, Def] = {}

    def _component(self, b: Def) -> int | None:
        """j when b is component j of kd's argument field (the field itself when total = 1)."""
        if self.total == 1:
            return 0 if self._field(b) else None
        if isinstance(b, Extract) and self._field(b.tup) and isinstance(b.index, Lit):
            return b.index.value
        return None

    def _field(self, b: Def) -> bool:
        return (isinstance(b, Extract) and isinstance(b.tup, Var) and b.tup.mut is self.kd
                and isinstance(b.index, Lit) and b.index.value == ARGS)

    def _own_field(self, a: Def) -> bool:
        return (isinstance(a, Extract) and isinstance(a.tup, Var) and a.tup.mut is self.k
                and isinstance(a.index, Lit) and a.index.value == ARGS)

    def rule(self, a: Def, b: Def) -> Pairs | None:
        if a is self.k:
            return self._kernel(b)
        if self._own_field(a):  # the input's whole argument field: its n components
            if self.n == 1:
                return [] if self._component(b) == 0 else None
            if isinstance(b, Tuple) and len(b.ops) == self.n and all(self._component(x) == j for j, x in enumerate(b.ops)):
                return []
            return None
        if (self.n >= 2 and isinstance(a, Extract) and self._own_field(a.tup) and isinstance(a.index, Lit)
                and self._component(b) == a.index.value and a.index.value < self.n):
            return []
        j = self._component(b)
        if j is None or j < self.n or a.bvd != 0 or self.scopes.is_local(self.k, a):
            return None  # the default comparison: a mismatch unless the nodes are alike
        seen = self.caps.setdefault(j - self.n, a)
        return [] if seen is a else None

    def _kernel(self, b: Def) -> Pairs | None:
        if b is not self.kd:
            return None
        pa, pb = self.k.pi, self.kd.pi
        if not (isinstance(pa, Pi) and isinstance(pb, Pi) and isinstance(pa.dom, Sigma)
                and isinstance(pb.dom, Sigma) and len(pa.dom.ops) == len(pb.dom.ops) == ARGS + 2):
            return None
        own = _type_parts(pa.dom.ops[ARGS], self.n) if self.n else []
        new = _type_parts(pb.dom.ops[ARGS], self.total)
        if own is None or new is None:
            return None
        fields = [(x, y) for i, (x, y) in enumerate(zip(pa.dom.ops, pb.dom.ops)) if i != ARGS]
        body = [(self.k.body, self.kd.body)] if self.k.body is not None and self.kd.body is not None else []
        return fields + list(zip(own, new[:self.n])) + [(pa.codom, pb.codom)] + body

    def types_agree(self, names: Namer) -> str | None:
        """Each captured node's type is the one the device kernel declares for it."""
        pb = self.kd.pi
        assert isinstance(pb, Pi) and isinstance(pb.dom, Sigma)
        new = _type_parts(pb.dom.ops[ARGS], self.total)
        assert new is not None
        for j, x in sorted(self.caps.items()):
            if names.key(self.old.type_of(x)) != names.key(new[self.n + j]):
                return f"kernel `{self.k.name}` takes captured value {j} as `{show(new[self.n + j])}`, " \
                       f"but `{show(x)}` is `{show(self.old.type_of(x))}`"
        return None


def host_effect_not_demanded(old: World, host: World, back: dict[int, int]) -> tuple[str, dict[str, str]] | None:
    """The host World performs only the memory effects the input's host code demands: a memory
    operation (an application whose value holds a `mem.M`) a kernel alone demands, made a
    captured value, would run on the host before the launch — another program (a global load
    by the host, a host load moved ahead of the store it read after). The input's host code is
    what its externals reach without entering a kernel (a launch names its kernel; it does not
    run it on the host); each memory operation the output host reaches must be the host copy
    (`back`: the host match's pairing, output gid → input gid) of one such operation. Why not
    (and the operation, where it is), or None."""
    stop = {k.gid for k in reference.kernels(old)}
    demanded = {d.gid for d in walk(old, stop=stop)}
    for d in walk(host):
        if not _is_effect(host, d):
            continue
        was = back.get(d.gid)
        if was is None or was not in demanded:
            what = "no operation of the input" if was is None else "an operation only a kernel demands"
            op, at = _short_show(d), str(d.loc or "?")
            return (f"the host performs `{op}` at {at}, {what}: the input's host code does not demand it "
                    f"(a kernel's effect moved to the host)"), {"operation": op, "location": at}
    return None


def _is_effect(world: World, d: Def) -> bool:
    """d is a memory operation performed: an application (no partial one: a function value) whose
    value holds a memory token."""
    if not isinstance(d, App):
        return False
    t = world.type_of(d)
    return not isinstance(t, Pi) and bool(apps_with_head(t, "mem.M"))


def _short_show(d: Def) -> str:
    text = show(d)
    return text if len(text) < 160 else text[:157] + "..."


def match_split(res: PhaseResult) -> tuple[Mismatch | str | None, dict[str, str], dict[int, int]]:
    """(None when both sides keep the input's code, else the mismatch or what is wrong; the
    lifted kernels whose lifting the match does not show, with why; the host match's pairing,
    output gid → input gid, for host_effect_not_demanded)."""
    old, host, dev = res.before.host, res.after.host, res.after.device
    if dev is None:
        return "no device World", {}, {}
    lifted = res.claim(Split).lifted_captures
    kernels = {k.gid: k for k in reference.kernels(old)}  # launched, or external kernels
    # The name each kernel is external under on both sides, as the phase says (its own unless
    # two kernels share one); what follows shows each name's kernel is that kernel.
    claimed = res.claim(Split).device_names
    name_of = {gid: claimed.get(gid) or cast(str, k.name) for gid, k in kernels.items()}  # (every mutable is named)
    kernel_names = set(name_of.values())
    if len(kernel_names) < len(name_of):
        return f"two kernels are external under one name: {sorted(name_of.values())}", {}, {}
    # PHASES.md: each kernel is external under its own name; only where another kernel or an
    # external of the input has that name may it take a suffix `_k` (a renamed kernel changes
    # the PTX's interface: what a host outside verimim launches by name).
    own_names = Counter(cast(str, k.name) for k in kernels.values())
    others = {n for n, m in old.externals.items() if m.gid not in kernels}
    for gid, k in kernels.items():
        own, given = cast(str, k.name), name_of[gid]
        shared = own_names[own] > 1 or own in others
        if given != own and not (shared and re.fullmatch(re.escape(own) + r"_[0-9]+", given)):
            return f"kernel `{own}` is external under `{given}`, not its own name (no other has it)", {}, {}
        if given != own:
            # the first free suffix `_1`, `_2`, … (spelled so: not `_01`): the name itself and every
            # lower suffix are taken (by the input's other externals or another kernel), and the
            # first kernel of a name no other external has keeps it
            taken = (others | kernel_names) - {given}
            first = next(n for n in chain([own], (f"{own}_{j}" for j in count(1))) if n not in taken)
            if given != first:
                return (f"kernel `{own}` is external under `{given}`, not under the first free name "
                        f"(`{first}` is free)"), {}, {}
    extra = set(host.externals) - set(old.externals)
    if not set(old.externals) <= set(host.externals) or not extra <= kernel_names:
        return (f"the host's externals are {sorted(host.externals)}, the input's {sorted(old.externals)} "
                f"and its kernels {sorted(kernel_names)}"), {}, {}
    names = Namer()  # types of two Worlds compared by structure, not by their printing
    launches = apps_of(old, "gpu.launch", 3)
    for site in apps_of(host, "gpu.launch", 3):
        k = site.arg
        if isinstance(k, MutLam) and k.name in lifted:
            target = dev.externals.get(k.name or "")
            if target is None or names.key(target.pi) != names.key(k.pi):
                return (f"the launch of `{k.name}` at {site.loc or '?'} declares a kernel of type `{show(k.pi)}`, "
                        f"the device has {show(target.pi) if target else 'none'}"), {}, {}
    # The device side first: matching a lifted kernel finds the host nodes its captures are.
    scopes = Scopes()
    liftings: dict[str, _Lifting] = {}
    unproved: dict[str, str] = {}
    work: Pairs = []
    for k in sorted(kernels.values(), key=lambda k: name_of[k.gid]):
        name = name_of[k.gid]
        target = dev.externals.get(name)
        if target is None or target.body is None:
            return f"the device World has no kernel `{name}` with a body", {}, {}
        if name not in lifted:
            work.append((k, target))
            continue
        ns = {_arity(old, site) for site in launches if site.arg is k}
        n = ns.pop() if len(ns) == 1 else None
        if n is None:
            unproved[name] = "its launches' argument count is no single literal"
            continue
        lifting = _Lifting(old, scopes, k, target, n, n + lifted[name])
        mm = Matcher(lifting.rule).run([(k, target)])
        why = mm.describe() if mm is not None else lifting.types_agree(names)
        if why is not None:
            unproved[name] = why
            continue
        liftings[name] = lifting
    mm = Matcher().run(work)
    if mm is not None:
        return mm, unproved, {}

    def host_rule(with_caps: bool) -> Callable[[Def, Def], Pairs | None]:
        def rule(a: Def, b: Def) -> Pairs | None:
            if isinstance(a, MutLam) and a.gid in kernels:
                if not (isinstance(b, MutLam) and b.body is None and b.external and b.name == name_of[a.gid]):
                    return None  # left to the default comparison: a continuation that lost its body
                return [] if name_of[a.gid] in lifted else [(a.pi, b.pi)]
            la, lb = _launch(a, 4), _launch(b, 4)
            if la is None or lb is None:
                return None
            sa, sb = _launch(la.callee, 3), _launch(lb.callee, 3)  # `gpu.launch @(n, Ts) cfg k`
            if sa is None or sb is None:
                return None
            if not isinstance(sa.arg, MutLam) or name_of.get(sa.arg.gid) not in lifted:
                return None
            n, total = _arity(old, sa), _arity(host, sb)
            if n is None or total is None or total < n:
                return None
            _, cfg_a, k_a = sa.args()
            _, cfg_b, k_b = sb.args()
            parts = _parts(host, lb.arg, total) if total else []
            out = [(cfg_a, cfg_b), (k_a, k_b), *zip(_parts(old, la.arg, n) if n else [], parts[:n])]
            lifting = liftings.get(name_of.get(k_a.gid, "")) if with_caps and isinstance(k_a, MutLam) else None
            if lifting is not None:  # the captured values: the host's copies of what the kernel used
                out += [(x, parts[n + j]) for j, x in sorted(lifting.caps.items())]
            return out
        return rule

    roots = [(old.externals[name], host.externals[name]) for name in sorted(old.externals)]
    matcher = Matcher(host_rule(False))
    mm = matcher.run(list(roots))
    if mm is not None:
        return mm, unproved, {}
    back = matcher.back
    if liftings:
        with_caps = Matcher(host_rule(True))
        mm = with_caps.run(list(roots))
        if mm is not None:  # the launches pass something else: shown (or refuted) by execution
            unproved.update({name: f"a launch passes another value: {mm.describe()}" for name in liftings})
        else:  # it pairs the captured values too
            back = with_caps.back
    return None, unproved, back

