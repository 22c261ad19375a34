"""`gpu.remove_double_syncs` proved from the token structure, for every path at once.

Shared and global memory operations take and give the memory tokens of their address space
(`mem.M 3`, `mem.M 1`; SEMANTICS.md), and a barrier takes and gives both. When every token value
of a kernel has at most one user (the tokens are linear, as the frontend's `let` chains make
them), a barrier `r` whose tokens come straight from the barrier `s` before it (or from the
kernel's entry) has nothing between `s` and `r`: any memory operation in between would have to
use one of those tokens, whose only user is `r`; and every path through `s` goes on through `r`
(whatever follows needs a token, and every one is `r`'s). So on every path `r` immediately
follows `s` (or starts the kernel, where no operation precedes it): deleting it keeps each pair
of memory operations separated exactly as before, and deletes one site from every barrier
sequence that had it right after `s` — work-items that met the same barriers still do.

The output must be the input with exactly the claimed barriers replaced by their tokens (a
reference built here, matched node for node). Where the tokens are not linear, or a removed
barrier's tokens have another source, this proof does not apply (None), and the path encoding
of smt.specs decides.
"""
from __future__ import annotations

from verimim.ir.defs import App, Axiom, Def, Extract, Lam, Lit, MutLam, Sigma, Tuple, Var
from verimim.ir.world import IRError, World
from verimim.phases.base import PhaseResult, walk
from verimim.phases.rewriter import Rewriter
from verimim.smt.match import Matcher
from verimim.smt.solver import Outcome

SYNC = "gpu.sync_work_items"
SHARED_OR_GLOBAL = (1, 3)


def _is_sync(d: Def) -> bool:
    return isinstance(d, App) and d.depth == 1 and isinstance(d.head, Axiom) and d.head.annex == SYNC


def _is_token_type(t: Def) -> bool:
    return (isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.M"
            and isinstance(t.arg, Lit) and t.arg.value in SHARED_OR_GLOBAL)


def _users(world: World) -> dict[int, set[int]]:
    """Node → the nodes that have it as an operand (a mutable's body and type included)."""
    users: dict[int, set[int]] = {}
    for d in walk(world):
        ops = (d.pi, d.body) if isinstance(d, MutLam) else d.ops
        for op in ops:
            if op is not None:
                users.setdefault(op.gid, set()).add(d.gid)
    return users


def _holds_token(t: Def) -> bool:
    return isinstance(t, Sigma) and any(_is_token_type(f) or _holds_token(f) for f in t.ops)


def _nonlinear_token(world: World, users: dict[int, set[int]]) -> str | None:
    """A token value used twice (None: every token is linear). A token is used by the node that
    has it as operand; a tuple holding tokens (an operation's result, a parameter) may be taken
    apart by its projections, each of which is a token value in turn."""
    nodes = {d.gid: d for d in walk(world)}
    for d in nodes.values():
        if isinstance(d, Lam):
            return f"an immutable lambda ({d.loc or '?'}): tokens under its binder are not followed"
        if isinstance(d, (MutLam, Axiom, Lit)) or d.bvd != 0:
            continue
        try:
            t = world.type_of(d)
        except IRError:
            return f"a node whose type cannot be computed ({d.loc or '?'})"
        mine = users.get(d.gid, set())
        if _is_token_type(t) and len(mine) > 1:
            return f"a memory token with {len(mine)} users ({d.loc or '?'})"
        # A value holding tokens is taken apart by projections only, or used whole exactly once
        # (used whole and projected, its tokens would have two users).
        if _holds_token(t) and len(mine) > 1 and any(not isinstance(nodes.get(u), Extract) for u in mine):
            return f"a value holding memory tokens used whole and more than once ({d.loc or '?'})"
    return None


def _entry_vars(world: World) -> set[int]:
    """Kernels: the externals of a device World and the continuations `gpu.launch` starts."""
    out = {m.gid for m in world.externals.values() if m.name != "main"}
    for d in walk(world):
        if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == "gpu.launch" \
                and isinstance(d.arg, MutLam):
            out.add(d.arg.gid)
    return out


def _justified(r: App, entries: set[int], users: dict[int, set[int]]) -> str | None:
    """Why removing the barrier r is safe is *not* shown (None: it is)."""
    arg = r.arg
    if not (isinstance(arg, Tuple) and len(arg.ops) == 2 and all(isinstance(e, Extract) for e in arg.ops)):
        return "its tokens are not the two results of one node"
    a, b = arg.ops
    assert isinstance(a, Extract) and isinstance(b, Extract)
    if a.tup is not b.tup or not (isinstance(a.index, Lit) and isinstance(b.index, Lit)) \
            or (a.index.value, b.index.value) != (0, 1):
        return "its tokens are not the two results of one node"
    src = a.tup
    if not (_is_sync(src) or (isinstance(src, Var) and src.mut.gid in entries)):
        return "its tokens do not come straight from a barrier or the kernel's entry"
    if users.get(a.gid) != {arg.gid} or users.get(b.gid) != {arg.gid}:
        return "the tokens it takes have other users"
    return None


class _Remove(Rewriter):
    def __init__(self, old: World, removed: set[int]) -> None:
        super().__init__(old)
        self.removed = removed

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        return ops[1] if old.gid in self.removed else None


def prove_by_tokens(res: PhaseResult) -> Outcome | None:
    """`proved` (or `refuted`: the output is not the input less the claimed barriers); None
    where the token argument does not apply."""
    claimed = [old for old, _new in res.log.get("rewrites", [])]
    if not all(_is_sync(d) for d in claimed):
        return Outcome("refuted", "the phase rewrote something other than a barrier")
    removed = {d.gid for d in claimed}
    n_removed = 0
    for old, new in zip(res.before.worlds(), res.after.worlds()):
        mine = [d for d in walk(old) if d.gid in removed]
        if not mine and old is new:
            continue
        users = _users(old)
        why = _nonlinear_token(old, users)
        if why is not None:
            return None
        entries = _entry_vars(old)
        for r in mine:
            assert isinstance(r, App)
            why = _justified(r, entries, users)
            if why is not None:
                return None  # the path encoding decides (it may still prove it, or refute)
        ref = _Remove(old, {d.gid for d in mine}).run()
        mm = Matcher().match_worlds(ref, new)
        if mm is not None:
            return Outcome("refuted", f"the output is not the input less the removed barriers: {mm.describe()}",
                           {"location": str(mm.old.loc) if mm.old.loc else "?"})
        n_removed += len(mine)
    return Outcome("proved", f"{n_removed} barrier(s) removed, each straight after a barrier or the kernel's "
                   f"entry with linear tokens: nothing between them on any path; the rest unchanged")
