"""`compile.beta_red` and `compile.lam_spec` (PHASES.md step 5): inlining known mutables.

Both phases replace an application `f a` of a known mutable `f` by f's body with f's parameter
substituted by `a`; they differ in which applications they take:

- `compile.beta_red`: applications of a mutable `lam` for its value (a `MutLam` whose type is
  not a continuation): `sum_n 5` of a curried `fun sum_n (n: Nat) (…)`, `gpu.with_streams (2,
  work)`. (The frontend already reduces `lam`s that need no mutable, and the World β-reduces
  immutable ones such as `gpu.synced_scope` where they are applied.)
- `compile.lam_spec`: calls (jumps) `f (args)` of a known `fun`/`con` whose parameter type holds
  a continuation or function type (every `fun`, through its return continuation; a
  higher-order `con`): the call site gets its own copy of f, specialised to the closures it
  passes (a `lam` scope handed on to `gpu.synced_scope`, the `func` of `gpu.with_streams` once
  beta_red made it `work`), so no higher-order parameter is left to the backend.

Inlining `f` at one site is a child rewriter (`Inliner` with `owner = f`) whose `Var(f)` is the
site's rewritten argument and which copies afresh every node *local* to f (one that depends,
by `Scopes.deps`, on the parameter of f or of a mutable nested in f: `Plan.local_muts`),
delegating every other node to its parent, so what f shares with the rest of the program
(closed kernels, the creator's values, annexes) stays shared. A direct reference `f` at the site
means the site runs in the activation of f's creator that f's closure would have captured, so
the delegated nodes mean the same after inlining.

Limits (each application left for one of them is logged with its reason, which the
specification reports):
- never a recursive mutable (one its own body reaches): a loop written as a recursive
  continuation stays a loop;
- never an application under an immutable binder (an open argument: substituting it under
  further binders would need shifting);
- never an external (its body is the program's interface) or a kernel; with several call
  sites, never one whose scope holds a barrier or a static shared slot that one launch could
  then run in two copies (different barriers, different blocks): one in a kernel the scope
  holds whole, or in a function every call of which is a launch's kernel (a curried kernel
  specialised for two launches), is copied into different kernels, which gpu.split_apply
  names apart;
- `lam_spec` only inlines functions whose local scope has at most MAX_SPEC_NODES nodes;
- the nodes copied by one run of a phase are bounded by a budget (GROWTH times the input,
  at least MIN_BUDGET); nested inlinings by MAX_DEPTH;
- a round only sees applications whose callee is a mutable of the World it starts from (a
  curried `lam` needs one round per argument): at most MAX_ROUNDS rounds per run.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from verimim.ir.analysis import scan_mut
from verimim.ir.defs import App, Arr, Axiom, Def, Extract, IdxT, Lit, MutLam, Pi, Sigma, Tuple, Var
from verimim.ir.schedule import Scopes
from verimim.ir.world import IRError, World
from verimim.phases.base import Phase, PhaseResult, Program, apps_of, walk
from verimim.phases.rewriter import Rewriter
from verimim.phases.witness import Inlining, mut_key

MAX_ROUNDS = 8
MAX_SPEC_NODES = 1500
GROWTH = 4
MIN_BUDGET = 20_000
MAX_DEPTH = 64

BETA = "beta"
SPEC = "spec"


def refs_of(m: MutLam) -> set[MutLam]:
    """The mutables m's body refers to directly, plugin-defined ones (`gpu.with_streams`) included."""
    return scan_mut(m, annexes=True)[1]


def _reached(roots: list[MutLam], within: set[MutLam]) -> set[MutLam]:
    """The mutables of `within` that the roots reach through their bodies' references (roots included)."""
    out = set(roots)
    stack = list(roots)
    while stack:
        for y in scan_mut(stack.pop())[1]:
            if y in within and y not in out:
                out.add(y)
                stack.append(y)
    return out


def _maybe_shared_slot(d: Def) -> bool:
    """`mem.slot (T, a)` / `mem.mslot (T, a)` with `a` 3 or not a literal."""
    if not (isinstance(d, App) and d.depth == 1 and isinstance(d.head, Axiom)
            and d.head.annex in ("mem.slot", "mem.mslot")):
        return False
    arg = d.arg
    space = arg.ops[1] if isinstance(arg, Tuple) and len(arg.ops) == 2 else None
    return not isinstance(space, Lit) or space.value == 3


