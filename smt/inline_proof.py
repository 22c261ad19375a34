"""A proof, for all inputs, that an inlining phase's output is its input with the applications it
claims β-reduced: `f a` replaced by f's body with f's parameter substituted by `a`.

The reference is built here from the input and the phase's claim alone (its witness, verimim.phases.witness.Inlining: which mutables
it inlined, which applications it left and why), by the textbook definition of substitution:
the nodes of f's body that depend on f's parameter — by free variables, computed here, through
the bodies of the mutables they refer to — are copied afresh for each application; every other
node means the same at the site and is shared. Rebuilding goes through the World's normalizing
constructors, whose rules are checked once for all: the core normalizers proved over bit-vectors
(smt.normalizer_proofs), the structural folds of tuples, packs, extracts and inserts against a
reference semantics of terms (tests/ir/test_structural_folds.py); MimIR's normal form
also makes a computed value of `Idx 1` the literal 0 (its only value). Like the phase, rounds
repeat while applications of inlined mutables remain (a curried `lam` takes one per argument).

The output must then match the reference node for node (smt.match.Matcher: a one-to-one
correspondence, the same kinds and operands). Equal graphs mean the same program for every
input (SEMANTICS.md gives a graph its meaning), so a match is a proof; where the reference does
not apply (the phase left some applications of a mutable it inlined elsewhere, for a reason the
reference does not model), `prove_inlining` says why and the caller falls back to validation.
"""
from __future__ import annotations

from verimim.ir.defs import App, Def, Extract, IdxT, Lit, MutLam, Pi, Var
from verimim.ir.world import IRError, World
from verimim.phases.base import PhaseResult, walk
from verimim.phases.rewriter import Rewriter
from verimim.phases.witness import Inlining, mut_key
from verimim.smt.match import Matcher

MAX_ROUNDS = 8

# Reasons for leaving an application that the reference models itself (it leaves the same ones).
MODELLED_REASONS = ("applied under an immutable binder",)


_NOTHING: tuple[frozenset[int], frozenset[int]] = (frozenset(), frozenset())


class FreeVars:
    """The mutables a node depends on: those whose parameter occurs free in it, through the
    bodies of the mutables it refers to, and what those parameters' owners depend on in turn
    (a value of `Var(m)` exists once per activation of m, which depends on m's own free
    variables). A mutable's own parameter is bound in it."""

    def __init__(self, world: World) -> None:
        self._own: dict[int, tuple[frozenset[int], frozenset[int]]] = {}  # immutable: (vars, muts)
        muts = [d for d in walk(world) if isinstance(d, MutLam)]
        self.mut: dict[int, frozenset[int]] = {m.gid: frozenset() for m in muts}
        local: dict[int, tuple[frozenset[int], frozenset[int]]] = {}
        for m in muts:
            v1, r1 = self._scan(m.pi)
            v2, r2 = self._scan(m.body) if m.body is not None else (frozenset(), frozenset())
            local[m.gid] = (v1 | v2, r1 | r2)
        changed = True
        while changed:  # least fixed point over the reference graph (cycles: recursion)
            changed = False
            for m in muts:
                vs, refs = local[m.gid]
                fv = set(vs)
                for r in refs | vs:
                    fv |= self.mut.get(r, frozenset())
                fv.discard(m.gid)
                if len(fv) != len(self.mut[m.gid]):
                    self.mut[m.gid] = frozenset(fv)
                    changed = True

    def _scan(self, d: Def) -> tuple[frozenset[int], frozenset[int]]:
        """(Vars' owners, referenced mutables) below d, not entering mutables."""
        work: list[tuple[Def, bool]] = [(d, False)]
        while work:
            x, done = work.pop()
            if x.gid in self._own:
                continue
            if isinstance(x, MutLam):
                self._own[x.gid] = (frozenset(), frozenset({x.gid}))
                continue
            if isinstance(x, Var):
                self._own[x.gid] = (frozenset({x.mut.gid}), frozenset())
                continue
            if not done:
                work.append((x, True))
                work.extend((op, False) for op in x.ops if op.gid not in self._own)
                continue
            vs: set[int] = set()
            rs: set[int] = set()
            for op in x.ops:
                a, b = self._own[op.gid]
                vs |= a
                rs |= b
            # most nodes use nothing: one shared pair for them (a pair of sets per node was a
            # tenth of what the collector frees after a fuzz program)
            self._own[x.gid] = (frozenset(vs), frozenset(rs)) if vs or rs else _NOTHING
        return self._own[d.gid]

    def of(self, d: Def) -> frozenset[int]:
        if isinstance(d, MutLam):
            return self.mut.get(d.gid, frozenset())
        vs, refs = self._scan(d)
        out = set(vs)
        for r in refs | vs:
            out |= self.mut.get(r, frozenset())
        return frozenset(out)


