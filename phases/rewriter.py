"""The shared Rewriter: rebuilds what an old World's roots reach into a new World.

A phase subclasses `Rewriter` and overrides one hook, `rewrite_imm` (an immutable node, with
the old node at hand) or `rewrite_mut` (a mutable), returning None to fall back to the default,
which rebuilds the node from its rewritten operands with the new World's normalizing
constructors. Old and new Worlds stay distinct: nothing of the old one is mutated.
Mutables are created in the new World first (so recursion works) and their bodies rewritten
from a work list, in constant Python stack.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.diagnostics import Loc
from verimim.ir.defs import App, Axiom, BVar, Def, Extract, Hole, Insert, Lit, MutLam, Pack, Param, Pi, Tuple, Var
from verimim.ir.world import World


# The nodes `Rewriter.default` makes otherwise than by `rebuild`.
_NOT_REBUILT = (Axiom, Var, BVar, Param, Hole, Lit)


def _locate(new: Def, loc: Loc) -> None:
    """Give the computations a hook built for one old node (and that have no place of their
    own: the `core.trait.size T` of a rewritten `mem.alloc`) the old node's place, so that what
    a later phase or a backend says about them points at the program, not nowhere."""
    stack = [new]
    while stack:
        d = stack.pop()
        if d.loc is not None or not isinstance(d, _COMPUTATIONS):
            continue
        d.loc = loc
        stack.extend(d.ops)


_COMPUTATIONS = (App, Tuple, Extract, Insert, Pack)


class Rewriter:
    def __init__(self, old: World, new: World | None = None) -> None:
        self.old = old
        self.new = new if new is not None else World()
        self.new.normalizers.update(old.normalizers)
        self.new.origin = old
        if old.folds is not None and self.new.folds is None:
            # what the normalizers fold while a phase builds its output (a β-reduction exposes
            # `k - 3` with k now a literal) is proved with the phase, as the front end's folds are
            self.new.folds = {}
        if self.new.import_annex is None:
            self.new.import_annex = self.annex
        self.memo: dict[int, Def] = {}
        self.pending: list[tuple[MutLam, MutLam]] = []

    # ------------------------------------------------------------------ hooks

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        """Override: the replacement of an immutable node whose operands are already rewritten."""
        return None

    def rewrite_mut(self, old: MutLam) -> Def | None:
        """Override: the replacement of a mutable (None: copy it)."""
        return None

    # ------------------------------------------------------------------ driver

    def run(self, internal: Callable[[str], bool] | None = None) -> World:
        """Rewrite every external of the old World (and what it reaches) into the new one; the
        externals whose names `internal` selects stop being externals (kept only if reached)."""
        for name, m in sorted(self.old.externals.items()):
            if internal is not None and internal(name):
                continue
            nm = self.rewrite(m)
            if isinstance(nm, MutLam):
                self.new.externals[name] = nm
        self.finish()
        if internal is not None:
            for name, old_m in self.old.externals.items():
                nm = self.memo.get(old_m.gid)
                if isinstance(nm, MutLam) and internal(name):
                    nm.external = False
        return self.new

    def finish(self) -> None:
        while self.pending:
            old_m, new_m = self.pending.pop()
            if old_m.body is not None:
                new_m.body = self.rewrite(old_m.body)

    def annex(self, name: str) -> Def:
        """The new World's node for an annex of the old one (axioms, plugin functions)."""
        hit = self.old.find_annex(name)
        if hit is None:
            raise KeyError(f"the annex `{name}` is not loaded")
        return self.rewrite(hit[1])

    def rewrite(self, d: Def) -> Def:
        memo = self.memo
        hit = memo.get(d.gid)
        if hit is not None:
            return hit
        # Iterative post-order over immutables; mutables are cut (their bodies come later).
        # (The hooks bound once: this loop runs for every node of every phase and spec.)
        node_of, leaf_of, operands_of = self._node, self._leaf, self._operands
        work: list[tuple[Def, bool]] = [(d, False)]
        pop, push = work.pop, work.append
        while work:
            x, expanded = pop()
            if x.gid in memo:
                continue
            if expanded:
                memo[x.gid] = node_of(x)
                continue
            leaf = leaf_of(x)
            if leaf is not None:
                memo[x.gid] = leaf
                continue
            push((x, True))
            for op in operands_of(x):
                if op.gid not in memo:
                    push((op, False))
        return memo[d.gid]

    # Traversal hooks for rewriters that change the shape of the walk (verimim.phases.inline).

    def _leaf(self, x: Def) -> Def | None:
        """What x becomes without rewriting its operands (None: rebuild it from them)."""
        return self._mut(x) if isinstance(x, MutLam) else None

    def _operands(self, x: Def) -> tuple[Def, ...]:
        return x.ops

    def _node(self, x: Def) -> Def:
        return self._imm(x)

    def _imm(self, x: Def) -> Def:
        memo = self.memo
        ops = tuple([memo[op.gid] for op in x.ops])
        res = self.rewrite_imm(x, ops)
        if res is None:
            w, site = self.new, self.new.site
            w.site = x.loc or site  # a fold the rebuild makes is placed where x was written
            res = self.default(x, ops)
            w.site = site
        elif x.loc is not None:
            _locate(res, x.loc)
        if res.loc is None:
            res.loc = x.loc
        if res.let_name is None and isinstance(res, (App, Extract)):
            res.let_name = x.let_name
        return res

    def default(self, x: Def, ops: tuple[Def, ...]) -> Def:
        w = self.new
        if not isinstance(x, _NOT_REBUILT):  # the common case first: one test, not six
            res = x.rebuild(w, ops)
            if isinstance(x, Pi) and isinstance(res, Pi):
                res.set_names(x.names)
            return res
        if isinstance(x, Axiom):
            ax = w.axiom(x.annex, ops[0])
            ax.loc = ax.loc or x.loc
            w.annexes.setdefault(x.annex, ax)
            return ax
        if isinstance(x, Var):
            nm = ops[0]
            assert isinstance(nm, MutLam)
            return w.var(nm)
        if isinstance(x, (BVar,)):
            return w.bvar(x.index)
        if isinstance(x, (Param, Hole)):
            raise ValueError(f"a {type(x).__name__} in a finished World")
        assert isinstance(x, Lit)
        return w.lit(ops[0], x.value)

    def _mut(self, m: MutLam) -> Def:
        res = self.rewrite_mut(m)
        if res is not None:
            return res
        return self.copy_mut(m)

    def copy_mut(self, m: MutLam) -> MutLam:
        """A new mutable with m's name and metadata; its body is rewritten later."""
        pi = self.rewrite(m.pi)
        assert isinstance(pi, Pi)
        nm = self.new.mut_lam(pi, m.name or "_", m.kind)
        self.memo[m.gid] = nm  # before the body: recursion reaches it
        for attr in ("external", "annex", "doc", "param_names", "loc"):
            setattr(nm, attr, getattr(m, attr))
        if m.annex:
            self.new.annexes.setdefault(m.annex, nm)
        self.pending.append((m, nm))
        return nm
