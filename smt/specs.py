"""One specification per phase (PHASES.md), checked with Z3 on every run.

Each specification states what its phase must achieve, independently of how the phase does it:
checkers are compared with a violation formula over the address spaces (or token crossings) of
every operation; rewrites with a structural match of the two Worlds whose changed spots must be
the allowed patterns (with the side conditions proved by Z3); `remove_double_syncs` by the
dependencies within a block, for every path at once (smt.spec_syncs), else with the barrier separation of
every pair of memory operations on every (bounded) path of each kernel;
`split_apply` with a partition constraint system over one Boolean per mutable.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Set as AbstractSet
from typing import Any, TypeVar, cast

import z3

from verimim.frontend.elab import C_PREFIX
from verimim.ir.analysis import apps_with_head
from verimim.ir.defs import App, Axiom, Bot, Def, Extract, Lit, MutLam, Pi, Sigma, Tuple, Var
from verimim.ir.schedule import Scopes, activation
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program, apps_of, walk
from verimim.phases.witness import CleanupPrefix, Split
from verimim.smt import reference
from verimim.smt import z3_typed as z3t
from verimim.printer import show
from verimim.smt.match import Matcher, Pairs, app_parts, lit
from verimim.smt.names import Namer
from verimim.smt.sides import other_side_changed, side_view
from verimim.smt.nat_terms import NatMeanings
from verimim.smt.spec_split_match import host_effect_not_demanded, match_split
from verimim.smt.solver import Outcome, SpecContext, verdict_unsat_means_proved

Spec = Callable[[PhaseResult, SpecContext], Outcome]
SPECS: dict[str, Spec] = {}


# The phases whose specification judges a rejection too (a checker "accepts exactly when no
# operation can violate"): the pipeline asks it before it believes one (phases.runner).
JUDGES_REJECTIONS: set[str] = set()


def spec(name: str, judges_rejections: bool = False) -> Callable[[Spec], Spec]:
    def reg(fn: Spec) -> Spec:
        SPECS[name] = fn
        if judges_rejections:
            JUDGES_REJECTIONS.add(name)
        return fn
    return reg


def _loc(d: Def) -> str:
    return str(d.loc) if d.loc else "?"


# ============================================================================ checkers


# The violation formula of PHASES.md: operation → forbidden address spaces.
FORBIDDEN = {"mem.malloc": (3, 4, 5), "mem.free": (3, 4, 5), "mem.mslot": (1, 4), "mem.slot": (1, 4),
             "mem.store": (4,)}


def _first_pair(d: App, world: World | None = None) -> tuple[Def, Def] | None:
    """A mem operation's `(T, a)`; given `world`, a pair passed whole (`mem.store @X …`) as its
    projections `X#0`, `X#1`."""
    first = d.args()[0]
    if isinstance(first, Tuple) and len(first.ops) == 2:
        return first.ops[0], first.ops[1]
    if world is not None:
        return world.extract_n(first, 2, 0), world.extract_n(first, 2, 1)
    return None


def _unchanged(res: PhaseResult) -> bool:
    return res.after.host is res.before.host and res.after.device is res.before.device


def _checker_verdict(res: PhaseResult, ctx: SpecContext,
                     ops: list[tuple[Def, z3.BoolRef]], fresh_constraints: list[z3.BoolRef]) -> Outcome:
    """Accepts exactly when no operation can violate: compare the phase's decision with Z3's."""
    if not _unchanged(res):
        return Outcome("refuted", "the checker changed the program", None)
    s = ctx.solver()
    s.add(*fresh_constraints)
    s.add(z3.Or(*[v for _, v in ops]) if ops else z3.BoolVal(False))
    r = ctx.check(s, f"{res.name}: some operation violates")
    if r == z3.unknown:
        return Outcome("unknown", f"Z3 gave no answer within {ctx.timeout_ms} ms")
    possible = r == z3.sat
    if possible and not res.rejected:
        model = s.model()
        bad = next(op for op, v in ops if z3.is_true(model.eval(v, model_completion=True)))
        return Outcome("refuted", f"the phase accepted a violation at {_loc(bad)}",
                       {"operation": show(bad), "location": _loc(bad), "model": str(model)})
    if res.rejected and not possible:
        d = res.diagnostics[0]
        return Outcome("refuted", f"the phase rejected a program without violation ({d.message})",
                       {"location": str(d.loc)})
    # Each reported location must be one where some operation can violate (one place may hold
    # several: `main`'s type mentions a `mem.M` per token, `mem.M 0` among them).
    at: dict[str, list[z3.BoolRef]] = {}
    for op, v in ops:
        at.setdefault(_loc(op), []).append(v)
    for where in dict.fromkeys(str(d.loc) for d in res.diagnostics):
        if where not in at:
            continue
        s2 = ctx.solver()
        s2.add(*fresh_constraints)
        s2.add(z3t.Or(*at[where]))
        if ctx.check(s2, f"{res.name}: the reported operation at {where} violates") == z3.unsat:
            return Outcome("refuted", f"the phase reported {where}, which cannot violate")
    what = "rejected: every reported operation can violate" if res.rejected else "accepted: no operation can violate"
    return Outcome("proved", f"{what} ({len(ops)} operations)")


@spec("gpu.check_addr_spaces_repl", judges_rejections=True)
def spec_addr_spaces(res: PhaseResult, ctx: SpecContext) -> Outcome:
    nats = NatMeanings()  # a symbolic space: the values its term can take (either meaning of Nat)
    ops: list[tuple[Def, z3.BoolRef]] = []
    for world in res.before.worlds():
        for d in walk(world):
            if not (isinstance(d, App) and d.depth == 2 and isinstance(d.head, Axiom) and d.head.annex in FORBIDDEN):
                continue
            pair = _first_pair(d, world)
            if pair is None:
                continue
            forbidden = FORBIDDEN[d.head.annex]
            ops.append((d, nats.either(lambda a: z3t.Or(*[a == k for k in forbidden]), pair[1])))
    return _checker_verdict(res, ctx, ops, nats.facts)


def _mentions_mem_m(t: Def) -> bool:
    return bool(apps_with_head(t, "mem.M"))


@spec("gpu.mem_checks", judges_rejections=True)
def spec_mem_checks(res: PhaseResult, ctx: SpecContext) -> Outcome:
    ops: list[tuple[Def, z3.BoolRef]] = []
    nats = NatMeanings()
    for world in res.before.worlds():
        for d in walk(world):
            parts = app_parts(d, "gpu.launch", 4)
            if parts is not None:
                crosses = _mentions_mem_m(world.type_of(parts[3]))
                # reported where the arguments are written or at the launch (a value made
                # elsewhere, a `let` or a continuation, is passed at the launch)
                ops += [(at, z3.BoolVal(crosses)) for at in dict.fromkeys(x for x in (parts[3], d) if x.loc)]
                if not (parts[3].loc or d.loc):
                    ops.append((d, z3.BoolVal(crosses)))
        main = world.externals.get("main")
        if main is not None:
            for x in walk(world, [main.pi]):
                if isinstance(x, App) and isinstance(x.head, Axiom) and x.head.annex == "mem.M":
                    ops.append((main, nats.either(lambda n: cast(z3.BoolRef, n != 0), x.arg)))
    return _checker_verdict(res, ctx, ops, nats.facts)


# ============================================================================ rewrites


def _size_term(d: Def, namer: Namer) -> z3.ArithRef:
    """A size argument as an integer term: a literal, the layout size of `core.trait.size T` when
    T is laid out, else the size of T as an unknown named by T's structure (so the same type
    has the same unknown size in both Worlds, however the printer would show it)."""
    if isinstance(d, Lit):
        return z3.IntVal(d.value)
    parts = app_parts(d, "core.trait.size", 1)
    if parts is not None:
        return reference.size_term(parts[0], namer)
    return z3.Int(f"size_expr[{namer.key(d)}]")


def _rewrite_spec(res: PhaseResult, ctx: SpecContext, rule_for: Callable[[list[z3.BoolRef]], Callable[[Def, Def], Pairs | None]],
                  label: str, extra: Callable[[Program], Outcome | None] | None = None) -> Outcome:
    side: list[z3.BoolRef] = []  # side conditions of the rewritten spots, all to be proved
    for old, new in zip(res.before.worlds(), res.after.worlds()):
        m = Matcher(rule_for(side))
        mm = m.match_worlds(old, new)
        if mm is not None:
            return Outcome("refuted", mm.describe(), {"location": _loc(mm.old), "before": show(mm.old)[:300],
                                                      "after": show(mm.new)[:300]})
    if extra is not None:
        out = extra(res.after)
        if out is not None:
            return out
    if not side:
        return Outcome("proved", f"{label}: the Worlds match node for node (nothing to rewrite)")
    s = ctx.solver()
    s.add(z3.Not(z3.And(*side)))
    status, model = verdict_unsat_means_proved(ctx, s, f"{res.name}: the side conditions of {len(side)} rewrites")
    if status == "refuted":
        return Outcome("refuted", "a rewritten operation is not equivalent", {"model": str(model)})
    if status == "unknown":
        return Outcome("unknown", f"Z3 gave no answer within {ctx.timeout_ms} ms")
    return Outcome("proved", f"{label}: {len(side)} rewritten operations equivalent, all else unchanged")


def _size_condition(size: Def, t: Def, namer: Namer) -> z3.BoolRef:
    """`size = core.trait.size t`."""
    return cast(z3.BoolRef, _size_term(size, namer) == reference.size_term(t, namer))


@spec("mem.alloc2malloc_repl")
def spec_alloc2malloc(res: PhaseResult, ctx: SpecContext) -> Outcome:
    namer = Namer()

    def element(ta: Def) -> Def:
        """T of `(T, a)`; of a pair given whole (`mem.alloc X m`, `X: [*, Nat]`), `X#0`, made
        by the input World that holds X."""
        if isinstance(ta, Tuple) and len(ta.ops) == 2:
            return ta.ops[0]
        world = next((w for w in res.before.worlds() if w.serial == ta.home), res.before.host)
        return world.extract_n(ta, 2, 0)

    def rule_for(side: list[z3.BoolRef]) -> Callable[[Def, Def], Pairs | None]:
        def rule(a: Def, b: Def) -> Pairs | None:
            pa = app_parts(a, "mem.alloc", 2)
            if pa is not None:
                pb = app_parts(b, "mem.malloc", 2)
                if pb is None or not isinstance(pb[1], Tuple):
                    return None  # falls through to the structural comparison, which fails
                (ta, m), (tb, (m2, size)) = (pa[0], pa[1]), (pb[0], pb[1].ops)
                side.append(_size_condition(size, element(ta), namer))
                return [(ta, tb), (m, m2)]
            ps = app_parts(a, "mem.slot", 2)
            if ps is not None:
                pb = app_parts(b, "mem.mslot", 2)
                if pb is None or not isinstance(pb[1], Tuple) or len(pb[1].ops) != 3:
                    return None
                ta = ps[0]
                m2, size, id2 = pb[1].ops
                side.append(_size_condition(size, element(ta), namer))
                w_arg = ps[1]
                if not isinstance(w_arg, Tuple):
                    return None  # compared structurally (and found different)
                return [(ta, pb[0]), (w_arg.ops[0], m2), (w_arg.ops[1], id2)]
            return None
        return rule

    def none_left(p: Program) -> Outcome | None:
        for w in ran_on(res, p):
            for d in walk(w):
                if app_parts(d, "mem.alloc", 2) is not None or app_parts(d, "mem.slot", 2) is not None:
                    return Outcome("refuted", f"a `mem.alloc`/`mem.slot` remains at {_loc(d)}", {"location": _loc(d)})
        return None

    return _rewrite_spec(res, ctx, rule_for, "alloc2malloc", none_left)


def ran_on(res: PhaseResult, p: Program) -> list[World]:
    """The Worlds of p the phase rewrote: in a sub-pipeline, its side's only (the other side's
    own sub-pipeline runs later, and may not run this phase at all)."""
    if res.side == "host":
        return [p.host]
    if res.side == "device" and p.device is not None:
        return [p.device]
    return list(p.worlds())


def _code_of_kernels(w: World, device: bool) -> list[Def]:
    """The nodes of a World that may run on the device: all of a device World's; in another,
    what each continuation taking the device memory tokens (`gpu.GlobalM`, `gpu.SharedM`, …:
    one `gpu.launch` may start, named or through a parameter) reaches, not counting the values
    it captures from an enclosing function (a node depending only on parameters of mutables
    not reached: the enclosing function computes it)."""
    if device:
        return list(walk(w))
    scopes = Scopes()
    todo: list[Def] = [m for m in walk(w) if isinstance(m, MutLam) and _takes_device_tokens(m)]
    seen: dict[int, Def] = {}
    inside: set[MutLam] = set()
    while todo:
        d = todo.pop()
        if d.gid in seen:
            continue
        if not isinstance(d, MutLam) and (deps := scopes.deps(d)) and deps.isdisjoint(inside):
            continue  # captured from an enclosing function, which computes it
        seen[d.gid] = d
        if isinstance(d, MutLam):
            inside.add(d)
            todo.extend(() if d.body is None else (d.body,))
        elif not isinstance(d, Var):  # (a parameter's op is its function)
            todo.extend(d.ops)
    return list(seen.values())


def _takes_device_tokens(m: MutLam) -> bool:
    """A continuation whose first two parameters are `mem.M 1` and `mem.M 3` (a kernel's type)."""
    dom = m.pi.dom
    if not (isinstance(m.pi.codom, Bot) and isinstance(dom, Sigma) and len(dom.ops) >= 2):
        return False
    return all(lit(parts[0]) == space if (parts := app_parts(f, "mem.M", 1)) is not None else False
               for f, space in zip(dom.ops[:2], (1, 3)))


@spec("gpu.host_malloc2gpualloc_repl")
def spec_host_malloc(res: PhaseResult, ctx: SpecContext) -> Outcome:
    namer = Namer()

    def rule_for(side: list[z3.BoolRef]) -> Callable[[Def, Def], Pairs | None]:
        def rule(a: Def, b: Def) -> Pairs | None:
            pa = app_parts(a, "mem.malloc", 2)
            if pa is not None and isinstance(pa[0], Tuple) and lit(pa[0].ops[1]) == 1:
                pb = app_parts(b, "gpu.alloc.block", 2)
                if pb is None:
                    return None
                t = pa[0].ops[0]
                arg = pa[1]
                size = arg.ops[1] if isinstance(arg, Tuple) else None
                if size is None:
                    return None
                side.append(_size_condition(size, t, namer))
                m = arg.ops[0] if isinstance(arg, Tuple) else arg
                return [(t, pb[0]), (m, pb[1])]
            pf = app_parts(a, "mem.free", 2)
            if pf is not None and isinstance(pf[0], Tuple) and lit(pf[0].ops[1]) == 1:
                pb = app_parts(b, "gpu.free.block", 2)
                if pb is None:
                    return None
                return [(pf[0].ops[0], pb[0]), (pf[1], pb[1])]
            return None
        return rule

    def none_left(p: Program) -> Outcome | None:
        # gpu.alloc.block / free.block are host operations: none belongs in a kernel's code (the
        # device World, or what a launch reaches in a World not split), and a malloc there is
        # the kernel's own, not one to rewrite
        kernel_code = [d for w in p.worlds() for d in _code_of_kernels(w, w is p.device)]
        for d in kernel_code:
            if app_parts(d, "gpu.alloc.block", 2) is not None or app_parts(d, "gpu.free.block", 2) is not None:
                return Outcome("refuted", f"`{show(d)[:80]}`, a host operation, is in a kernel's code at "
                               f"{_loc(d)}", {"location": _loc(d)})
        in_kernels = {d.gid for d in kernel_code}
        nats = NatMeanings()
        terms = []
        for w in ran_on(res, p):
            for d in walk(w):
                if d.gid in in_kernels:
                    continue
                for annex in ("mem.malloc", "mem.free"):
                    parts = app_parts(d, annex, 2)
                    if parts is not None and isinstance(parts[0], Tuple):
                        terms.append((d, nats.either(lambda t: cast(z3.BoolRef, t == 1), parts[0].ops[1])))
        if not terms:
            return None
        s = ctx.solver()
        s.add(*nats.facts)
        s.add(z3.Or(*[t for _, t in terms]))
        r = ctx.check(s, "host_malloc2gpualloc: a malloc/free in address space 1 remains")
        if r == z3.sat:
            d = next(d for d, t in terms if z3.is_true(s.model().eval(t, model_completion=True)))
            return Outcome("refuted", f"`{show(d)[:80]}` in address space 1 remains at {_loc(d)}", {"location": _loc(d)})
        if r == z3.unknown:
            return Outcome("unknown", "Z3 gave no answer")
        return None

    return _rewrite_spec(res, ctx, rule_for, "host_malloc2gpualloc", none_left)




@spec("compile.cleanup")
@spec("compile.prefix_cleanup_phase")
def spec_cleanup(res: PhaseResult, ctx: SpecContext) -> Outcome:
    """What was kept is unchanged and what was removed cannot affect any effect or result.

    Execution starts at an external and follows only the references of the graph (SEMANTICS.md),
    so a node no kept root reaches is never executed. Kept: the output's externals are the
    input's, less those the phase made internal (`prefix_cleanup_phase`: the names with its
    prefix), and the structural match pairs every node the kept roots reach in the input with
    one node of the output, one to one, of the same kind with matching operands. Removed: Z3
    shows the set of kept continuations closed under references (no kept continuation refers to
    a removed one) and containing every root — for all inputs, since no execution can leave it.
    """
    prefix = res.claim(CleanupPrefix).prefix
    k = 0
    for old, new in zip(res.before.worlds(), res.after.worlds()):
        internal = {n for n in old.externals if isinstance(prefix, str) and n.startswith(prefix)}
        want = set(old.externals) - internal
        if set(new.externals) != want:
            return Outcome("refuted", f"the externals differ: {sorted(want)} expected, {sorted(new.externals)} after",
                           {"expected": sorted(want), "after": sorted(new.externals)})
        m = Matcher()
        mm = m.run([(old.externals[n], new.externals[n]) for n in sorted(want)])
        if mm is not None:
            return Outcome("refuted", mm.describe(), {"location": _loc(mm.old)})
        roots = [old.externals[n] for n in sorted(want)]
        out = _closed_under_references(ctx, res.name, old, roots, set(m.pairs))
        if out is not None:
            return out
        k += sum(1 for mut in old.muts if mut.gid not in m.pairs)
    made = f"; made internal: names starting with `{prefix}`" if isinstance(prefix, str) else ""
    return Outcome("proved", f"kept part unchanged node for node; {k} unreachable continuation(s) removed, "
                   f"none referenced from what is kept{made}")


def _references(mut: MutLam) -> set[MutLam]:
    """The continuations mut's body refers to: by name (plugin-defined ones included) or through
    the parameter of an enclosing one."""
    from verimim.ir.analysis import scan_mut

    owners, muts = scan_mut(mut, annexes=True)
    return owners | muts


def _closed_under_references(ctx: SpecContext, name: str, old: World, roots: list[MutLam],
                             kept: set[int]) -> Outcome | None:
    keep = {mut.gid: z3.BoolVal(mut.gid in kept) for mut in old.muts}
    for r in roots:
        keep.setdefault(r.gid, z3.BoolVal(r.gid in kept))
    escapes = [z3.Not(keep[r.gid]) for r in roots]
    refs = {mut.gid: _references(mut) for mut in old.muts}
    for mut in old.muts:
        for target in refs[mut.gid]:
            tk = keep.get(target.gid, z3.BoolVal(target.gid in kept))
            escapes.append(z3.And(keep[mut.gid], z3.Not(tk)))
    s = ctx.solver()
    s.add(z3.Or(*escapes) if escapes else z3.BoolVal(False))
    status, _model = verdict_unsat_means_proved(ctx, s, f"{name}: a kept continuation reaches a removed one")
    if status == "refuted":
        bad = next((f"`{mut.name}` refers to the removed `{t.name}`" for mut in old.muts if mut.gid in kept
                    for t in refs[mut.gid] if t.gid not in kept), "a root was removed")
        return Outcome("refuted", f"a removed continuation is reachable: {bad}")
    if status == "unknown":
        return Outcome("unknown", f"Z3 gave no answer within {ctx.timeout_ms} ms")
    return None


# ============================================================================ remove_double_syncs


MEM_OPS = ("mem.load", "mem.store", "mem.slot", "mem.mslot", "mem.malloc", "mem.free", "mem.lea")
UNROLL = 32       # continuation visits per path
MAX_PATHS = 256


def _events(m: MutLam, scopes: Scopes, world: World) -> list[Def]:
    """The memory operations and barriers an activation of m performs itself (not those its
    creator already did), in the order the interpreter runs them. Any other application that
    may touch memory (a call, `direct.cps2ds_dep`, `mem.remem`: _effectful) is an operation of
    its own, one a barrier may separate from others."""
    assert m.body is not None

    def leaf(d: Def) -> bool:
        return isinstance(d, (Lit, Axiom))

    # a mutable made here is made after what its closure captures (the interpreter's schedule)
    nodes = activation(m, scopes, leaf, lambda d: scopes.avail(d, leaf).values() if isinstance(d, MutLam) else d.ops)
    out: list[Def] = []
    for d in nodes:
        if not isinstance(d, App):
            continue
        head = d.head
        if isinstance(head, Axiom) and head.annex in MEM_OPS and d.depth == 2:
            if head.annex != "mem.lea" and _shared_or_global(d):
                out.append(d)
        elif isinstance(head, Axiom) and head.annex == "gpu.sync_work_items" and d.depth == 1:
            out.append(d)
        elif _effectful(world, d):
            out.append(d)
    return out


def _effectful(world: World, d: App) -> bool:
    """Whether an application other than a memory operation or a barrier may touch memory: any
    call (the callee may use a token it is given or one it captured), any operation but those
    of the pure plugins and the type constructors, unless it is only an axiom's partial
    application (a function value). An open one (in an immutable λ's body) has no type at hand."""
    head = d.head
    if not isinstance(head, Axiom):
        return True
    plugin, _, _ = head.annex.partition(".")
    if plugin in ("core", "math") or head.annex in ("mem.lea", "mem.M", "mem.Ptr"):
        return False
    return d.bvd != 0 or not isinstance(world.type_of(d), Pi)


def _shared_or_global(d: App) -> bool:
    """Barriers order the work-items' accesses to shared and global memory; accesses to local
    memory are private (and float freely in the schedule), so they do not count."""
    pair = _first_pair(d)
    return pair is None or not isinstance(pair[1], Lit) or pair[1].value in (1, 3)


def _targets(body: Def) -> list[MutLam]:
    """The continuations a body may jump to (both sides of a branch)."""
    if not isinstance(body, App):
        return []
    callee = body.callee
    if isinstance(callee, MutLam):
        return [callee]
    if isinstance(callee, Extract) and isinstance(callee.tup, Tuple):
        return [c for c in callee.tup.ops if isinstance(c, MutLam)]
    return []


# A called function's frame on a path: the function (gid) and, by parameter index, the
# continuations its call passed it (its `return`): a jump to that parameter resumes there.
Frame = tuple[int, tuple[tuple[int, MutLam], ...]]


def kernel_paths(kernel: MutLam, world: World) -> tuple[list[list[Def]], bool, str | None]:
    """Event sequences of every path through the kernel (each continuation visited at most UNROLL
    times on a path); whether the bound cut a path short; why the paths are not all of the
    kernel's executions (None: they are). A path ends where the kernel returns. A call (a jump
    that passes continuations) enters the callee with a frame; the callee's jump to such a
    parameter resumes the continuation its call passed. A jump the paths cannot follow (to a
    value they do not know) makes them partial."""
    scopes = Scopes()
    paths: list[list[Def]] = []
    cut = False
    stack: list[tuple[MutLam, list[Def], dict[int, int], tuple[Frame, ...]]] = [(kernel, [], {}, ())]
    while stack and len(paths) < MAX_PATHS:
        m, evs, visits, frames = stack.pop()
        if m.body is None:
            paths.append(evs)
            continue
        n = visits.get(m.gid, 0)
        if n >= UNROLL:
            cut = True
            paths.append(evs)
            continue
        visits = dict(visits)
        visits[m.gid] = n + 1
        evs = evs + _events(m, scopes, world)
        jumps = _jumps(m.body, kernel, frames)
        if isinstance(jumps, str):
            return paths, cut, f"`{m.name}` {jumps}"
        if not jumps:
            paths.append(evs)
            continue
        for t, fr in jumps:
            stack.append((t, evs, visits, fr))
    return paths, cut or bool(stack), None


def _jumps(body: Def, kernel: MutLam, frames: tuple[Frame, ...]) -> list[tuple[MutLam, tuple[Frame, ...]]] | str:
    """Where a body's jump may continue, each with its frames ([]: the kernel returns), or why
    the paths cannot follow it."""
    if not isinstance(body, App):
        return []
    callee = body.callee
    args = body.arg.ops if isinstance(body.arg, Tuple) else (body.arg,)
    passed = tuple((i, k) for i, op in enumerate(args) if (k := _resolve(op, frames)[0]) is not None)
    if isinstance(callee, Extract) and isinstance(callee.tup, Tuple):  # a branch
        if passed:
            return f"passes the continuation `{passed[0][1].name}` to a branch target"
        return [(c, frames) for c in callee.tup.ops if isinstance(c, MutLam)]
    if isinstance(callee, MutLam):
        return [(callee, frames + ((callee.gid, passed),) if passed else frames)]
    param = callee.tup if isinstance(callee, Extract) else callee
    if isinstance(param, Var) and param.mut is kernel:
        return []  # the kernel's own return
    target, depth = _resolve(callee, frames)
    if target is None:
        return f"jumps to `{show(callee)}`, a continuation the paths do not know"
    if passed:
        return f"passes the continuation `{passed[0][1].name}` to a function's return"
    return [(target, frames[:depth])]


def _resolve(d: Def, frames: tuple[Frame, ...]) -> tuple[MutLam | None, int]:
    """The continuation d is on this path (a continuation, or a parameter its function's call
    passed one for), with the number of frames below that function's (0 for a continuation)."""
    if isinstance(d, MutLam):
        return d, len(frames)
    if not (isinstance(d, Extract) and isinstance(d.tup, Var) and isinstance(d.index, Lit)):
        return None, 0
    for depth in range(len(frames) - 1, -1, -1):
        gid, conts = frames[depth]
        if gid == d.tup.mut.gid:
            return next((k for i, k in conts if i == d.index.value), None), depth
    return None, 0


def _key(d: Def) -> tuple[str, str]:
    """An operation of a path, as the phase must keep it: what it applies, and where."""
    assert isinstance(d, App)
    head = d.head
    return (head.annex if isinstance(head, Axiom) else "a call"), str(d.loc)


@spec("gpu.remove_double_syncs")
def spec_remove_double_syncs(res: PhaseResult, ctx: SpecContext) -> Outcome:
    from verimim.smt.spec_syncs import prove_by_dependencies

    # For every path at once where each removed barrier directly follows another in its block;
    # else path by path, below (the output already matched the input less the claimed barriers).
    direct = prove_by_dependencies(res, ctx)
    if direct is not None:
        return direct
    return separation_on_paths(res, ctx)


def separation_on_paths(res: PhaseResult, ctx: SpecContext) -> Outcome:
    """remove_double_syncs' specification path by path: on each path of each kernel (loops
    unrolled up to UNROLL visits), the memory operations are the same, each pair of neighbours is
    separated by a barrier after exactly when before, and paths that reached the same number of
    barriers still do."""
    before, after = res.before, res.after
    old_w = before.device if before.device is not None else before.host
    new_w = after.device if after.device is not None else after.host
    kernels_old, kernels_new = reference.kernels_by_name(old_w), reference.kernels_by_name(new_w)
    if isinstance(kernels_old, str) or isinstance(kernels_new, str):
        why = kernels_old if isinstance(kernels_old, str) else kernels_new
        return Outcome("unknown", f"the kernels are not paired by name: {why}")
    if set(kernels_old) != set(kernels_new):
        return Outcome("refuted", f"kernels differ: {sorted(kernels_old)} before, {sorted(kernels_new)} after")
    checked = paths = 0  # paths with two or more memory operations to separate; all paths
    bounded = False
    for name in sorted(kernels_old):
        p_old, cut1, partial1 = kernel_paths(kernels_old[name], old_w)
        p_new, cut2, partial2 = kernel_paths(kernels_new[name], new_w)
        if partial1 is not None or partial2 is not None:
            return Outcome("unknown", f"kernel `{name}`: a removal the block argument does not show, and "
                           f"its paths are not all modelled: {partial1 or partial2}")
        bounded = bounded or cut1 or cut2
        if len(p_old) != len(p_new):
            return Outcome("refuted", f"kernel `{name}`: {len(p_old)} paths before, {len(p_new)} after")
        s = ctx.solver()
        conds: list[Any] = []
        said: list[tuple[str, dict[str, object]]] = []  # what each condition says: the counterexample
        counts_old: list[int] = []  # barriers each path reaches, before and after
        counts_new: list[int] = []
        paths += len(p_old)
        for pi, (eo, en) in enumerate(zip(p_old, p_new)):
            mo = [e for e in eo if _key(e)[0] != "gpu.sync_work_items"]
            mn = [e for e in en if _key(e)[0] != "gpu.sync_work_items"]
            if [_key(e) for e in mo] != [_key(e) for e in mn]:
                return Outcome("refuted", f"kernel `{name}`, path {pi}: the memory operations differ",
                               {"before": [str(e.loc) for e in mo], "after": [str(e.loc) for e in mn]})
            co = _barrier_counts(eo)
            cn = _barrier_counts(en)
            counts_old.append(len(eo) - len(mo))
            counts_new.append(len(en) - len(mn))
            if len(co) < 2:
                continue
            # Counts of barriers before each operation never decrease along a path, so a barrier
            # separates operations i < j exactly when one separates some neighbours between
            # them: every pair keeps its separation when every pair of neighbours does. (Every
            # pair at once, as a quantified array query, ran out of Z3's 2 s on a kernel of 247
            # paths.)
            for k in range(len(co) - 1):
                conds.append((z3.IntVal(co[k + 1]) > co[k]) != (z3.IntVal(cn[k + 1]) > cn[k]))
                was, now = co[k + 1] > co[k], cn[k + 1] > cn[k]
                said.append((f"the memory operations at {mo[k].loc} and {mo[k + 1].loc} (path {pi}) are "
                             f"{'' if was else 'not '}separated by a barrier before the phase and "
                             f"{'' if now else 'not '}after",
                             {"path": pi, "first": str(mo[k].loc), "second": str(mo[k + 1].loc),
                              "separated_before": was, "separated_after": now}))
            checked += 1
        # No divergence introduced: paths that reached the same number of barriers still do.
        # Each path is compared with the first path of its class (same count before), not with
        # every other: two paths of a class that differ after differ from that first one, one of
        # them at least, so the question is the same and its size linear (every pair was a
        # tenth of a fuzzed program's check at 256 paths).
        first_of_class: dict[int, int] = {}
        for a, before_count in enumerate(counts_old):
            r = first_of_class.setdefault(before_count, a)
            if r != a:
                conds.append(z3.And(z3.IntVal(counts_old[a]) == counts_old[r],
                                    z3.IntVal(counts_new[a]) != counts_new[r]))
                said.append((f"paths {r} and {a} reached the same number of barriers before the phase and "
                             f"not after: a divergence was introduced",
                             {"paths": [r, a], "barriers_before": [counts_old[r], counts_old[a]],
                              "barriers_after": [counts_new[r], counts_new[a]]}))
        s.add(z3.Or(*conds) if conds else z3.BoolVal(False))
        status, model = verdict_unsat_means_proved(ctx, s, f"remove_double_syncs: kernel {name}")
        if status == "refuted":
            assert model is not None
            what, cex = next(w for c, w in zip(conds, said) if z3.is_true(model.eval(c, model_completion=True)))
            return Outcome("refuted", f"kernel `{name}`: {what}", {"kernel": name, **cex})
        if status == "unknown":
            return Outcome("unknown", f"Z3 gave no answer within {ctx.timeout_ms} ms")
    # (said of every path: a path with fewer than two memory operations has no pair to separate,
    # but its memory operations and its barrier count were compared too)
    what = (f"the memory operations, their barrier separation ({checked} path(s) with two or more) and "
            f"the barrier counts preserved on {paths} path(s) of {len(kernels_old)} kernel(s)")
    if bounded:
        # Only the paths within the unrolling bound were compared: a bound, not a proof.
        return Outcome("bounded", f"{what}, loops unrolled up to {UNROLL} visits per continuation "
                       f"(at most {MAX_PATHS} paths)")
    return Outcome("proved", what)


def _barrier_counts(events: list[Def]) -> list[int]:
    """For each memory operation of a path, how many barriers precede it."""
    out, seen = [], 0
    for e in events:
        if _key(e)[0] == "gpu.sync_work_items":
            seen += 1
        else:
            out.append(seen)
    return out


# ============================================================================ split_apply


HOST_ONLY = {"gpu.init", "gpu.deinit", "gpu.auto_init", "gpu.auto_deinit", "gpu.launch", "gpu.stream_init",
             "gpu.stream_deinit", "gpu.stream_sync", "gpu.alloc.block", "gpu.alloc.asyn", "gpu.free.block",
             "gpu.free.asyn", "gpu.copy_to_device.block", "gpu.copy_to_device.asyn", "gpu.copy_to_host.block",
             "gpu.copy_to_host.asyn", "gpu.buf_alloc_copy", "gpu.buf_copy_to_host"}


@spec("gpu.split_apply")
def spec_split(res: PhaseResult, ctx: SpecContext) -> Outcome:
    host, dev = res.after.host, res.after.device
    if dev is None:
        return Outcome("refuted", "no device World after split_apply")
    old = res.before.host
    # Each kernel of the input under the name the phase says it is external under on both sides
    # (its own unless two share one); smt.spec_split_match shows each name's kernel is the
    # input's, node for node.
    claimed = res.claim(Split).device_names
    renamed = {k.gid: _mut_key(k, claimed.get(k.gid)) for k in reference.kernels(old)}
    kernels = set(renamed.values())
    key_of = {id(w): _split_keys(w, kernels, _ambiguous(old, renamed), renamed if w is old else {})
              for w in (old, host, dev)}
    # One Boolean per mutable of each side: is it on the device?
    side_of: dict[str, list[str]] = {}
    for label, w in (("host", host), ("device", dev)):
        keys = key_of[id(w)]
        for d in walk(w):
            if isinstance(d, MutLam) and d.annex is None:
                side_of.setdefault(keys(d), []).append(label if d.body is not None else label + "-decl")
    reach = _mut_graph(old, key_of[id(old)])
    # A helper that host code and a kernel both call needs its code on both sides: two copies
    # (which the node-for-node match below shows are the input's code); every other mutable
    # lives on one side.
    host_roots = _roots(old, key_of[id(old)]) - kernels
    shared = (_reached(host_roots, lambda n: reach.get(n, ()), stop=kernels)
              & _reached(kernels, lambda n: reach.get(n, ())))
    for n in shared:
        if sorted(side_of.get(n, [])) != ["device", "host"]:
            return Outcome("refuted", f"`{n}`, called by host code and by a kernel, is not on both sides "
                           f"(it is on: {', '.join(side_of.get(n, [])) or 'neither'})", {"sides": side_of})
    side_of = {n: sides for n, sides in side_of.items() if n not in shared}
    reach = {n: ts - shared for n, ts in reach.items() if n not in shared}
    s = ctx.solver()
    dv = {n: z3.Bool(f"device[{n}]") for n in side_of}
    for n, sides in side_of.items():
        on_dev = "device" in sides
        on_host = "host" in sides
        s.add(dv[n] == z3.BoolVal(on_dev))
        if on_dev and on_host:
            s.add(z3.BoolVal(False))  # a mutable with a body on both sides
    # Required: kernels on the device; whatever a device mutable reaches is on the device;
    # minimality: a device mutable is reached from a kernel.
    for k in kernels:
        if k in dv:
            s.add(dv[k])
    for n, targets in reach.items():
        for t in targets:
            if n in dv and t in dv:
                s.add(z3.Implies(dv[n], dv[t]))
    for n in dv:
        if n in kernels:
            continue
        preds = [p for p, ts in reach.items() if n in ts and p in dv]
        s.add(z3.Implies(dv[n], z3.Or(*[dv[p] for p in preds]) if preds else z3.BoolVal(False)))
    # The device World holds no host-only operation.
    for d in walk(dev):
        if isinstance(d, Axiom) and d.annex in HOST_ONLY:
            return Outcome("refuted", f"the device World holds the host operation `{d.annex}`", {"operation": d.annex})
        c_fun = d.head if isinstance(d, App) else d
        if isinstance(c_fun, Axiom) and c_fun.annex.startswith(C_PREFIX):
            # a C function (`cfun`) is libc's, host code: no kernel can call it (PHASES.md); found
            # where it is called (or, passed as a value, where it is declared)
            at = _loc(d if isinstance(d, App) and d.loc else c_fun)
            return Outcome("refuted", f"the device World holds the C function `{c_fun.annex[len(C_PREFIX):]}` "
                           f"at {at}", {"operation": c_fun.annex, "location": at})
        if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith("mem.") and d.depth == 2:
            pair = _first_pair(d)
            if pair is not None and lit(pair[1]) == 0:
                return Outcome("refuted", f"the device World holds a host memory operation at {_loc(d)}")
    # Nothing lost: every continuation of the program is on one side.
    for n in reach:
        if n not in side_of:
            return Outcome("refuted", f"the continuation `{n}` was lost")
    r = ctx.check(s, "split_apply: the partition satisfies the constraints")
    if r == z3.sat:
        partition = (f"kernels {sorted(kernels)} and what only they reach are on the device; "
                     f"{len(side_of)} continuations partitioned")
        moved, unproved, back = match_split(res)  # and nothing changed on the way (smt.spec_split_match)
        if isinstance(moved, str):
            return Outcome("refuted", f"split_apply: {moved}")
        if moved is not None:
            return Outcome("refuted", f"split_apply changed the code it moved: {moved.describe()}",
                           {"location": _loc(moved.old)})
        # and the host performs only the memory effects the input's host code demands (a
        # kernel's load made a capture would run on the host before the launch)
        stray = host_effect_not_demanded(old, host, back)
        if stray is not None:
            return Outcome("refuted", f"split_apply: {stray[0]}", stray[1])
        partition += "; both sides are the input's code, node for node"
        lifted = res.claim(Split).lifted_captures
        if unproved:
            return _lifted_captures(res, partition, unproved)
        if lifted:
            partition += (", each captured host value passed by every launch as the argument the kernel "
                          "reads it from (" + ", ".join(f"{k}: {n}" for k, n in sorted(lifted.items())) + ")")
        return Outcome("proved", partition)
    if r == z3.unsat:
        return Outcome("refuted", "the partition violates the split constraints (a mutable on both sides, a "
                       "kernel on the host, a device mutable reaching a host one, or a device mutable "
                       "not reached from any kernel)", {"sides": side_of})
    return Outcome("unknown", f"Z3 gave no answer within {ctx.timeout_ms} ms")


def _lifted_captures(res: PhaseResult, partition: str, unproved: dict[str, str]) -> Outcome:
    """Kernels that captured host values now take them as launch arguments (each launch declares
    the device kernel's type: smt.spec_split_match), but the node-for-node match could not show
    what they pass (`unproved`, kernel → why): the program must compute what it computed before
    (differential execution: shown for these inputs, not proved)."""
    from verimim.smt.differential import compare

    out, runs = compare(res)
    if out is not None:
        return out
    lifted = ", ".join(f"{k} ({n} values)" for k, n in sorted(res.claim(Split).lifted_captures.items()))
    why = "; ".join(f"{k}: {w}" for k, w in sorted(unproved.items()))
    return Outcome("validated", f"{partition}; the host values kernels {lifted} captured are passed as "
                   f"launch arguments: same execution ({runs}); not proved: {why}")


def _mut_key(m: MutLam, name: str | None = None) -> str:
    """A mutable's identity across the Worlds of a phase: its name (or `name`, the one it has in
    the other World) and source position."""
    name = name or m.name or "?"
    return f"{name}@{m.loc.line}:{m.loc.col}" if m.loc else name


def _mut_graph(world: World, key: Callable[[MutLam], str]) -> dict[str, set[str]]:
    from verimim.ir.analysis import scan_mut

    out: dict[str, set[str]] = {}
    for d in walk(world):
        if isinstance(d, MutLam) and d.annex is None:
            out.setdefault(key(d), set()).update(key(m) for m in scan_mut(d)[1] if m.annex is None)
    return out


T = TypeVar("T")


def _roots(world: World, key: Callable[[MutLam], str]) -> set[str]:
    """The program's entry points (its externals)."""
    return {key(m) for m in world.externals.values() if isinstance(m, MutLam)}


def _reached(roots: Iterable[T], succ: Callable[[T], Iterable[T]], stop: AbstractSet[T] = frozenset()) -> set[T]:
    """What the roots reach through `succ`, not going into `stop` (the kernels, for host code: a
    launch names its kernel, it does not run it on the host)."""
    out = set(roots)
    stack = list(out)
    while stack:
        for t in succ(stack.pop()):
            if t not in out and t not in stop:
                out.add(t)
                stack.append(t)
    return out


def _ambiguous(world: World, renamed: dict[int, str]) -> set[str]:
    """Names and positions that two mutables with bodies share: copies of one source function
    (a helper specialised once for the host's call and once for a kernel's). A kernel is
    known by the key `renamed` gives it."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for d in walk(world):
        if isinstance(d, MutLam) and d.annex is None and d.body is not None:
            k = renamed.get(d.gid) or _mut_key(d)
            if k in seen and seen[k] != d.gid:
                out.add(k)
            seen[k] = d.gid
    return out


def _split_keys(world: World, kernels: set[str], ambiguous: set[str],
                renamed: dict[int, str]) -> Callable[[MutLam], str]:
    """A mutable's identity across split_apply's Worlds: its name and position (a kernel of the
    input: the key `renamed` gives it, its name on the device), and for copies sharing those,
    which kernels reach it (none: a host copy), which is the same before the split and on the
    side it goes to."""
    from verimim.ir.analysis import scan_mut

    def calls(m: MutLam) -> list[MutLam]:
        return [y for y in scan_mut(m)[1] if y.annex is None]

    def base_key(m: MutLam) -> str:
        return renamed.get(m.gid) or _mut_key(m)

    reached: dict[int, set[str]] = {}
    if ambiguous:
        for k in walk(world):
            if isinstance(k, MutLam) and k.body is not None and base_key(k) in kernels:
                for m in _reached([k], calls):
                    reached.setdefault(m.gid, set()).add(base_key(k))

    def key(m: MutLam) -> str:
        base = base_key(m)
        if base not in ambiguous:
            return base
        return f"{base} (reached from {', '.join(sorted(reached.get(m.gid, ()))) or 'the host'})"
    return key


def check_spec(res: PhaseResult, ctx: SpecContext) -> Outcome:
    fn = SPECS.get(res.name)
    t0 = time.perf_counter()
    z0 = ctx.z3_s
    changed = other_side_changed(res)
    if changed is not None:
        out = Outcome("refuted", changed)
    elif fn is None:
        out = Outcome("skipped", f"no specification for {res.name}")
    else:
        out = fn(side_view(res), ctx)  # a sub-pipeline's phase: judged on its side (smt.sides)
    out.time_s = time.perf_counter() - t0
    out.z3_s = ctx.z3_s - z0
    return out


# Specifications in their own modules register themselves on import (after `spec` exists).
from verimim.smt import spec_lower_ptr  # noqa: E402,F401
from verimim.smt import spec_btensor  # noqa: E402,F401
from verimim.smt import spec_inline  # noqa: E402,F401