class _Substitution(Rewriter):
    """Rebuilds an old World with every application of a claimed mutable β-reduced. A child
    (owner f) rebuilds one copy of f's body: `Var(f)` is the argument, nodes whose free
    variables include f are its own, all others its parent's."""

    def __init__(self, old: World, fv: FreeVars, keys: frozenset[str], parent: _Substitution | None = None,
                 owner: MutLam | None = None, arg: Def | None = None) -> None:
        super().__init__(old, parent.new if parent is not None else None)
        self.fv = fv
        self.keys = keys
        self.parent = parent
        self.owner = owner
        self.arg = arg
        self.count = 0

    def _root(self) -> _Substitution:
        return self if self.parent is None else self.parent._root()

    def _inlined_callee(self, x: Def) -> MutLam | None:
        return claimed_callee(x, self.keys)

    def _leaf(self, x: Def) -> Def | None:
        if self.owner is not None:
            if isinstance(x, Var) and x.mut is self.owner:
                return self.arg
            if self.owner.gid not in self.fv.of(x):
                assert self.parent is not None
                return self.parent.rewrite(x)
        return super()._leaf(x)

    def _operands(self, x: Def) -> tuple[Def, ...]:
        if self._inlined_callee(x) is not None:
            assert isinstance(x, App)
            return (x.arg,)
        return super()._operands(x)

    def _node(self, x: Def) -> Def:
        f = self._inlined_callee(x)
        if f is None:
            return super()._node(x)
        assert isinstance(x, App) and f.body is not None
        self._root().count += 1
        child = _Substitution(self.old, self.fv, self.keys, self, f, self.memo[x.arg.gid])
        body = child.rewrite(f.body)
        child.finish()
        return body

    def default(self, x: Def, ops: tuple[Def, ...]) -> Def:
        res = super().default(x, ops)
        # MimIR's normal form: a computed value of `Idx 1` is its only value, 0.
        if self.owner is not None and isinstance(res, (App, Extract)) and res.bvd == 0 and not res.has_hole:
            try:
                t = self.new.type_of(res)
            except IRError:
                return res
            if isinstance(t, IdxT) and isinstance(t.size, Lit) and t.size.value == 1:
                return self.new.lit_idx(1, 0)
        return res

    def copy_mut(self, m: MutLam) -> MutLam:
        if self.owner is None:
            return super().copy_mut(m)
        pi = self.rewrite(m.pi)
        assert isinstance(pi, Pi)
        nm = self.new.mut_lam(pi, m.name or "_", m.kind)
        self.memo[m.gid] = nm
        nm.doc, nm.param_names, nm.loc = m.doc, m.param_names, m.loc
        self.pending.append((m, nm))
        return nm


def reference(world: World, keys: frozenset[str]) -> World:
    """The World with every application of a mutable named in keys β-reduced, round by round."""
    cur = world
    for _ in range(MAX_ROUNDS):
        if not _claimed_applications(cur, keys):
            return cur  # a round would reduce nothing (and rebuild the World only to find so)
        fv = FreeVars(cur)
        sub = _Substitution(cur, fv, keys)
        new = sub.run()
        if sub.count == 0:
            return cur
        cur = new
    return cur


def claimed_callee(x: Def, keys: frozenset[str]) -> MutLam | None:
    """The mutable x applies when the reference β-reduces x: a closed application of a
    mutable with a body, named in the claim."""
    if isinstance(x, App) and isinstance(x.callee, MutLam) and x.callee.body is not None \
            and x.bvd == 0 and mut_key(x.callee) in keys:
        return x.callee
    return None


def _claimed_applications(world: World, keys: frozenset[str]) -> bool:
    """Whether the World reaches an application that a round of `_Substitution` reduces."""
    return any(claimed_callee(d, keys) is not None for d in walk(world))


def prove_inlining(res: PhaseResult) -> tuple[bool, str]:
    """(proved, what was shown or why the reference does not apply / where it differs)."""
    inlined, left = res.claim(Inlining).inlined, res.claim(Inlining).left
    unmodelled = sorted(k for k in inlined if k in left and left[k] not in MODELLED_REASONS)
    if unmodelled:
        return False, (f"the phase left some applications of {', '.join(f'`{k}`' for k in unmodelled)} "
                       f"({'; '.join(left[k] for k in unmodelled)}): the reference β-reduces all of them")
    keys = frozenset(inlined)
    for old, new in zip(res.before.worlds(), res.after.worlds()):
        ref = reference(old, keys)
        mm = Matcher().match_worlds(ref, new)
        if mm is not None:
            return False, f"the output differs from the β-reduced input: {mm.describe()}"
    return True, (f"the output is, node for node, the input with every application of "
                  f"{', '.join(f'`{k}`' for k in sorted(keys))} β-reduced")
