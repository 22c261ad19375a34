"""Analyses of the graph of mutables: which parameters a mutable uses (its free variables) and
which mutables it refers to. How continuations nest, which nodes a nested continuation takes
from outside, and the order a body's operations run in are verimim.ir.schedule's.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from verimim.ir.defs import Def, Extract, Lit, MutLam, Var


def free_muts(m: MutLam, cache: dict[int, frozenset[MutLam]]) -> frozenset[MutLam]:
    """The mutables whose parameters `m`'s body uses, directly or through nested mutables."""
    # A fixpoint over the (possibly recursive) graph of mutables.
    order: list[MutLam] = []
    direct: dict[int, tuple[set[MutLam], set[MutLam]]] = {}
    stack = [m]
    while stack:
        x = stack.pop()
        if x.gid in direct or x.gid in cache:
            continue
        vars_, muts = scan_mut(x)
        direct[x.gid] = (vars_, muts)
        order.append(x)
        stack.extend(muts)
    result = {x.gid: set(direct[x.gid][0]) - {x} for x in order}
    changed = True
    while changed:
        changed = False
        for x in order:
            acc = result[x.gid]
            before = len(acc)
            for y in direct[x.gid][1]:
                acc |= cache.get(y.gid, result.get(y.gid, set()))
            acc.discard(x)
            if len(acc) != before:
                changed = True
    for x in order:
        cache[x.gid] = frozenset(result[x.gid])
    return cache[m.gid]


def innermost(fv: Iterable[MutLam], free: Callable[[MutLam], frozenset[MutLam]]) -> list[MutLam]:
    """Those of `fv` whose own free mutables hold all the others: the scopes inside which every
    parameter of `fv` is visible (one, unless some of them are free in each other)."""
    fv = list(fv)
    return [o for o in fv if all(p is o or p in free(o) for p in fv)]


def scan_mut(m: MutLam, annexes: bool = False) -> tuple[set[MutLam], set[MutLam]]:
    """Owners of the Vars used in m's body, and the mutables it references (not looking inside;
    plugin-defined ones such as `gpu.with_streams` only with `annexes`)."""
    vars_: set[MutLam] = set()
    muts: set[MutLam] = set()
    if m.body is None:
        return vars_, muts
    # Kept on the mutable, for its body and type as they are now: the nesting analyses of
    # several Worlds' users (interpreter, specs, printer, inliner) ask again and again.
    kept: dict[bool, tuple[Def, Def, frozenset[MutLam], frozenset[MutLam]]] | None = getattr(m, "_scans", None)
    hit = kept.get(annexes) if kept is not None else None
    if hit is not None and hit[0] is m.body and hit[1] is m.pi:
        return set(hit[2]), set(hit[3])
    seen: set[int] = set()
    stack: list[Def] = [m.body]
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, Var):
            vars_.add(d.mut)
            continue
        if isinstance(d, MutLam):
            muts.add(d)
            continue
        stack.extend(d.ops)
    # The type counts too: a curried mutable whose parameter type is an outer one's parameter
    # (`con seq {A: *} … (acc: A)`) depends on that activation like a use in its body does.
    vars_ |= {v.mut for v in vars_of(m.pi, seen) if v.mut is not m}
    # One walk answers both questions (the inliner asks with annexes, the nesting analyses
    # without), each kept for the next asker.
    if kept is None:
        kept = m._scans = {}
    frozen_vars = frozenset(vars_)
    kept[True] = (m.body, m.pi, frozen_vars, frozenset(muts))
    kept[False] = (m.body, m.pi, frozen_vars, frozenset(x for x in muts if x.annex is None))
    return set(frozen_vars), set(kept[annexes][3])


def is_var_path(x: Def) -> bool:
    """Whether x is a parameter or a component of one (`Var`, `Var#i#j` with literal indices):
    what a type-level node's substitution takes from an activation's value."""
    while isinstance(x, Extract) and isinstance(x.index, Lit):
        x = x.tup
    return isinstance(x, Var)


def vars_of(root: Def, seen: set[int] | None = None) -> list[Var]:
    """The Vars in `root`, not looking inside mutables, skipping nodes in `seen`."""
    out: list[Var] = []
    seen = set() if seen is None else seen
    stack = [root]
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, Var):
            out.append(d)
        elif not isinstance(d, MutLam):
            stack.extend(d.ops)
    return out


def apps_with_head(t: Def, annex: str) -> list[Def]:
    """The applications of axiom `annex` inside t (e.g. the `mem.M n` types of a type)."""
    from verimim.ir.defs import App, Axiom

    out: list[Def] = []
    seen: set[int] = set()
    stack = [t]
    while stack:
        x = stack.pop()
        if x.gid in seen:
            continue
        seen.add(x.gid)
        if isinstance(x, App) and isinstance(x.head, Axiom) and x.head.annex == annex:
            out.append(x)
            continue
        stack.extend(() if isinstance(x, MutLam) else x.ops)
    return out
