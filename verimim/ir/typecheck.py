"""Well-typedness of a finished World: every application's argument fits its callee's domain.

`World.app` builds an application without checking its argument (the front end checks what a
program writes; a phase builds what it likes), where upstream MimIR's `World::app` asserts
`Checker::assignable(dom, arg)` on every application it builds (src/mim/world.cpp, check.cpp).
A phase whose output launches a kernel that declares `Idx 2` work-items for 4, loads an `I32`
from a pointer to `I8`, or gives a function two arguments where it takes three, builds a World
that no program could have been elaborated to, and that the back ends compile to something else
than what the specifications read (they read values, not types). `check_world` checks a World
as upstream would have built it and reports each such application.

The relation is upstream's `assignable`: a dependent sigma domain is instantiated with the
argument's own fields (`sigma->reduce(val)`), field by field; anything else is compared by the
front end's unifier (verimim.frontend.unify) on closed terms, which is upstream's `alpha<Check>`
here: identity after normalization, `⊤` equal to anything (`Idx ⊤`, `«⊤:Nat; I8»`), a sigma of
equal fields equal to its array, a tuple equal to its pack, recursive types unfolded, type-level
functions applied, the operands of `core.nat.add`/`mul` in either order.

Each mutable's body must be of its codomain (upstream's `Lam::check`). Applications under an
immutable binder (a λ's body, a dependent type) are checked on the binder's instance with a
parameter of the binder's type, as the elaborator checked them. An axiom's type is not entered:
it is the plugin's declaration, elaborated where the plugin was loaded. Results are kept per
World (World.kept): nodes never change, so an application found well typed is not checked
again when a later check of the same World reaches it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from verimim.diagnostics import Loc
from verimim.ir.defs import App, Arr, Axiom, Def, Lam, Lit, MutLam, Pack, Pi, Sigma, Tuple
from verimim.ir.world import IRError, World

_KEPT = "typecheck.checked"


@dataclass(frozen=True)
class IllTyped:
    """One ill-typed application: where, what it applies, the domain and the argument's type."""

    node: Def  # the application (or the mutable whose body is not of its codomain)
    message: str
    loc: Loc | None

    @property
    def shown(self) -> str:
        """The node, printed (shortened)."""
        return _show(self.node)

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}" if self.loc is not None else self.message


@dataclass
class _Kept:
    """What a World's checks found so far: the nodes done (gids) and the ill-typed ones."""

    done: set[int] = field(default_factory=set)
    bad: dict[int, IllTyped] = field(default_factory=dict)
    bodies: dict[int, Def] = field(default_factory=dict)  # a mutable's gid → the body checked
    apps: int = 0  # applications checked (statistics)


def check_world(world: World, stop_at: int | None = None) -> list[IllTyped]:
    """The ill-typed applications reachable from `world`'s externals (mutables' types and bodies
    included), then those the normalizers folded while the World was built (World.folds: the
    application as written, which the output no longer holds), in the order found; at most
    `stop_at` of them when given."""
    folded = [app for app, _ in (world.folds or {}).values()]
    return TypeCheck(world).run([*world.externals.values(), *folded], stop_at)


