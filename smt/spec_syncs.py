"""`gpu.remove_double_syncs` proved from dependencies, for every path and schedule at once.

A continuation's body runs as one block: its operations in some order that respects their
operands (SEMANTICS.md), then its jump. Take a removed barrier `r` whose tokens come straight
from the barrier `s` (or from the kernel's entry tokens), both operations of one block B. If
every other shared or global memory operation and barrier of B either comes before `s` by
dependency (`s` needs it) or after `r` (it needs `r`), then in every order of B nothing runs
between `s` and `r` (at B's start: nothing before `r`): on every path `r` immediately follows
`s`. Deleting `r` keeps each pair of memory operations separated exactly as before, and deletes
one site from every barrier sequence, right after `s`: work-items that met the same barriers
still do. Loops need no unrolling: the argument is about one block. (An operation that the
tokens leave free to run between them does run there in some order — and in the one schedule
the interpreter, the kernel verifier and the code generator share, it may: such a removal is
not shown here.)

Whatever the claims, the output must be the input with exactly the claimed barriers replaced by
their tokens (a reference built here, matched node for node). Where a removed barrier is not
shown so (another block, an independent operation in between), this proof does not apply
(None), and the path encoding of smt.specs decides, in that schedule.
"""
from __future__ import annotations

import z3

from verimim.ir.defs import App, Axiom, Def, Extract, Lit, MutLam, Tuple, Var
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, walk
from verimim.phases.rewriter import Rewriter
from verimim.phases.witness import Rewrites
from verimim.smt.match import Matcher
from verimim.smt import z3_typed as z3t
from verimim.smt.solver import Outcome, SpecContext

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


def _justified(r: App, entries: set[int], blocks: Blocks, ctx: SpecContext) -> str | None:
    """Why `r` is not shown to follow its barrier (or the kernel's entry) directly in every block
    that performs it (None: it is). The block's structure gives the order constraints; Z3 decides
    that no order of the block that respects them puts another operation between the two."""
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
    for block, events in performed:
        if _is_sync(src) and any(m is block for m, _ in blocks.get(src.gid, [])):
            first: Def | None = src
        elif isinstance(src, Var) and src.mut.gid in entries and src.mut is block:
            first = None  # the kernel's entry: nothing of the block runs before it
        else:
            return "its tokens do not come from a barrier or the kernel's entry in its own block"
        between = _may_run_between(first, r, events, ctx)
        if between is not None:
            return f"an operation at {between.loc or '?'} may run between them"
    return None


def _may_run_between(first: Def | None, r: Def, events: list[Def], ctx: SpecContext) -> Def | None:
    """An operation of the block that some order of it runs after `first` (None: the block's
    start) and before `r`, else None. Each operation's position in the order is a Z3 integer;
    an operation that depends on another (through any node of the block) comes after it; Z3
    looks for positions with one operation strictly between the two."""
    ops: list[Def] = list(dict.fromkeys([*events, r, *([first] if first is not None else [])]))
    others = [e for e in ops if e is not r and e is not first]
    if not others:
        return None
    pos = {e.gid: z3.Int(f"pos_{i}") for i, e in enumerate(ops)}
    s = ctx.solver()
    s.add(z3.Distinct(*pos.values()))
    for b in ops:
        below = _below([b], set())
        s.add(*[pos[a.gid] < pos[b.gid] for a in ops if a is not b and a.gid in below])
    start = pos[first.gid] if first is not None else None
    chosen = z3.Int("between")
    s.add(z3.Or(*[z3.And(chosen == i, pos[e.gid] < pos[r.gid], *([start < pos[e.gid]] if start is not None else []))
                  for i, e in enumerate(others)]))
    answer = ctx.check(s, "gpu.remove_double_syncs: an operation between a removed barrier and the one it follows")
    if answer == z3.unsat:
        return None
    if answer != z3.sat:
        return others[0]  # no answer: not shown (the path encoding decides)
    k = s.model().eval(chosen, model_completion=True)
    i = k.as_long() if z3t.is_int_value(k) else 0
    return others[i] if 0 <= i < len(others) else others[0]


def _blocks(world: World) -> Blocks:
    """Each shared/global memory operation or barrier → the blocks that perform it, each with
    all the operations it performs (the interpreter's own account: smt.specs._events)."""
    from verimim.ir.schedule import Scopes
    from verimim.smt.specs import _events

    scopes = Scopes(world)
    out: Blocks = {}
    for m in walk(world):
        if isinstance(m, MutLam) and m.body is not None:
            evs = _events(m, scopes, world)
            for e in evs:
                out.setdefault(e.gid, []).append((m, evs))
    return out


class _Remove(Rewriter):
    def __init__(self, old: World, removed: set[int]) -> None:
        super().__init__(old)
        self.removed = removed

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        return ops[1] if old.gid in self.removed else None


def prove_by_dependencies(res: PhaseResult, ctx: SpecContext | None = None) -> Outcome | None:
    """`proved`, or `refuted` (the output is not the input less the claimed barriers); None
    where some removal is not shown by the block argument (the path encoding decides)."""
    claimed = [old for old, _new in res.claim(Rewrites).rewrites]
    if not all(_is_sync(d) for d in claimed):
        return Outcome("refuted", "the phase rewrote something other than a barrier")
    removed = {d.gid for d in claimed}
    ctx = ctx if ctx is not None else SpecContext()
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
        shown = shown and all(_justified(r, entries, blocks, ctx) is None for r in mine if isinstance(r, App))
        n_removed += len(mine)
    if not shown:
        return None
    if n_removed == 0:
        return Outcome("proved", "no barrier removed: the output is the input, node for node")
    return Outcome("proved", f"{n_removed} barrier(s) removed, each in the block of the barrier (or kernel "
                   f"entry) it follows; Z3: no order of the block's operations that respects their "
                   f"dependencies puts one between them, so on every path and schedule nothing runs "
                   f"between them; the rest unchanged node for node")