def recursive_muts(world: World) -> set[int]:
    """The mutables that lie on a cycle of direct references (Tarjan's SCCs, iteratively)."""
    muts = [d for d in walk(world) if isinstance(d, MutLam)]
    succ = {m.gid: [r.gid for r in refs_of(m)] for m in muts}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: set[int] = set()
    for root in succ:
        if root in index:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            nxt = succ.get(v, [])
            if i < len(nxt):
                work.append((v, i + 1))
                w = nxt[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if work:  # v is done: propagate its low link to its parent
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ.get(v, []):
                    out.update(comp)
    return out


def higher_order(t: Def) -> bool:
    """Whether values of type t hold a function or continuation: t is a Pi, or a sigma or array
    with one among its elements (types like `mem.Ptr (T, a)` are data, whatever T is)."""
    stack = [t]
    while stack:
        d = stack.pop()
        if isinstance(d, Pi):
            return True
        if isinstance(d, Sigma):
            stack.extend(d.ops)
        elif isinstance(d, Arr):
            stack.append(d.body)
    return False


@dataclass
class _Stats:
    """What one run of a phase did, across rounds and Worlds."""

    budget: int
    inlined: Counter[str] = field(default_factory=Counter)
    left: dict[str, str] = field(default_factory=dict)


class Plan:
    """Which applications of one World a round inlines (decided on the old World)."""

    def __init__(self, world: World, mode: str, stats: _Stats) -> None:
        from verimim.phases.repl import kernels_of

        self.world = world
        self.mode = mode
        self.stats = stats
        self.scopes = Scopes(world)
        self.recursive: set[int] = recursive_muts(world)
        self.kernels = {k.gid for k in kernels_of(world)}
        # applications that are a launch's kernel (`gpu.launch … (kernel v)`): each is its own kernel
        self.launched = {app.arg.gid for app in apps_of(world, "gpu.launch", 3)}
        self._launch_sites: Counter[int] | None = None
        self._sizes: dict[int, int] = {}
        self._local: dict[int, list[MutLam]] = {}
        self._local_gids: dict[int, frozenset[int]] = {}
        self._why: dict[int, str | None] = {}
        self._site_counts: Counter[int] | None = None

    def candidate(self, x: Def) -> MutLam | None:
        """The callee when x is an application of the kind this phase inlines."""
        if not isinstance(x, App) or not isinstance(x.callee, MutLam):
            return None
        f = x.callee
        if f.body is None or f.gid in self.recursive:
            return None
        if self.mode == BETA:
            return None if self.world.is_cn(f.pi) else f
        if not self.world.is_cn(f.pi) or not higher_order(f.pi.dom):
            return None
        return f

    def why_not(self, x: App, f: MutLam) -> str | None:
        """Why the candidate application x of f is left (None: inline it)."""
        if x.bvd != 0:
            return "applied under an immutable binder"
        hit = self._why.get(f.gid, "?")
        if hit == "?":
            hit = self._why[f.gid] = self._why_callee(f)
        return hit

    def _why_callee(self, f: MutLam) -> str | None:
        if f.external:
            return "external"
        if f.gid in self.kernels:
            return "a kernel"  # (a launch enters it: it stays whole, once)
        sites = self._sites(f)
        held = self._one_of_a_kind(f) if sites > 1 and sites > self._sites(f, launched=True) else None
        if held is not None:
            # the copies would be different operations: work-items that reached the one barrier
            # from different call sites would then wait at different ones (divergence), and
            # would get different blocks of the one shared slot (SEMANTICS.md: one per slot)
            return f"its scope holds {held} and it has several call sites"
        if self.mode == SPEC and self.size(f) > MAX_SPEC_NODES:
            return f"larger than {MAX_SPEC_NODES} nodes"
        return None

    def _sites(self, f: MutLam, launched: bool = False) -> int:
        """f's applications (`launched`: those of them that are a launch's kernel), counting one
        for all calls of f with the same argument (one node), and one for any other use of it."""
        if self._site_counts is None or self._launch_sites is None:
            counts: Counter[int] = Counter()
            launches: Counter[int] = Counter()
            for d in walk(self.world):
                if isinstance(d, App) and isinstance(d.callee, MutLam):
                    counts[d.callee.gid] += 1
                    if d.gid in self.launched:
                        launches[d.callee.gid] += 1
            self._site_counts, self._launch_sites = counts, launches
        return (self._launch_sites if launched else self._site_counts)[f.gid]

    def _one_of_a_kind(self, f: MutLam) -> str | None:
        """An operation in f's scope whose copies would mean something else than it, for one
        launch: a barrier, or a static shared slot (a block per slot operation), outside the
        kernels f's scope holds whole (each copy of those is another kernel); None if there
        is none."""
        local = self.local_muts(f)
        own = [k for k in local if k.gid in self.kernels]
        whole = _reached(own, set(local))
        seen: set[int] = set()
        stack: list[Def] = [m.body for m in local if m.body is not None and m not in whole]
        while stack:
            d = stack.pop()
            if d.gid in seen or isinstance(d, MutLam):
                continue
            seen.add(d.gid)
            if isinstance(d, Axiom) and d.annex == "gpu.sync_work_items":
                return "a barrier"
            if _maybe_shared_slot(d):
                return "a shared slot"
            stack.extend(d.ops)
        return None

    def local_muts(self, f: MutLam) -> list[MutLam]:
        """The mutables nested in f (f included), in a fixed order."""
        hit = self._local.get(f.gid)
        if hit is None:
            hit = self._local[f.gid] = sorted(self.scopes.local_muts(f), key=lambda m: m.gid)
        return hit

    def is_local(self, f: MutLam, d: Def) -> bool:
        """Whether d depends on the parameter of f or of a mutable nested in f."""
        local = self._local_gids.get(f.gid)
        if local is None:
            local = self._local_gids[f.gid] = frozenset(m.gid for m in self.local_muts(f))
        return any(m.gid in local for m in self.scopes.deps(d))

    def size(self, f: MutLam) -> int:
        """The nodes an inlined copy of f may copy: those reachable in its local bodies."""
        hit = self._sizes.get(f.gid)
        if hit is not None:
            return hit
        seen: set[int] = set()
        local = self.local_muts(f)
        stack: list[Def] = [m.body for m in local if m.body is not None] + [m.pi for m in local if m is not f]
        while stack:
            d = stack.pop()
            if d.gid in seen:
                continue
            seen.add(d.gid)
            if not isinstance(d, MutLam):
                stack.extend(d.ops)
        self._sizes[f.gid] = len(seen)
        return len(seen)

    def decide(self, x: Def, depth: int) -> MutLam | None:
        """The callee to inline at x in a rewriter `depth` inlinings deep (spends the budget)."""
        f = self.candidate(x)
        if f is None:
            return None
        assert isinstance(x, App)
        why = self.why_not(x, f)
        if why is None and depth >= MAX_DEPTH:
            why = f"nested more than {MAX_DEPTH} inlinings deep"
        if why is None and self.size(f) > self.stats.budget:
            why = "the phase's growth budget is spent"
        if why is not None:
            self.stats.left.setdefault(mut_key(f), why)
            return None
        self.stats.budget -= self.size(f)
        self.stats.inlined[mut_key(f)] += 1
        return f


class Inliner(Rewriter):
    """Rebuilds the old World with the planned applications inlined.

    The root rewriter (no owner) rebuilds everything; a child (owner f) rebuilds one inlined
    copy of f: `Var(f)` is the site's argument, nodes local to f are copied afresh, all others
    are the parent's."""

    def __init__(self, old: World, plan: Plan, parent: Inliner | None = None,
                 owner: MutLam | None = None, arg: Def | None = None, depth: int = 0) -> None:
        super().__init__(old, parent.new if parent is not None else None)
        self.plan = plan
        self.parent = parent
        self.owner = owner
        self.arg = arg
        self.depth = depth
        self.decided: dict[int, MutLam | None] = {}

    def _leaf(self, x: Def) -> Def | None:
        """What x becomes without looking at its operands (None: rebuild it from them)."""
        if self.owner is not None:
            if isinstance(x, Var) and x.mut is self.owner:
                return self.arg
            if not self.plan.is_local(self.owner, x):
                assert self.parent is not None
                return self.parent.rewrite(x)
        return super()._leaf(x)

    def _operands(self, x: Def) -> tuple[Def, ...]:
        if x.gid not in self.decided:
            self.decided[x.gid] = self.plan.decide(x, self.depth)
        if self.decided[x.gid] is not None:
            assert isinstance(x, App)
            return (x.arg,)  # the callee is not rebuilt: its body is copied at this site
        return super()._operands(x)

    def _node(self, x: Def) -> Def:
        f = self.decided.get(x.gid)
        if f is None:
            return super()._node(x)
        assert isinstance(x, App)
        return self.inline(f, self.memo[x.arg.gid], x)

    def inline(self, f: MutLam, arg: Def, site: App) -> Def:
        """f's body with its parameter bound to arg, as a copy of its own."""
        assert f.body is not None
        child = type(self)(self.old, self.plan, self, f, arg, self.depth + 1)
        body = child.rewrite(f.body)
        child.finish()
        return body

    def default(self, x: Def, ops: tuple[Def, ...]) -> Def:
        res = super().default(x, ops)
        # Substituting `n := 1` turns `Idx n` into `Idx 1`, whose one value is 0: a computed
        # index such as `core.bitcast (Idx n) i` becomes the literal, so that `«1; T»`'s element
        # `x#i` folds to `x` as MimIR's normal form has it (`World.extract` folds literal indices
        # only; an unfolded `T#i` of a non-tuple type would not type-check once printed). Where
        # the index would have been out of range (E-OOB), the copy is defined: a refinement
        # that differential validation reports, as the fault codes then differ.
        if self.owner is not None and isinstance(res, (App, Extract)) and res.bvd == 0 and not res.has_hole:
            try:
                t = self.new.type_of(res)
            except IRError:  # not typeable here (the backend or the spec will say so): no fold
                return res
            if _is_idx1(t):
                return self.new.lit_idx(1, 0)
        return res

    def copy_mut(self, m: MutLam) -> MutLam:
        if self.owner is None:
            return super().copy_mut(m)
        # A copy local to one inlined site: never an annex or an external (the original, if
        # anything still reaches it, keeps those).
        pi = self.rewrite(m.pi)
        assert isinstance(pi, Pi)
        nm = self.new.mut_lam(pi, m.name or "_", m.kind)
        self.memo[m.gid] = nm
        nm.doc, nm.param_names, nm.loc = m.doc, m.param_names, m.loc
        self.pending.append((m, nm))
        return nm


def _is_idx1(t: Def) -> bool:
    return isinstance(t, IdxT) and isinstance(t.size, Lit) and t.size.value == 1


class InlinePhase(Phase):
    """Rounds of `Inliner` over each World until no planned application is left."""

    mode = BETA
    inliner: type[Inliner] = Inliner
    planner: type[Plan] = Plan
    max_rounds = MAX_ROUNDS

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        worlds = prog.worlds()
        stats = _Stats(max(MIN_BUDGET, GROWTH * sum(sum(1 for _ in walk(w)) for w in worlds)))
        rounds = 0
        after: list[World] = []
        for w in worlds:
            new, n = self._rounds(w, stats)
            rounds = max(rounds, n)
            after.append(new)
        res.witness = Inlining(mode=self.mode, rounds=rounds, inlined=dict(stats.inlined),
                               left=dict(sorted(stats.left.items())), budget_left=stats.budget)
        if not stats.inlined:
            res.skipped = self._nothing(stats)
            return res
        res.after = Program(after[0], after[1] if len(after) > 1 else None)
        return res

    def _rounds(self, world: World, stats: _Stats) -> tuple[World, int]:
        cur = world
        for n in range(self.max_rounds):
            plan = self.planner(cur, self.mode, stats)
            if not any(plan.candidate(d) is not None for d in walk(cur)):
                return cur, n  # nothing of the kind: no rebuild
            before = sum(stats.inlined.values())
            new = self.inliner(cur, plan).run()
            if sum(stats.inlined.values()) == before:
                return cur, n  # nothing inlined this round: keep the World of the last round
            cur = new
        # Still something to do after the last round: say so for what is left.
        plan = self.planner(cur, self.mode, _Stats(stats.budget))
        for d in walk(cur):
            f = plan.candidate(d)
            if f is not None:
                stats.left.setdefault(mut_key(f), f"still applied after {self.max_rounds} rounds")
        return cur, self.max_rounds

    def _nothing(self, stats: _Stats) -> str:
        what = "no application of a mutable `lam` to reduce" if self.mode == BETA else \
            "no call of a known non-recursive higher-order function to specialise"
        if stats.left:
            what += "; left: " + ", ".join(f"`{k}` ({v})" for k, v in sorted(stats.left.items()))
        return what


class BetaRed(InlinePhase):
    name = "compile.beta_red"
    mode = BETA


class LamSpec(InlinePhase):
    name = "compile.lam_spec"
    mode = SPEC
