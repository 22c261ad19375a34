"""Type-level computation: applications of recursive `lam`s unfolded where the checker needs
their value (upstream's partial evaluation of `lam`s, whose filter defaults to `tt`).

`lam PtrN (n: Nat, T: *): * = (PtrN (n - 1, Ptr0 T), T)#(n == 0)` is a mutable (it mentions
itself), so `PtrN (4, I32)` stays an application until a type comparison needs to see through
it: then the body is instantiated with the argument, which the World's normal forms fold (the
branch on a literal condition picks one side). Each step unfolds one application, so recursion
on a non-literal argument stops at the first branch it cannot decide.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.ir.analysis import scan_mut
from verimim.ir.defs import App, Def, MutLam, Var
from verimim.ir.world import World


def unfold_lam_app(world: World, d: Def) -> Def | None:
    """`f a` with f a `lam` mutable whose body mentions no other mutable's variable: its body
    with f's variable replaced by a; None when `d` is not such an application. Other `lam`s it
    refers to (`is_odd` in `is_even`'s body: a `rec … and` group) stay applications, unfolded in
    their turn, if they are closed: a nested one (the next level of a curried function) is a
    closure over f's variable, which this substitution does not reach: then None."""
    if not isinstance(d, App) or not isinstance(d.callee, MutLam):
        return None
    f = d.callee
    if f.kind != "lam" or f.body is None or f.external:
        return None
    arg = d.arg
    memo: dict[int, Def] = {}

    def go(x: Def) -> Def | None:
        hit = memo.get(x.gid)
        if hit is not None:
            return hit
        if isinstance(x, Var):
            res: Def | None = arg if x.mut is f else None
            if res is None:
                return None  # another mutable's variable: not a closed type-level function
        elif isinstance(x, MutLam):
            res = x if x is f or (x.kind == "lam" and not x.external and _closed(x)) else None  # calls stay applications
            if res is None:
                return None
        elif not x.ops:
            res = x
        else:
            ops: list[Def] = []
            for op in x.ops:
                new = go(op)
                if new is None:
                    return None
                ops.append(new)
            res = x if all(a is b for a, b in zip(ops, x.ops)) else x.rebuild(world, tuple(ops))
        memo[x.gid] = res
        return res

    return go(f.body)


def _closed(m: MutLam) -> bool:
    """Whether m, with every body it reaches, is there and uses no parameter from outside them:
    a function of its argument alone (a top-level `lam`), not a closure (a curried function's
    next level uses the previous level's parameter). A body still being elaborated: not known."""
    reached: dict[int, MutLam] = {}
    used: set[MutLam] = set()
    stack = [m]
    while stack:
        y = stack.pop()
        if y.gid in reached:
            continue
        if y.body is None:
            return False
        reached[y.gid] = y
        vars_, muts = scan_mut(y)
        used |= vars_
        stack.extend(muts)
    return all(v.gid in reached for v in used)


class _Diverges(Exception):
    pass


def unfold_fully(world: World, d: Def, budget: int = 64,
                 may_unfold: Callable[[App], bool] = lambda call: True,
                 force: Callable[[MutLam], None] | None = None) -> Def | None:
    """`d` with every type-level `lam` application in it unfolded until none is left
    (`pow (m, 3)` becomes `m * (m * (m * 1))`, which the normalizers fold); None when that does
    not end within `budget` unfoldings (a recursion on a non-literal argument) or meets a call
    that `may_unfold` refuses (its filter). `force` elaborates a `lam`'s body that is still pending."""
    left = [budget]
    memo: dict[int, Def] = {}

    def expand(x: Def) -> Def:
        hit = memo.get(x.gid)
        if hit is not None:
            return hit
        if force is not None and isinstance(x, App) and isinstance(x.callee, MutLam) and x.callee.body is None:
            force(x.callee)
            if x.callee.body is None and x.callee.kind == "lam" and not x.callee.external:
                raise _Diverges  # a body still being elaborated (a recursive call inside it): no value yet
        if isinstance(x, (MutLam, Var)) or not x.ops:
            res = x
        elif isinstance(x, App) and isinstance(x.callee, MutLam) and x.callee.kind == "lam" \
                and x.callee.body is not None and not x.callee.external:
            if left[0] <= 0 or not may_unfold(x):
                raise _Diverges
            left[0] -= 1
            step = unfold_lam_app(world, world.app(x.callee, expand(x.arg)))
            if step is None:
                raise _Diverges
            res = expand(step)
        else:
            ops = tuple(expand(op) for op in x.ops)
            res = x if all(a is b for a, b in zip(ops, x.ops)) else x.rebuild(world, ops)
        memo[x.gid] = res
        return res

    try:
        return expand(d)
    except _Diverges:
        return None
