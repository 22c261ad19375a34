"""`gpu.remove_double_syncs` proved from dependencies, for every path and schedule at once.

A continuation's body runs as one block: its operations in some order that respects their
operands (SEMANTICS.md: effects are ordered by their tokens), then its jump. Take a removed
barrier `r` whose tokens come straight from the barrier `s`, and every block that performs r
also performs s (or whose tokens are the kernel's entry tokens, and only the kernel's entry block
performs it). r needs nothing but s (nothing at all), so every order of the block without r is
an order of the block with r placed right after s (at the block's start): deleting r keeps
every schedule of the input that puts r there, where a barrier right after a barrier is none
and one before any memory operation is none. Each pair of memory operations is separated in
the output exactly when in that schedule of the input, every work-item's barrier sequence loses
the one site right after s (work-items that met the same barriers still do), and an operation
the input's tokens order after r (after s in the output) is ordered after a barrier either way.
Loops need no unrolling: the argument is about one block. (Some schedules of the input put an
independent operation between s and r; the output keeps the others, as any phase may narrow an
unspecified order.)

Whatever the claims, the output must be the input with exactly the claimed barriers replaced by
their tokens (a reference built here, matched node for node). Where a removed barrier is not
shown so (its tokens from another block's barrier, an operation of the input between them by
block order), this proof does not apply (None), and the path encoding of smt.specs decides.
"""
from __future__ import annotations

from verimim.ir.defs import App, Axiom, Def, Extract, Lit, MutLam, Tuple, Var
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, walk
from verimim.phases.rewriter import Rewriter
from verimim.phases.witness import Rewrites
from verimim.smt.match import Matcher
from verimim.smt.solver import Outcome

SYNC = "gpu.sync_work_items"


def _is_sync(d: Def) -> bool:
    return isinstance(d, App) and d.depth == 1 and isinstance(d.head, Axiom) and d.head.annex == SYNC


def _entry_vars(world: World) -> set[int]:
    """Kernels whose parameters are the launch's fresh tokens: the externals of a device World
    and the continuations `gpu.launch` starts, unless the program itself also jumps to one (or
    uses it any other way): re-entered, its parameters are tokens its own work made."""
    out = {m.gid for m in world.externals.values() if m.name != "main"}
    nodes = list(walk(world))
    for d in nodes:
        if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == "gpu.launch" \
                and isinstance(d.arg, MutLam):
            out.add(d.arg.gid)
    for d in nodes:
        if isinstance(d, Var):
            continue  # (a parameter names its mutable: no use of it)
        launched = d.arg if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == "gpu.launch" \
            else None
        for op in d.ops:
            if isinstance(op, MutLam) and op is not launched:
                out.discard(op.gid)
    return out


def _below(roots: list[Def], stop: set[int]) -> set[int]:
    """The nodes the roots depend on within one block (not entering mutables or `stop`)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        d = stack.pop()
        if d.gid in seen or d.gid in stop:
            continue
        seen.add(d.gid)
        if not isinstance(d, MutLam):
            stack.extend(d.ops)
    return seen


Blocks = dict[int, list[tuple[MutLam, list[Def]]]]


def _justified(r: App, entries: set[int], blocks: Blocks) -> str | None:
    """Why `r` is not shown to follow its barrier (or the kernel's entry) in every block that
    performs it (None: it is)."""
    arg = r.arg
    if not (isinstance(arg, Tuple) and len(arg.ops) == 2 and all(isinstance(e, Extract) for e in arg.ops)):
        return "its tokens are not the two results of one node"
    a, b = arg.ops
    assert isinstance(a, Extract) and isinstance(b, Extract)
    if a.tup is not b.tup or not (isinstance(a.index, Lit) and isinstance(b.index, Lit)) \
            or (a.index.value, b.index.value) != (0, 1):
        return "its tokens are not the two results of one node"
    src = a.tup
    performed = blocks.get(r.gid, [])
    if not performed:
        return "it is no operation of a block"
    for block, _events in performed:
        if _is_sync(src) and any(m is block for m, _ in blocks.get(src.gid, [])):
            continue
        if isinstance(src, Var) and src.mut.gid in entries and src.mut is block:
            continue  # the kernel's entry: nothing of the block needs to run before it
        return "its tokens do not come from a barrier or the kernel's entry in its own block"
    return None


def _blocks(world: World) -> Blocks:
    """Each shared/global memory operation or barrier → the blocks that perform it, each with
    all the operations it performs (the interpreter's own account: smt.specs._events)."""
    from verimim.ir.schedule import Scopes
    from verimim.smt.specs import _events

    scopes = Scopes(world)
    out: Blocks = {}
    for m in walk(world):
        if isinstance(m, MutLam) and m.body is not None:
            evs = _events(m, scopes)
            for e in evs:
                out.setdefault(e.gid, []).append((m, evs))
    return out


class _Remove(Rewriter):
    def __init__(self, old: World, removed: set[int]) -> None:
        super().__init__(old)
        self.removed = removed

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        return ops[1] if old.gid in self.removed else None


def prove_by_dependencies(res: PhaseResult) -> Outcome | None:
    """`proved`, or `refuted` (the output is not the input less the claimed barriers); None
    where some removal is not shown by the block argument (the path encoding decides)."""
    claimed = [old for old, _new in res.claim(Rewrites).rewrites]
    if not all(_is_sync(d) for d in claimed):
        return Outcome("refuted", "the phase rewrote something other than a barrier")
    removed = {d.gid for d in claimed}
    n_removed = 0
    shown = True
    for old, new in zip(res.before.worlds(), res.after.worlds()):
        mine = [d for d in walk(old) if d.gid in removed]
        if not mine and old is new:
            continue
        ref = _Remove(old, {d.gid for d in mine}).run()
        mm = Matcher().match_worlds(ref, new)
        if mm is not None:
            return Outcome("refuted", f"the output is not the input less the removed barriers: {mm.describe()}",
                           {"location": str(mm.old.loc) if mm.old.loc else "?"})
        entries = _entry_vars(old)
        blocks = _blocks(old)
        shown = shown and all(_justified(r, entries, blocks) is None for r in mine if isinstance(r, App))
        n_removed += len(mine)
    if not shown:
        return None
    if n_removed == 0:
        return Outcome("proved", "no barrier removed: the output is the input, node for node")
    return Outcome("proved", f"{n_removed} barrier(s) removed, each performed only in the block of the barrier "
                   f"(or the kernel entry) its tokens come from, where every schedule of the output is one of "
                   f"the input with the removed barrier right after the one it follows (two adjacent barriers "
                   f"are one); the rest unchanged node for node")