class TypeCheck:
    def __init__(self, world: World) -> None:
        from verimim.frontend.unify import Unifier

        self.world = world
        self.kept: _Kept = world.keep(_KEPT, _Kept)
        self.unifier = Unifier(world)

    @property
    def apps_checked(self) -> int:
        return self.kept.apps

    def run(self, roots: list[Def], stop_at: int | None = None) -> list[IllTyped]:
        """The ill-typed nodes reachable from `roots`. An axiom's type is not entered: it is
        the plugin's declaration (elaborated where the plugin was loaded), not an application a
        program or a phase built."""
        w = self.world
        # Opening a binder rebuilds its body: those normalizations are no folds of the program
        # (World.folds, proved by `check`) and have no source site of their own.
        folds, site = w.folds, w.site
        w.folds, w.site = None, None
        found: list[IllTyped] = []
        seen: set[int] = set()
        try:
            stack = list(reversed(roots))
            while stack:
                d = stack.pop()
                if d.gid in seen:
                    continue
                seen.add(d.gid)
                bad = self._node(d, stack)
                if bad is not None:
                    found.append(bad)
                    if stop_at is not None and len(found) >= stop_at:
                        break
                if isinstance(d, MutLam):
                    if d.body is not None:
                        stack.append(d.body)
                    stack.append(d.pi)
                elif not isinstance(d, Axiom):
                    stack.extend(reversed(d.ops))
        finally:
            w.folds, w.site = folds, site
        return found

    def _node(self, d: Def, stack: list[Def]) -> IllTyped | None:
        kept = self.kept
        if isinstance(d, MutLam):
            # (a mutable's body may be set after a walk reached it: checked again when it changed)
            if d.body is None or kept.bodies.get(d.gid) is d.body:
                return kept.bad.get(d.gid)
            kept.bodies[d.gid] = d.body
            kept.bad.pop(d.gid, None)
            bad = self._body(d)
            if bad is not None:
                kept.bad[d.gid] = bad
            return bad
        if d.gid in kept.done:
            return kept.bad.get(d.gid)
        kept.done.add(d.gid)
        if d.bvd or d.has_hole:
            return None  # (an open node is checked in its binder's instance; holes: not finished)
        if isinstance(d, (Lam, Pi, Sigma, Arr, Pack)):
            stack.extend(self._instances(d))
        if not isinstance(d, App):
            return None
        kept.apps += 1
        bad = self._app(d)
        if bad is not None:
            kept.bad[d.gid] = bad
        return bad

    def _instances(self, d: Def) -> list[Def]:
        """The nodes under a closed binder that mention its variable, with it opened by a
        parameter of its type: an application there is typed in that instance (as the
        elaborator typed it, under a parameter)."""
        w = self.world
        bodies = list(d.ops) if isinstance(d, Sigma) else [d.ops[1]]
        bodies = [b for b in bodies if b.bvd and _has_app(b)]
        if not bodies:
            return []
        try:
            if isinstance(d, Sigma):
                binder_t: Def = d  # (a field is under the binder of the sigma's own value)
            elif isinstance(d, Lam):
                binder_t = d.pi.dom
            elif isinstance(d, Pi):
                binder_t = d.dom
            else:
                binder_t = w.index_type(d.ops[0])
            p = w.param(binder_t, "_")
            return [w.open(b, p) for b in bodies]
        except IRError:
            return []  # (an instance that cannot be built has no application to check)

    def _body(self, m: MutLam) -> IllTyped | None:
        """A mutable's body is of its codomain (upstream's `Lam::check`): a continuation's body
        is a jump (`⊥`), a function's body a value of its result type."""
        w = self.world
        body = m.body
        assert body is not None
        if body.bvd or body.has_hole:
            return None
        try:
            bt = w.zonk(w.type_of(body))
        except IRError as e:
            return IllTyped(m, f"the body of `{m.name}` has no type ({e.message})", m.loc)
        codom = w.open(m.pi.codom, w.var(m))
        sub = self.assignable(codom, body, bt)
        if sub is None:
            return None
        return IllTyped(m, f"the body of `{m.name}` is of type `{_show(bt)}`, not of its codomain `{_show(codom)}`",
                        body.loc or m.loc)

    def _app(self, app: App) -> IllTyped | None:
        w = self.world
        try:
            ct = w.unfold(w.zonk(w.type_of(app.callee)))
        except IRError as e:
            return self._bad(app, f"`{_show(app)}`: the callee's type is not known ({e.message})")
        if not isinstance(ct, Pi):
            return self._bad(app, f"`{_show(app)}` applies `{_show(app.callee)}`, of type `{_show(ct)}`, "
                                  f"which is no function")
        try:
            if self.fits(ct.dom, app.arg):
                return None
            at = w.zonk(w.type_of(app.arg))
            mismatch = self.assignable(ct.dom, app.arg, at)
        except IRError as e:  # (the argument, or a field of it, has no type)
            return self._bad(app, f"`{_show(app)}`: the argument does not fit `{_show(ct.dom)}` ({e.message})")
        if mismatch is None:
            return None
        exp_s, found_s = _show(ct.dom), _show(at)
        msg = (f"`{_show(app)}` applies `{_show(app.callee)}`, whose domain is `{exp_s}`, to an argument "
               f"of type `{found_s}`")
        sub_e, sub_f = _show(mismatch[0]), _show(mismatch[1])
        if (sub_e, sub_f) != (exp_s, found_s):
            from verimim.frontend.elab import differing_component

            where = differing_component(ct.dom, at, mismatch[0], mismatch[1])
            msg += f"; they differ {'in ' + where if where else 'at'}: `{sub_f}` where `{sub_e}` is expected"
        return self._bad(app, msg)

    def fits(self, dom: Def, arg: Def) -> bool:
        """Whether `arg` fits `dom`: `assignable`, where a tuple written in place is taken
        element by element (its sigma type is never built: most arguments are such tuples)."""
        w = self.world
        if isinstance(arg, Tuple):
            d = w.unfold(dom)
            n = len(arg.ops)
            if isinstance(d, Sigma) and len(d.ops) == n:
                return all(self.fits(f if not f.bvd else w.open(f, arg), x) for f, x in zip(d.ops, arg.ops))
            if isinstance(d, Arr) and isinstance(d.shape, Lit) and d.shape.value == n:
                body = d.body
                return all(self.fits(body if not body.bvd else w.open(body, w.lit_idx(n, j)), x)
                           for j, x in enumerate(arg.ops))
        t = w.zonk(w.type_of(arg))
        return dom is t or self.assignable(dom, arg, t) is None

    def assignable(self, dom: Def, arg: Def, arg_t: Def) -> tuple[Def, Def] | None:
        """None when `arg` (of type `arg_t`) fits `dom`, else the innermost differing pair
        (expected, found). Upstream's `Checker::assignable`: a dependent sigma is reduced with
        the argument, field by field."""
        w = self.world
        if dom is arg_t:
            return None
        sub = self.unifier.unify(dom, arg_t)
        if sub is None or not isinstance(dom, Sigma):
            return sub
        # A sigma whose fields depend on others (here or in a nested sigma) is reduced with the
        # argument's own fields: `[T: *, x: T]` takes `(I32, 5I32)`.
        n = len(dom.ops)
        if w.arity(w.unfold(arg_t)) is not w.lit_nat(n):
            return sub
        for j, f in enumerate(dom.ops):
            elem = w.extract_n(arg, n, j)
            field_sub = self.assignable(w.open(f, arg), elem, w.zonk(w.type_of(elem)))
            if field_sub is not None:
                return field_sub
        return None

    def _bad(self, app: App, message: str) -> IllTyped:
        # (an application a phase built without a place: where its callee or argument is)
        return IllTyped(app, message, app.loc or app.callee.loc or app.arg.loc)


SHOWN_MAX = 400  # characters of one term in a message (a launch's kernel type is long)


def _show(d: Def) -> str:
    from verimim.printer import show

    try:
        s = show(d)
    except Exception:  # (a message never fails for its printing)
        return f"<{type(d).__name__}>"
    return s if len(s) <= SHOWN_MAX else s[:SHOWN_MAX - 1] + "…"


def _has_app(d: Def) -> bool:
    seen: set[int] = set()
    stack = [d]
    while stack:
        x = stack.pop()
        if x.gid in seen or isinstance(x, (MutLam, Axiom)):
            continue
        seen.add(x.gid)
        if isinstance(x, App):
            return True
        stack.extend(x.ops)
    return False
