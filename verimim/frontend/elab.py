"""The elaborator: surface syntax → typed IR, type-checking as it goes (bidirectionally).

Binders are elaborated with fresh `Param`s standing for the bound value and closed with
`World.abstract` afterwards (locally nameless). Continuations and recursive or
mutable-capturing lambdas become `MutLam`s whose bodies are elaborated after their block, so
that declarations may refer to each other in any order. Implicit arguments become `Hole`s
solved by first-order unification; a hole left open at the end of a statement is an error.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

from verimim.diagnostics import Loc, NameError_, ParseError, Related, TypeError_, VerimimError
from verimim.frontend.scope import Lazy, Scope
from verimim.frontend.typelevel import unfold_fully
from verimim.frontend.unify import MAX_UNFOLD_NESTING, Mismatch, Unifier, is_type_of_one_value
from verimim.ir.defs import (
    App, Arr, Axiom, Bot, Def, Extract, Hole, IdxT, Join, Lit, MutLam, NatT, Param, Pi, Sigma, Top, TypeU, Univ,
    Var, gid_mark,
)
from verimim.ir.schedule import Scopes
from verimim.ir.world import EXPAND_LIMIT, IRError, RuleDef, World
from verimim.printer import show
from verimim.syntax import ast

# A leaf of a pattern: its name, the Param standing for it while elaborating, and its path of
# (arity, index) extracts from the pattern's whole value.
Path = tuple[tuple[int, int], ...]
Leaf = tuple[str, Param, Path]

# Names of the axioms that stand for C functions, recursive definitions and rewrite rules.
C_PREFIX = "c."
REC_PREFIX = "rec."
RULE_PREFIX = "rule."
RULE_TYPE = "Rule"

BUILTIN_SIZES = {"Bool": 2, "I1": 2, "I8": 2**8, "I16": 2**16, "I32": 2**32, "I64": 2**64}


# Unfoldings one call of a recursive `lam` may take at construction (Elaborator.partially_evaluated)
PE_BUDGET = 256


class AnnexTable:
    """Annex names visible to a file: solved ones live in the World, pending ones are lazies of
    plugin files still being elaborated."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.pending: dict[str, Lazy] = {}

    def get(self, name: str, use: Loc | None) -> Def | None:
        hit = self.world.annexes.get(name)
        if hit is not None:
            return hit
        lazy = self.pending.get(name)
        if lazy is None:
            return None
        return lazy.force(use)

    def known(self) -> list[str]:
        return list(self.world.annexes) + list(self.pending)


def needs_mutable(node: object) -> bool:
    """Whether an expression creates continuations (`ret`, `con`, `fun`, `cn`, `fn`): a lambda
    whose body does must itself be mutable, since immutable bodies are closed terms."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.Ret):
            return True
        if isinstance(x, ast.Lambda) and x.kind != "lam":
            return True
        if isinstance(x, ast.DeclLam) and (x.kind != "lam" or x.extern or mentions_name(x.body, x.name)):
            return True  # a nested mutable (continuation, recursive `lam`) captures our parameters
        if isinstance(x, (ast.DeclRec, ast.DeclRecVal)):
            return True
        stack.extend(ast.children(x))
    return False


def _holes_in(d: Def, wanted: set[int]) -> set[int]:
    out: set[int] = set()
    stack, seen = [d], set()
    while stack:
        x = stack.pop()
        if x.gid in seen or isinstance(x, MutLam):
            continue
        seen.add(x.gid)
        if isinstance(x, Hole):
            if x.gid in wanted:
                out.add(x.gid)
            if x.value is not None:
                stack.append(x.value)
            continue
        stack.extend(x.ops)
    return out


def _abstract_var(w: World, d: Def, m: MutLam, scopes: Scopes) -> Def:
    """d with m's parameter replaced by the de Bruijn variable of the binder just outside d."""
    v = w.var(m)
    memo: dict[tuple[int, int], Def] = {}

    def go(x: Def, depth: int) -> Def:
        if x is v:
            return w.bvar(depth)
        if isinstance(x, MutLam) or m not in scopes.deps(x):
            return x
        key = (x.gid, depth)
        hit = memo.get(key)
        if hit is None:
            ops = tuple(go(op, depth + 1 if i in x.binder_ops else depth) for i, op in enumerate(x.ops))
            hit = memo[key] = x.rebuild(w, ops)
        return hit

    return go(d, 0)


def mentions_name(node: object, name: str) -> bool:
    return any(isinstance(x, ast.Name) and x.parts == (name,) for x in ast.nodes(node))


def _mutually_recursive(decls: Sequence[ast.Decl]) -> set[int]:
    """The `lam` declarations of one block that reach each other through their bodies (LANGUAGE.md:
    declarations of one block may refer to each other, recursively): each must be a mutable
    whose type is known before its body, as a `… and …` group's members are (a closed `Lam`
    elaborates its body at once, and the cycle came back to it half made)."""
    import networkx as nx

    lams = {d.name: d for d in decls if isinstance(d, ast.DeclLam) and d.kind == "lam" and d.body is not None}
    if len(lams) < 2:
        return set()
    graph = nx.DiGraph()
    for name, d in lams.items():
        graph.add_node(name)
        used = {x.parts[0] for x in ast.nodes(d.body) if isinstance(x, ast.Name) and len(x.parts) == 1}
        graph.add_edges_from((name, other) for other in used & lams.keys() if other != name)
    return {id(lams[n]) for scc in nx.strongly_connected_components(graph) if len(scc) > 1 for n in scc}


def differing_component(expected: Def, found: Def, sub_e: Def, sub_f: Def) -> str:
    """Where in the two types the unifier's differing pair sits, as a reader names it:
    `parameter 5 (group_id)`, `element 2 of parameter 8 (args)`, `the result` — "" when the
    pair is not found by walking both types in step."""
    path = _component_path(expected, found, sub_e, sub_f, 0)
    return " of ".join(path) if path else ""  # innermost first


def _component_path(e: Def, f: Def, sub_e: Def, sub_f: Def, depth: int,
                    unit: str = "element") -> list[str] | None:
    """The path to the pair, innermost first; a sigma's fields are `unit`s (a function's
    domain's fields are its parameters)."""
    if e is sub_e and f is sub_f:
        return []
    if depth > 32 or type(e) is not type(f) or len(e.ops) != len(f.ops):
        return None
    if isinstance(e, Pi) and isinstance(f, Pi):
        dom = _component_path(e.dom, f.dom, sub_e, sub_f, depth + 1, "parameter")
        if dom is not None:
            return dom if isinstance(e.dom, Sigma) and dom else dom + ["the parameter"]
        cod = _component_path(e.codom, f.codom, sub_e, sub_f, depth + 1)
        return None if cod is None else cod + ["the result"]
    if isinstance(e, Sigma) and isinstance(f, Sigma):
        names = f.names or e.names or ()
        for j, (x, y) in enumerate(zip(e.ops, f.ops)):
            r = _component_path(x, y, sub_e, sub_f, depth + 1)
            if r is not None:
                name = names[j] if j < len(names) and names[j] and names[j] != "_" else None
                return r + [f"{unit} {j + 1}" + (f" (`{name}`)" if name else "")]
        return None
    for x, y in zip(e.ops, f.ops):
        r = _component_path(x, y, sub_e, sub_f, depth + 1)
        if r is not None:
            return r
    return None


class Elaborator:
    def __init__(self, world: World, annexes: AnnexTable, file: str, plugin: str | None) -> None:
        self.world = world
        self.annexes = annexes
        self.file = file
        self.plugin = plugin
        self.unifier = Unifier(world)
        self.prefixes: list[str] = [plugin] if plugin else []
        self.deferred: list[Callable[[], None]] = []
        self.holes: list[tuple[Hole, Loc]] = []
        self.in_mod = 0  # inside `mod { … }`: every declaration is an annex
        # Return types left out (`fun f (x: T) = …`, `lam extern g (…) = …`): solved by the
        # body, checked when the module is done. (hole, where, what it is the return type of)
        self.return_holes: list[tuple[Hole, Loc, str]] = []
        self.block_scopes: dict[int, Scope | None] = {}  # a parameter type's block (by id) → its scope
        self.syntax_errors: list[VerimimError] = []  # found while declaring; raised by elab_module
        self.group_members: set[int] = set()  # ids of the declarations in `… and …` groups
        self.declared_sigmas: set[int] = set()  # gids of the sigmas `rec N = [...]` defines (infer_Extract)
        # `lam` mutables declared with an explicit filter, by gid: the filter (`@ff`,
        # `@(%core.pe.is_closed b)`) and the parameter names it may mention
        self.filters: dict[int, tuple[ast.Expr, tuple[str, ...]]] = {}
        self.final_errors: set[int] = set()  # ids of errors a deferred re-check confirmed
        # Bodies of mutables not elaborated yet, by the mutable's gid: the unifier forces one
        # when a type needs the value of an application of it (verimim.frontend.typelevel).
        self.pending_bodies: dict[int, Callable[[], None]] = {}
        self.unifier.force_body = self.force_body
        self.decl_lazies: dict[int, list[Lazy]] = {}

    # ================================================================== errors and helpers

    def mismatch(self, loc: Loc, expected: Def, found: Def, sub: Mismatch, what: str = "") -> TypeError_:
        w = self.world
        exp_s, found_s = show(w.zonk(expected)), show(w.zonk(found))
        msg = f"type mismatch{what}: expected `{exp_s}`, found `{found_s}`"
        related: tuple[Related, ...] = ()
        sub_e, sub_f = show(w.zonk(sub[0])), show(w.zonk(sub[1]))
        if (sub_e, sub_f) != (exp_s, found_s):
            where = differing_component(w.zonk(expected), w.zonk(found), w.zonk(sub[0]), w.zonk(sub[1]))
            ze, zf = w.zonk(sub[0]), w.zonk(sub[1])
            if isinstance(ze, Sigma) and isinstance(zf, Sigma) and len(ze.ops) != len(zf.ops):
                msg += (f"; {where or 'a tuple type'} has {len(zf.ops)} elements where "
                        f"{len(ze.ops)} are expected")
            else:
                msg += f"; they differ {'in ' + where if where else 'at'}: `{sub_f}` where `{sub_e}` is expected"
        return TypeError_(msg, loc, related)

    def expect(self, loc: Loc, expected: Def, found: Def, what: str = "") -> None:
        self.unifier.cut = None
        sub = self.unifier.unify(expected, found)
        if sub is None:
            return
        err = self.mismatch(loc, expected, found, sub, what)
        cut = self.unifier.cut
        if cut is None:
            raise err
        head = cut.callee if isinstance(cut, App) else cut  # (the argument has grown past reading)
        raise TypeError_(f"{err.message}; the type-level recursion of `{show(head)}` did not end within "
                         f"{MAX_UNFOLD_NESTING} nested unfoldings", loc, err.related)

    def type_of(self, d: Def, loc: Loc) -> Def:
        try:
            return self.world.zonk(self.world.type_of(d))
        except IRError as e:
            raise TypeError_(f"ill-typed expression: {e.message}", loc) from None

    def is_type(self, t: Def) -> bool:
        return isinstance(self.world.zonk(t), (TypeU, Univ))

    def bot(self) -> Def:
        return self.world.bot(self.world.star())

    def is_bot(self, t: Def) -> bool:
        t = self.world.zonk(t)
        return isinstance(t, Bot) and t.ops[0] is self.world.star()

    def extract_path(self, base: Def, path: Path) -> Def:
        for n, i in path:
            base = self.world.extract_n(base, n, i)
        return base

    def abstract_leaves(self, d: Def, leaves: Sequence[Leaf], base: Def | None = None) -> Def:
        """Close `d` over the pattern leaves: each becomes its path from `base` (default the
        innermost binder's value, BVar(0))."""
        w = self.world
        root = w.bvar(0) if base is None else base
        for _, p, path in leaves:
            d = w.abstract(d, p, self.extract_path(root, path))
        return d

    def new_hole(self, type_: Def | None, hint: str, loc: Loc) -> Hole:
        h = self.world.hole(type_, hint)
        h.loc = loc
        self.holes.append((h, loc))
        return h

    def statement(self, fn: Callable[[], Def]) -> Def:
        """Run one statement's elaboration and demand that the implicit arguments it introduced
        are solved by its end (types with exactly one value solve themselves)."""
        start = len(self.holes)
        res = fn()
        mine = self.holes[start:]
        del self.holes[start:]
        for h, loc in mine:
            if h.value is not None:
                continue
            t = self.world.zonk(h._type) if h._type is not None else None
            only = is_type_of_one_value(self.world, t) if t is not None else None
            if only is not None:
                h.value = only
                continue
            name, _, owner = h.hint.partition(" of ")
            typed = f" (of type `{show(t)}`)" if t is not None else ""
            raise TypeError_(f"cannot infer the implicit argument `{name}`{typed} of {owner}; "
                             f"supply it with `@`", loc)
        return self.world.zonk(res)

    # ================================================================== names

    def resolve(self, name: ast.Name, scope: Scope) -> Def:
        parts = name.parts
        if len(parts) == 1 and not name.percent:
            entry = scope.lookup(parts[0])
            if entry is not None:
                hit = entry.force(name.loc) if isinstance(entry, Lazy) else entry
                self.settle_before_use(hit)
                return hit
        text = ".".join(parts)
        for i in range(len(self.prefixes), -1, -1):
            full = ".".join(self.prefixes[:i] + [text]) if i else text
            hit = self.annexes.get(full, name.loc)
            if hit is not None:
                return hit
        if len(parts) == 1 and not name.percent and text in set(scope.all_names()):
            # bound only by the `let` whose value this is (a value is bound before its name)
            raise NameError_(f"unknown name `{text}`: a `let` does not see the name it binds (only "
                             f"continuations (`con`/`fun`) and `lam`s with a declared type may be "
                             f"recursive)", name.loc)
        candidates = list(scope.all_names()) + self.annexes.known()
        close = difflib.get_close_matches(text, candidates, n=1, cutoff=0.75)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        if len(parts) > 1 and not close:
            loaded = any(k.startswith(parts[0] + ".") for k in self.annexes.known())
            hint = f"; the plugin `{parts[0]}` declares no such annex" if loaded else \
                f"; is `plugin {parts[0]};` missing?"
        raise NameError_(f"unknown name `{text}`{hint}", name.loc)

    def annex_name(self, name: str) -> str:
        return ".".join(self.prefixes + [name])

    # ================================================================== types

    def elab_type(self, e: ast.Expr, scope: Scope) -> Def:
        v, t = self.infer(e, scope)
        if not self.is_type(t):
            raise TypeError_(f"expected a type, found `{show(v)}` of type `{show(t)}`", e.loc)
        return v

    # ================================================================== patterns

    def pattern_type(self, pat: ast.Pattern, scope: Scope,
                     expected: Def | None = None) -> tuple[Def, list[Leaf], Scope]:
        """The type a binder pattern declares, its leaves, and `scope` extended with them."""
        w = self.world
        if isinstance(pat, ast.PVar):
            if isinstance(pat.type, ast.Block) and not pat.type.braces:
                self.block_scopes[id(pat.type)] = None  # its lets scope over the binder (_leak_lets)
            if pat.type is not None:
                t = self.elab_type(pat.type, scope)
                if expected is not None:
                    self.expect(pat.type.loc, expected, t)
            elif expected is not None:
                t = expected
            else:
                raise TypeError_(f"the parameter `{pat.name}` needs a type: write `{pat.name}: T`", pat.loc)
            p = w.param(t, pat.name)
            sc = scope.child()
            self._leak_lets(pat.type, sc)
            sc.bind(pat.name, p)
            return t, [(pat.name, p, ())], sc
        if isinstance(pat, ast.PAs):
            t, leaves, sc = self.pattern_type(pat.pattern, scope, expected)
            sc = sc.child()
            p = w.param(t, pat.name)
            # Within the binder the alias is the tuple of its components (upstream binds each
            # component to the alias's projection): `[T: *, n: Nat] as X` makes `X#1_2` and `n`
            # one value. (A body sees the whole parameter and its projections: the leaf below.)
            whole = self._pattern_value(leaves)
            sc.bind(pat.name, whole if whole is not None else p)
            return t, leaves + [(pat.name, p, ())], sc
        assert isinstance(pat, ast.PTuple)
        n = len(pat.elems)
        exp_fields: list[Def | None] = [None] * n
        if expected is not None:
            exp_fields = self._expected_fields(w.zonk(expected), n)
        sc = scope
        per_field: list[tuple[Def, list[Leaf]]] = []
        for j, el in enumerate(pat.elems):
            t_j, leaves_j, sc = self.pattern_type(el, sc, exp_fields[j])
            per_field.append((t_j, leaves_j))
        fields: list[Def] = []
        for j, (t_j, _) in enumerate(per_field):
            for k in range(j):
                if not t_j.has_param:
                    break  # nothing to abstract (and no path to build: O(n²) for n plain fields)
                for _, p, path in per_field[k][1]:
                    t_j = w.abstract(t_j, p, self.extract_path(w.bvar(0), ((n, k),) + path))
            fields.append(t_j)
        names = tuple(el.name if isinstance(el, ast.PVar) and el.name != "_" else None for el in pat.elems)
        t = w.sigma(fields, names=names)
        leaves = [(nm, p, ((n, j),) + path) for j, (_, lv) in enumerate(per_field) for nm, p, path in lv]
        return t, leaves, sc

    @staticmethod
    def _no_repeated_parameter(domains: Sequence[ast.Pattern]) -> None:
        """A lambda's parameters (all its domains: upstream binds them in one scope, `rebind`
        off) name each thing once: `lam h (y: I32) (y: I32)` is a redeclaration of `y`."""
        seen: dict[str, ast.Pattern] = {}

        def visit(p: ast.Pattern) -> None:
            if isinstance(p, ast.PTuple):
                for el in p.elems:
                    visit(el)
                return
            if isinstance(p, ast.PAs):
                visit(p.pattern)
            if not isinstance(p, (ast.PAs, ast.PVar)) or p.name == "_":
                return
            name = p.name
            first = seen.get(name)
            if first is not None:
                raise NameError_(f"redeclaration of `{name}`", p.loc,
                                 (Related(f"`{name}` is first declared here", first.loc),))
            seen[name] = p

        for d in domains:
            visit(d)

    def _pattern_value(self, leaves: list[Leaf]) -> Def | None:
        """The value a pattern binds, built from its leaves (each a parameter at a path of
        (arity, index) steps): a whole-value leaf itself, else the tuple of its elements'."""
        whole = [p for _, p, path in leaves if path == ()]
        if whole:
            return whole[-1]
        if not leaves:
            return None
        n = leaves[0][2][0][0]
        elems: list[Def] = []
        for j in range(n):
            sub = [(nm, p, path[1:]) for nm, p, path in leaves if path and path[0] == (n, j)]
            v = self._pattern_value(sub)
            if v is None:
                return None
            elems.append(v)
        return self.world.tuple(elems)

    def _leak_lets(self, e: ast.Expr | None, sc: Scope) -> None:
        """A `let` in a parameter's type binds for the rest of the binder, as upstream scopes it
        (`(T: *, U: let F = %foo.F T; F, V: F)`): the type block's lets are bound in sc too."""
        if not isinstance(e, ast.Block) or e.braces:
            return
        inner = self.block_scopes.pop(id(e), None)
        if inner is None:
            return
        for d in e.decls:
            if isinstance(d, ast.DeclLet):
                for name in self._pattern_names(d.pattern):
                    hit = inner.names.get(name)
                    if hit is not None:
                        sc.bind(name, hit)

    def _expected_fields(self, t: Def, n: int) -> list[Def | None]:
        w = self.world
        if n == 1:
            return [t]
        if isinstance(t, Sigma) and len(t.ops) == n and not t.dependent:
            return [w.shift(f, -1) for f in t.ops]
        if isinstance(t, Arr) and isinstance(t.shape, Lit) and t.shape.value == n:
            return [w.open(t.body, w.lit_idx(n, j)) for j in range(n)]
        return [None] * n

    def bind_pattern(self, pat: ast.Pattern, value: Def, vtype: Def, scope: Scope) -> None:
        """Bind a `let`/`ret` pattern to a value of a known type."""
        w = self.world
        if isinstance(pat, ast.PVar):
            if pat.type is not None:
                t = self.elab_type(pat.type, scope)
                self.expect(pat.loc, t, vtype, f" in the pattern `{pat.name}`")
            scope.bind(pat.name, value)
            if isinstance(value, (App, Extract)) and value.let_name is None and pat.name != "_" \
                    and self.world.level(vtype) == 0:  # values only: types print as written (`gpu.GlobalM`)
                value.let_name = pat.name
            return
        if isinstance(pat, ast.PAs):
            self.bind_pattern(pat.pattern, value, vtype, scope)
            scope.bind(pat.name, value)
            return
        assert isinstance(pat, ast.PTuple)
        n = len(pat.elems)
        if n == 1:
            self.bind_pattern(pat.elems[0], value, vtype, scope)
            return
        vt = w.zonk(vtype)
        arity = w.arity(vt)
        if not (isinstance(arity, Lit) and arity.value == n):
            got = f"{arity.value} elements" if isinstance(arity, Lit) else f"`{show(arity)}` elements"
            raise TypeError_(f"the pattern has {n} elements, but the value of type `{show(vt)}` has {got}",
                             pat.loc)
        for j, el in enumerate(pat.elems):
            ej = w.extract_n(value, n, j)
            self.bind_pattern(el, ej, w.extract_type(vt, value, w.lit_idx(n, j)), scope)

    # ================================================================== inference

    def infer(self, e: ast.Expr, scope: Scope) -> tuple[Def, Def]:
        method = getattr(self, "infer_" + type(e).__name__, None)
        if method is None:
            raise TypeError_(f"cannot elaborate a {type(e).__name__} here", e.loc)
        start = gid_mark()
        v = method(e, scope)
        if v.loc is None:
            v.loc = e.loc  # the first source position of a (hash-consed) node: for run-time errors
        if v.gid > start and e.loc is not None:
            _locate_new(v, start, e.loc)
        return v, self.type_of(v, e.loc)

    def check(self, e: ast.Expr, expected: Def, scope: Scope) -> Def:
        w = self.world
        exp = w.zonk(expected)
        if isinstance(e, ast.Tuple):
            return self.check_tuple(e, exp, scope)
        if isinstance(e, ast.TopBot) and e.type is None:
            return w.top(exp) if e.top else w.bot(exp)
        if isinstance(e, ast.Lambda) and isinstance(exp, Pi):
            lam = self.elab_lambda(e, scope, exp)
            # The expected type guided the domains; a written codomain (or a `fn`'s return
            # type) may still differ from it.
            self.expect(e.loc, exp, self.type_of(lam, e.loc))
            return lam
        if isinstance(e, ast.Block) or isinstance(e, ast.Where):
            return self.infer_block_like(e, scope, exp)
        v, t = self.infer(e, scope)
        try:
            self.expect(e.loc, self._with_value(exp, w.zonk(v), t), t)
        except TypeError_ as err:
            note = self.literal_note(e, exp)
            if note is not None:
                err.related = (*err.related, note)
            raise
        return self._fit_unsafe_index(w.zonk(v), exp)

    def literal_note(self, e: ast.Expr, exp: Def) -> Related | None:
        """A number without suffix is a `Nat` (upstream's rule): where an `Idx s` is expected
        and the number is one of its values, how that literal is written (`2_4`, `1I32`, `tt`)."""
        if not (isinstance(e, ast.NumLit) and e.bits is None and e.size is None and e.ascribed is None):
            return None
        exp = self.world.zonk(exp)
        if not (isinstance(exp, IdxT) and isinstance(exp.size, Lit) and isinstance(exp.size.value, int)):
            return None
        s, n = exp.size.value, e.value
        if not 0 <= n < s:
            return Related(f"a number without suffix is a `Nat`; {n} is no value of `{show(exp)}` (0 to {s - 1})", e.loc)
        spelled = [f"`{n}I{s.bit_length() - 1}`"] if s in (2 ** 8, 2 ** 16, 2 ** 32, 2 ** 64) else [f"`{n}_{s}`"]
        if s == 2:
            spelled.insert(0, "`tt`" if n else "`ff`")
        return Related(f"a number without suffix is a `Nat`; the `{show(exp)}` literal {n} is written "
                       + " or ".join(spelled), e.loc)

    def _with_value(self, exp: Def, v: Def, t: Def) -> Def:
        """A dependent sigma expected of the value v: its fields instantiated with v's own
        (`[n: Nat, «n; I32»]` of `s = (2, (7I32, 9I32))` is `[Nat, «2; I32»]`), as upstream's
        checker reduces it with the value (check.cpp, assignable). A tuple written in place is
        checked field by field (check_tuple); a let-bound one, or any other value, here."""
        w = self.world
        t = w.zonk(t)
        if not isinstance(exp, Sigma) or all(f.bvd == 0 for f in exp.ops):
            return exp
        if not isinstance(t, Sigma) or any(f.bvd != 0 for f in t.ops):
            return exp  # a value of a dependent sigma itself: compared as it is
        return w.sigma([w.shift(w.open(f, v), 1) for f in exp.ops])

    def _fit_unsafe_index(self, v: Def, exp: Def) -> Def:
        """A literal `n_⊤` (`core.idx_unsafe n`) where an `Idx s` is expected, n < s: the literal
        of `Idx s` (the same value; backends need the width). Out of range it stays `n_⊤` and
        the access it indexes is checked when it runs."""
        if not isinstance(v, Lit) or not isinstance(v.ops[0], IdxT) or not isinstance(v.ops[0].size, Top):
            return v
        exp = self.world.zonk(exp)
        if isinstance(exp, IdxT) and isinstance(exp.size, Lit) and v.value < exp.size.value:
            return self.world.lit(exp, v.value)
        return v

    def check_tuple(self, e: ast.Tuple, exp: Def, scope: Scope) -> Def:
        w = self.world
        n = len(e.elems)
        if not isinstance(exp, Hole):
            exp = w.unfold(exp)  # (a recursive type's value is a tuple of its sigma's fields)
        arity = w.arity(exp)
        if isinstance(exp, Arr) and isinstance(w.zonk(arity), Hole) and n >= 2 and exp.body.bvd == 0:
            # `«?n; T»` (`compile.phases ff (p, q, 42I32)`): a tuple of n gives n, and each element
            # is checked against T, so a mismatch is the element's, not the whole tuple's
            mark = len(self.unifier.trail)
            if self.unifier.unify(arity, w.lit_nat(n)) is None:
                exp = w.zonk(exp)
                arity = w.arity(exp)
            else:
                self.unifier.undo(mark)
        if isinstance(exp, Hole) or not isinstance(arity, Lit):
            v, t = self.infer(e, scope)
            self.expect(e.loc, exp, t)
            return v
        if arity.value != n:
            raise TypeError_(f"expected a value of type `{show(exp)}` with {arity.value} elements, "
                             f"found a tuple of {n}", e.loc)
        elems: list[Def | None] = []
        # An element whose expected type still has open implicits, and that fails against it, is
        # checked again after the others (which may solve them): `gpu.buf_copy_to_host (m0, m1,
        # d, b)` learns the shape from `b`, the last argument. Only where no later element's type
        # depends on it (a non-dependent sigma).
        deferrable = isinstance(exp, Sigma) and not exp.dependent or isinstance(exp, Arr)
        deferred: list[tuple[int, TypeError_]] = []
        for j, el in enumerate(e.elems):
            t_j = self._field_type(exp, elems, j, n)
            mark = len(self.unifier.trail)
            try:
                elems.append(self.check(el, t_j, scope))
            except TypeError_ as err:
                # An error that a second attempt already confirmed is final: deferring it again
                # at every enclosing tuple would re-check nested arguments 2^depth times.
                if id(err) in self.final_errors or not (deferrable and w.zonk(t_j).has_hole):
                    raise
                self.unifier.undo(mark)
                elems.append(None)
                deferred.append((j, err))
        for j, first_error in deferred:
            t_j = w.zonk(self._field_type(exp, elems, j, n))
            if t_j.has_hole:
                self.final_errors.add(id(first_error))
                raise first_error
            try:
                elems[j] = self.check(e.elems[j], t_j, scope)
            except TypeError_ as err:
                self.final_errors.add(id(err))
                raise
        return w.tuple([x for x in elems if x is not None])

    def _field_type(self, exp: Def, elems: list[Def | None], j: int, n: int) -> Def:
        w = self.world
        if isinstance(exp, Sigma):
            if n == 1:
                return exp.ops[j]
            known = [x if x is not None else w.hole(None, "_") for x in elems[:j]]
            partial = w.tuple(known + [w.hole(None, "_")] * (n - j))
            return w.open(exp.ops[j], partial)
        if isinstance(exp, Arr):
            return w.open(exp.body, w.lit_idx(n, j))
        return exp

    # ------------------------------------------------------------------ literals

    def infer_NumLit(self, e: ast.NumLit, scope: Scope) -> Def:
        w = self.world
        if e.ascribed is not None and (e.bits is not None or e.size is not None):
            # upstream's LitExpr::bind: the literal states its type already
            raise TypeError_(f"the typed literal `{e.value}{f'I{e.bits}' if e.bits is not None else f'_{e.size}'}` "
                             f"shall not have a type annotation", e.ascribed.loc)
        if isinstance(e.ascribed, ast.Builtin) and e.ascribed.name == "Idx":
            raise TypeError_(f"`{e.value}:Idx` is not a literal of a type: the ascription binds tightest, so "
                             f"`{e.value}:Idx n` reads as `({e.value}:Idx) n`; write `{e.value}:(Idx n)`", e.ascribed.loc)
        if e.bits is not None:
            return self.checked_lit(e, w.idx_n(2**e.bits), e.value)
        if e.size is not None:
            return self.checked_lit(e, w.idx_n(e.size), e.value)
        if e.ascribed is not None:
            return self.checked_lit(e, self.elab_type(e.ascribed, scope), e.value)
        return w.lit_nat(e.value)

    def checked_lit(self, e: ast.Expr, t: Def, value: int) -> Def:
        w = self.world
        t = w.zonk(t)
        if isinstance(t, NatT):
            return w.lit(t, value)
        if isinstance(t, IdxT):
            if isinstance(t.size, Lit) and t.size.value == 0:
                # upstream MimIR encodes 2^64 as size 0 (Idx::bitwidth2size(64)); here sizes are exact
                raise TypeError_(f"the literal {value} does not fit `{show(t)}`, which has no values; for "
                                 f"64-bit integers write `I64` (`Idx 2^64`), which upstream spells `Idx 0`",
                                 e.loc)
            if isinstance(t.size, Lit) and value >= t.size.value:
                raise TypeError_(f"the literal {value} does not fit `{show(t)}` "
                                 f"(values 0 to {t.size.value - 1})", e.loc)
            return w.lit(t, value)
        raise TypeError_(f"a number literal cannot have type `{show(t)}`; expected `Nat` or `Idx n`", e.loc)

    def infer_BoolLit(self, e: ast.BoolLit, scope: Scope) -> Def:
        return self.world.lit_bool(e.value)

    def infer_CharLit(self, e: ast.CharLit, scope: Scope) -> Def:
        if e.ascribed is not None:  # upstream's LitExpr::bind: a character literal is an I8
            raise TypeError_("a character literal shall not have a type annotation (it is an `I8`)", e.ascribed.loc)
        return self.world.lit_idx(2**8, e.value)

    def infer_StrLit(self, e: ast.StrLit, scope: Scope) -> Def:
        # As upstream: one I8 per character, no terminator added (`"ab\0"` writes its own NUL).
        if e.ascribed is not None:  # upstream's LitExpr::bind
            raise TypeError_(f"a string literal shall not have a type annotation (it is an `«{len(e.value)}; I8»`)",
                             e.ascribed.loc)
        w = self.world
        return w.tuple([w.lit_idx(2**8, b) for b in e.value])

    def infer_TopBot(self, e: ast.TopBot, scope: Scope) -> Def:
        # Without an ascription (and no expected type, see `check`) upstream's default is `*`.
        t = self.world.star() if e.type is None else self.elab_type(e.type, scope)
        return self.world.top(t) if e.top else self.world.bot(t)

    # ------------------------------------------------------------------ names and builtins

    def infer_Name(self, e: ast.Name, scope: Scope) -> Def:
        return self.resolve(e, scope)

    def infer_Builtin(self, e: ast.Builtin, scope: Scope) -> Def:
        w = self.world
        if e.name == "Nat":
            return w.nat()
        if e.name in BUILTIN_SIZES:
            return w.idx_n(BUILTIN_SIZES[e.name])
        if e.name == "*":
            return w.star()
        if e.name == "□":
            return w.type_u(1)
        if e.name == "Univ":
            return w.univ()
        if e.name == "Idx":
            # The type former as a value: `λ (n: Nat): * = Idx n`; applying it β-reduces to `Idx n`.
            pi = w.pi(w.nat(), w.star())
            return w.lam(pi, w.idx(w.bvar(0)), "Idx")
        raise TypeError_(f"unknown builtin `{e.name}`", e.loc)

    def infer_IdxType(self, e: ast.IdxType, scope: Scope) -> Def:
        return self.world.idx(self.check(e.size, self.world.nat(), scope))

    def infer_TypeUniverse(self, e: ast.TypeUniverse, scope: Scope) -> Def:
        level = e.level
        if isinstance(level, ast.NumLit) and isinstance(level.ascribed, ast.Builtin) and level.ascribed.name == "Univ":
            # `Type (0:Univ)`, upstream's own spelling (langref: `*` abbreviates it)
            return self.world.type_u(level.value)
        lv = self.check(e.level, self.world.nat(), scope)
        if not isinstance(lv, Lit):
            raise TypeError_("the level of `Type` must be a literal", e.level.loc)
        return self.world.type_u(lv.value)

    # ------------------------------------------------------------------ tuples, sigmas, arrays

    def infer_Tuple(self, e: ast.Tuple, scope: Scope) -> Def:
        return self.world.tuple(self.infer(el, scope)[0] for el in e.elems)

    def infer_Sigma(self, e: ast.Sigma, scope: Scope) -> Def:
        t, _, _ = self.telescope(e, scope)
        return t

    def telescope(self, e: ast.Sigma, scope: Scope) -> tuple[Def, list[Leaf], Scope]:
        """A sigma type whose element names bind in later elements (and, for a Pi's domain, in
        the codomain)."""
        pat = ast.PTuple(e.loc, tuple(
            ast.PVar(el.loc, el.name or "_", el.type) for el in e.elems))
        return self.pattern_type(pat, scope)

    def infer_Arr(self, e: ast.Arr, scope: Scope) -> Def:
        return self._arr_pack(e, scope, is_arr=True)

    def infer_Pack(self, e: ast.Pack, scope: Scope) -> Def:
        return self._arr_pack(e, scope, is_arr=False)

    def _arr_pack(self, e: ast.Arr | ast.Pack, scope: Scope, is_arr: bool) -> Def:
        w = self.world
        shape, st = self.infer(e.shape, scope)
        if not self._is_shape_type(st):
            raise TypeError_(f"an array's shape must be a `Nat` or a `«r; Nat»`; found `{show(shape)}` "
                             f"of type `{show(st)}`", e.shape.loc)
        if isinstance(e, ast.Pack) and e.index and needs_mutable(e.body) and mentions_name(e.body, e.index):
            return self._pack_of_mutable_elements(e, shape, scope)
        p = w.param(w.index_type(shape), e.index)
        sc = scope.child()
        if e.index:
            sc.bind(e.index, p)
        body = self.elab_type(e.body, sc) if is_arr else self.infer(e.body, sc)[0]
        body = w.abstract(w.zonk(body), p)
        return w.arr(shape, body, e.index) if is_arr else w.pack(shape, body, e.index)

    def _pack_of_mutable_elements(self, e: ast.Pack, shape: Def, scope: Scope) -> Def:
        """`‹i: n; cn (x: I32) = … i …›`: an element that makes a continuation (a mutable) using
        the index is the application of a `lam` over the index, `‹i: n; f i›`: the index cannot
        be abstracted out of a mutable's body (only immutable terms are opened by an extract;
        `ks#1_2` kept the bare index in the continuation, an internal error later). A literal
        shape the World expands anyway gets one element per index instead, each made with its
        literal index: the tuple of continuations the code generators branch between."""
        w = self.world
        assert e.index is not None
        if isinstance(shape, Lit) and isinstance(w.zonk(w.type_of(shape)), NatT) and 1 <= shape.value <= EXPAND_LIMIT:
            elems: list[Def] = []
            for j in range(shape.value):
                sc = scope.child()
                sc.bind(e.index, w.lit_idx(shape.value, j))
                elems.append(self.infer(e.body, sc)[0])
            return w.tuple(elems) if len(elems) > 1 else elems[0]
        idx_t = w.index_type(shape)
        m = w.mut_lam(w.pi(idx_t, w.hole(w.star(), "pack element type")), f"{e.index}_elem", "lam")
        m.loc = e.loc
        m.param_names = (e.index,)
        sc = scope.child()
        sc.bind(e.index, w.var(m))  # type: ignore[arg-type]
        body, body_t = self.infer(e.body, sc)
        pi = w.pi(idx_t, _abstract_var(w, w.zonk(body_t), m, Scopes()))
        m.pi = pi  # type: ignore[assignment]
        m._type = pi  # (type_of reads the type a mutable was made with)
        m.body = w.zonk(body)
        return w.pack(shape, w.app(m, w.bvar(0)), e.index)

    def _is_shape_type(self, t: Def) -> bool:
        w = self.world
        t = w.zonk(t)
        if isinstance(t, NatT):
            return True
        if isinstance(t, Arr):
            return w.zonk(t.body) is w.nat()
        return isinstance(t, Sigma) and all(f is w.nat() for f in t.ops)

    def infer_Extract(self, e: ast.Extract, scope: Scope) -> Def:
        w = self.world
        tup, tt = self.infer(e.tuple, scope)
        written = w.zonk(tt)
        declared = written in w.rec_defs or written.gid in self.declared_sigmas
        tt = w.unfold(tt)  # (a value of a recursive type `rec A = [I32, Ptr0 A]`: its sigma's fields)
        # Upstream keeps field names only on a mutable sigma (a `rec`'s, or a dependent one): on
        # another a name is its variable, where one is bound (else verimim reads the field).
        nominal = declared or (isinstance(tt, Sigma) and tt.dependent)
        arity = w.arity(tt)
        if isinstance(e.index, ast.Tuple) and len(e.index.elems) >= 2 and isinstance(w.index_type(arity), IdxT):
            # A multi-index of a tuple of tuples (upstream's World::extract): `a#(i, j)` is
            # `a#i#j`, each index of its own level's type. (An array of a tuple shape takes the
            # tuple as one index of its sigma type, below.)
            for ix in e.index.elems:
                tup = self._extract_value(ast.Extract(ix.loc, e.tuple, ix), tup, tt, scope)
                tt = w.type_of(tup)
            return tup
        return self._extract_value(e, tup, tt, scope, nominal)

    def _extract_value(self, e: ast.Extract, tup: Def, tt: Def, scope: Scope, nominal: bool = True) -> Def:
        w = self.world
        arity = w.arity(tt)
        idx = self._extract_index(e, tt, arity, scope, nominal)
        self._index_in_range(tt, idx, e.index.loc)
        if isinstance(tt, Sigma) and not isinstance(idx, Lit) and tt.dependent:
            raise TypeError_(f"`{show(tt)}` is a dependent sigma, so its index must be a literal; "
                             f"found `{show(idx)}`", e.index.loc)
        # A heterogeneous tuple at a run-time index: its value is one of the element types (the
        # World types it as their union, as upstream).
        return w.extract(tup, idx)

    def _index_in_range(self, tt: Def, idx: Def, loc: Loc) -> None:
        """A heterogeneous tuple's literal index names one of its elements: an unchecked index
        (`core.idx_unsafe 9`, an `Idx ⊤:Nat`) past the last one gives its value no type (of an
        array it is the run's E-OOB)."""
        if isinstance(tt, Sigma) and isinstance(idx, Lit) and idx.value >= len(tt.ops):
            n = len(tt.ops)
            raise TypeError_(f"index `{idx.value}` is out of range: `{show(tt)}` has {n} element{'' if n == 1 else 's'} "
                             f"(an index below {n} is expected)", loc)

    def _extract_index(self, e: ast.Extract, tt: Def, arity: Def | None, scope: Scope, nominal: bool = True) -> Def:
        w = self.world
        assert arity is not None
        ix = e.index
        if e.by_name and isinstance(ix, ast.Name):
            # A field name of a declared sigma wins over a variable of the same name (upstream);
            # of an anonymous one, only where no variable has the name.
            names = tt.names if isinstance(tt, Sigma) else tt.field_names if isinstance(tt, Arr) else None
            field, dotted = ix.parts[0], len(ix.parts) > 1
            if names and field in names and (nominal or dotted or scope.lookup(field) is None):
                return w.lit_idx(len(names), names.index(field))
        if isinstance(ix, ast.NumLit) and ix.bits is None and ix.size is None and ix.ascribed is None:
            # A plain `1` is a `Nat` (as upstream, which rejects it): an index is an `Idx n`.
            n = arity.value if isinstance(arity, Lit) else None
            hint = f"; write `{ix.value}_{n}`" if n is not None and ix.value < n else ""
            raise TypeError_(f"index `{ix.value}` is not of Idx type but of type `Nat`{hint}", ix.loc)
        if isinstance(ix, ast.NumLit) and isinstance(arity, Lit) and ix.size is not None and ix.size != arity.value:
            raise TypeError_(f"index `{ix.value}_{ix.size}` is an `Idx {ix.size}`, but `{show(tt)}` has "
                             f"{arity.value} element{'' if arity.value == 1 else 's'} (an `Idx {arity.value}` is expected)", ix.loc)
        return self.check(ix, w.index_type(arity), scope)

    def infer_Insert(self, e: ast.Insert, scope: Scope) -> Def:
        w = self.world
        tup, tt = self.infer(e.tuple, scope)
        arity = w.arity(tt)
        assert arity is not None
        idx = self.check(e.index, w.index_type(arity), scope)
        self._index_in_range(w.unfold(tt), idx, e.index.loc)
        et = w.extract_type(tt, tup, idx)
        val = self.check(e.value, et, scope)
        return w.insert(tup, idx, val)

    # ------------------------------------------------------------------ function types

    def infer_Pi(self, e: ast.Pi, scope: Scope) -> Def:
        w = self.world
        dom, leaves, sc = self._binder_dom(e.dom, scope)
        names = tuple(nm for nm, _, path in leaves if len(path) <= 1) or None
        if e.alias is not None:
            # `[…] as x → e`: x is the whole domain value (BVar 0 once abstracted).
            whole = w.param(w.zonk(dom), e.alias)
            sc = sc.child()
            sc.bind(e.alias, whole)
            leaves = leaves + [(e.alias, whole, ())]
        codom = self.elab_type(e.codom, sc)
        return w.pi(dom, self.abstract_leaves(w.zonk(codom), leaves), e.implicit, names=names)

    def _binder_dom(self, dom_e: ast.Expr, scope: Scope) -> tuple[Def, list[Leaf], Scope]:
        if isinstance(dom_e, ast.Sigma) and any(el.name for el in dom_e.elems):
            return self.telescope(dom_e, scope)
        return self.elab_type(dom_e, scope), [], scope

    def infer_Cn(self, e: ast.Cn, scope: Scope) -> Def:
        dom, _, _ = self._binder_dom(e.dom, scope)
        return self.world.cn(dom)

    def infer_Fn(self, e: ast.Fn, scope: Scope) -> Def:
        w = self.world
        dom, leaves, sc = self._binder_dom(e.dom, scope)
        codom = w.zonk(self.elab_type(e.codom, sc))
        ret = w.cn(self.abstract_leaves(codom, leaves, w.extract_n(w.bvar(0), 2, 0)))
        return w.cn(w.sigma([dom, ret]))

    # ------------------------------------------------------------------ application

    def infer_App(self, e: ast.App, scope: Scope) -> Def:
        w = self.world
        callee, ct = self.infer(e.callee, scope)
        if not e.explicit:
            callee, ct = self.apply_implicits(callee, ct, e.callee)
        ct = w.unfold(ct)
        if not isinstance(ct, Pi):
            raise TypeError_(f"`{show(callee)}` of type `{show(ct)}` is not a function and cannot be "
                             f"applied", e.callee.loc)
        try:
            arg = self.check(e.arg, ct.dom, scope)
        except TypeError_ as err:
            note = self.cps_call_note(ct, e)
            if note is not None and note not in err.related:
                err.related = (*err.related, note)
            raise
        res = w.app(w.zonk(callee), w.zonk(arg))
        return self.partially_evaluated(res) or res

    def cps_call_note(self, ct: Pi, e: ast.App) -> Related | None:
        """Where the callee is a `fun` (`Cn [arguments, Cn result]`), how it is called: a call
        written in direct style (`let (m0, r) = f (m0, x);`) is checked against the pair of its
        arguments and its return continuation, and the mismatch alone points at `m0`."""
        w = self.world
        dom = w.zonk(ct.dom)
        if not (w.is_cn(ct) and isinstance(dom, Sigma) and len(dom.ops) == 2 and w.is_cn(dom.ops[1])):
            return None
        name = self.describe(e.callee)
        call = name.strip("`") if name.startswith("`") else "f"
        return Related(f"{name} is a function in continuation-passing style (`fun`): its argument is "
                       f"(its arguments, its return continuation), of type `{show(dom)}`; "
                       f"`ret … = {call} $ (…);` calls it with the rest of the block as that "
                       f"continuation", e.callee.loc)

    def partially_evaluated(self, d: Def) -> Def | None:
        """A call of a recursive `lam` (filter `tt`, upstream's default for `lam`) unfolded at
        construction, as upstream's `World::app` does, when the unfolding ends: `is_even 10`
        is `tt`, `pow (x, 3)` is `x * (x * (x * 1))`. A branch `(rec, base)#c` unfolds only the
        side its literal condition picks (upstream's Rewriter rewrites an extract's index first),
        so the recursion ends where upstream's does; run as a call, both sides are operands and
        are computed, and the recursion never ended (E-FUEL). A call whose unfolding does not
        end within PE_BUDGET (a recursion on a run-time value, which upstream cannot compile
        either) stays a call."""
        if not isinstance(d, App) or not isinstance(d.callee, MutLam) or d.has_hole:
            return None
        f = d.callee
        if f.kind != "lam" or f.external or not self.filter_holds(d):
            return None
        return unfold_fully(self.world, d, PE_BUDGET, self.filter_holds, self.force_body)

    def filter_holds(self, call: App) -> bool:
        """Whether the callee's filter is `tt` for this argument (upstream unfolds only then):
        none is `tt` (a `lam`'s default); `tt`/`ff`; `%core.pe.is_closed x` for a parameter x
        holds where x's argument is closed (no variable: a literal, or made of literals). Any
        other filter is not decided here, and the call stays."""
        assert isinstance(call.callee, MutLam)
        entry = self.filters.get(call.callee.gid)
        if entry is None:
            return True
        expr, names = entry
        if isinstance(expr, ast.BoolLit):
            return expr.value
        if isinstance(expr, ast.App) and isinstance(expr.callee, ast.Name) \
                and expr.callee.parts == ("core", "pe", "is_closed") and isinstance(expr.arg, ast.Name) \
                and len(expr.arg.parts) == 1 and expr.arg.parts[0] in names:
            n = len(names)
            k = names.index(expr.arg.parts[0])
            value = call.arg if n == 1 else self.world.extract_n(call.arg, n, k)
            return _closed_value(value)
        return False

    def apply_implicits(self, callee: Def, ct: Def, at: ast.Expr) -> tuple[Def, Def]:
        """Supply a metavariable for every leading implicit domain of the callee's type."""
        w = self.world
        ct = w.unfold(w.zonk(ct))
        while isinstance(ct, Pi) and ct.implicit:
            arg = self.holes_for(ct, self.describe(at), at.loc)
            callee = w.app(callee, arg)
            ct = w.unfold(w.zonk(self.type_of(callee, at.loc)))
        return callee, ct

    def holes_for(self, pi: Pi, what: str, loc: Loc) -> Def:
        w = self.world
        dom = w.zonk(pi.dom)
        names = pi.names or ()
        if isinstance(dom, Sigma):
            n = len(dom.ops)
            holes = [self.new_hole(None, f"{names[j] if j < len(names) and names[j] else j} of {what}",
                                   loc) for j in range(n)]
            tup = w.tuple(holes)
            for j, h in enumerate(holes):
                h._type = w.open(dom.ops[j], tup)
            return tup
        hint = names[0] if len(names) == 1 and names[0] else "implicit"
        return self.new_hole(dom, f"{hint} of {what}", loc)

    def describe(self, e: ast.Expr) -> str:
        while isinstance(e, ast.App):
            e = e.callee
        return f"`{e.text}`" if isinstance(e, ast.Name) else "the function"

    # ------------------------------------------------------------------ blocks and binding forms

    def infer_Block(self, e: ast.Block, scope: Scope) -> Def:
        return self.infer_block_like(e, scope, None)

    def infer_Where(self, e: ast.Where, scope: Scope) -> Def:
        return self.infer_block_like(e, scope, None)

    def infer_block_like(self, e: ast.Block | ast.Where, scope: Scope, expected: Def | None) -> Def:
        sc = scope.child()
        if id(e) in self.block_scopes:
            self.block_scopes[id(e)] = sc  # a parameter's type (_leak_lets)
        # Upstream binds a block's declarations in order and a `where` block's in reverse order
        # (each sees those after it): the positions below follow that order.
        # (What is forced is forced in the text's order: the names a dump gives follow it.)
        textual = tuple(e.decls)
        decls = textual if isinstance(e, ast.Block) else tuple(reversed(textual))
        if isinstance(e, ast.Block) and isinstance(e.expr, ast.Where):
            # `let x = f …; e where lam f … end`: the where block's declarations are hoisted
            # with the body's own, so the lets before `e` see them too (as verimim dumps it).
            textual = textual + tuple(e.expr.decls)
            decls = decls + tuple(reversed(e.expr.decls))
            e = ast.Block(e.loc, decls, e.expr.expr, e.braces)
        # A body's `let`s bind in sequence; every other declaration (and every declaration of a
        # `where` block) is hoisted and elaborated on demand.
        sequential = isinstance(e, ast.Block)
        self.declare(decls, sc, lets=not sequential)
        if sequential:
            for pos, d in enumerate(decls):
                if isinstance(d, ast.DeclLet):
                    view = sc.at(pos, own=False)
                    self.statement(lambda d=d, view=view: self.elab_let(d, view))
        self.force_all(textual)
        if expected is not None:
            return self.check(e.expr, expected, sc)
        return self.infer(e.expr, sc)[0]

    def elab_let(self, d: ast.DeclLet, scope: Scope) -> Def:
        pat = d.pattern
        if isinstance(pat, ast.PVar) and pat.type is not None:
            t = self.elab_type(pat.type, scope)
            v = self.check(d.value, t, scope)
            scope.bind(pat.name, v)
            return v
        v, t = self.infer(d.value, scope)
        v = self.world.zonk(v)
        self.bind_pattern(pat, v, t, scope)
        return v

    def infer_Ret(self, e: ast.Ret, scope: Scope) -> Def:
        w = self.world

        def call() -> Def:
            callee, ct = self.infer(e.callee, scope)
            callee, ct = self.apply_implicits(callee, ct, e.callee)
            dom = w.zonk(ct.dom) if isinstance(ct, Pi) else None
            if not (isinstance(ct, Pi) and self.is_bot(ct.codom) and dom is not None
                    and w.arity(dom) is w.lit_nat(2)):
                raise TypeError_(f"`ret` needs a function `Fn A → B`; found `{show(callee)}` of type "
                                 f"`{show(ct)}`", e.callee.loc)
            assert isinstance(dom, (Sigma, Arr))
            a_t = w.extract_type(dom, w.hole(None, "_"), w.lit_idx(2, 0))
            arg = self.check(e.arg, a_t, scope)
            k_t = w.zonk(w.extract_type(dom, w.tuple([arg, w.hole(None, "_")]), w.lit_idx(2, 1)))
            if not (isinstance(k_t, Pi) and self.is_bot(k_t.codom)):
                raise TypeError_(f"`ret` needs a function `Fn A → B`; found `{show(ct)}`", e.callee.loc)
            k = w.mut_lam(w.cn(k_t.dom), self.ret_name(e.pattern), "con")
            k.loc = e.loc
            k.param_names = self.pattern_names(e.pattern)
            made.append(k)
            return w.app(w.zonk(callee), w.tuple([w.zonk(arg), k]))

        # The continuation is kept aside: the call may β-reduce (an immutable callee), so the
        # jump need not be `callee (arg, k)` any more.
        made: list[MutLam] = []
        jump = self.statement(call)
        k = made[0]
        sc = scope.child()
        self.bind_pattern(e.pattern, w.var(k), k.pi.dom, sc)
        k.body = self.statement(lambda: self.check(e.body, self.bot(), sc))
        return jump

    @staticmethod
    def ret_name(p: ast.Pattern) -> str:
        return "ret"

    @staticmethod
    def pattern_names(p: ast.Pattern) -> tuple[str | None, ...]:
        """The first-level names of a pattern (for printing a mutable's parameters)."""
        if isinstance(p, ast.PTuple):
            return tuple(el.name if isinstance(el, ast.PVar) else
                         el.name if isinstance(el, ast.PAs) else None for el in p.elems)
        if isinstance(p, (ast.PVar, ast.PAs)):
            return (p.name,)
        return ()

    def infer_Lambda(self, e: ast.Lambda, scope: Scope) -> Def:
        return self.elab_lambda(e, scope, None)

    # ================================================================== lambdas and declarations

    def elab_lambda(self, e: ast.Lambda, scope: Scope, expected: Pi | None) -> Def:
        mutable = e.kind != "lam" or needs_mutable(e.body)
        name = {"lam": "lm", "con": "cn", "fun": "fn"}[e.kind]
        sig = self.signature(e.kind, e.domains, e.codom, scope, e.loc, expected, body=None if mutable else e.body)
        if mutable:
            # curried (`fn (a: I32) (b: I32): I32 = …`): the outer ones are `lam`s, as a declaration's
            # (define_mut makes the inner ones); one kind and name for all made them one mutable
            # to the phases' witnesses (mut_key), and beta_red's spec saw a wrong claim
            kind = e.kind if len(e.domains) == 1 else "lam"
            m = self.world.mut_lam(sig.pi, name, kind)
            m.loc = e.loc
            self.define_mut(m, sig, e.body, e.loc, e.kind)
            return m
        return sig.immutable

    class Signature:
        def __init__(self) -> None:
            self.pi: Pi
            self.outer: Scope
            self.patterns: list[ast.Pattern] = []
            self.doms: list[tuple[Def, list[Leaf], bool]] = []
            self.codom: Def | None = None
            self.scope: Scope
            self.immutable: Def

    def signature(self, kind: str, domains: Sequence[ast.Pattern], codom_e: ast.Expr | None,
                  scope: Scope, loc: Loc, expected: Pi | None = None,
                  body: ast.Expr | None = None) -> Elaborator.Signature:
        """Elaborate the domains and codomain of a lam/con/fun and build its type. With `body`
        (an immutable lam) the body is elaborated too and the closed `Lam` built."""
        w = self.world
        sig = Elaborator.Signature()
        sig.outer = scope
        sig.patterns = list(domains)
        if not domains:
            raise TypeError_("a lambda needs at least one domain", loc)
        self._no_repeated_parameter(domains)
        sc = scope
        exp: Def | None = expected
        for i, dpat in enumerate(domains):
            exp_dom = exp.dom if isinstance(exp, Pi) else None
            if exp_dom is not None and kind == "fun" and i == len(domains) - 1:
                # A `fun`'s last domain gains the `return` continuation: the written domain is
                # matched against `A` of the expected `Cn [A, Cn B]` (`Fn A → B`).
                exp_dom = self._written_fun_domain(exp_dom)
            t, leaves, sc = self.pattern_type(dpat, sc, exp_dom)
            written: ast.Pattern = dpat
            while isinstance(written, ast.PAs):
                written = written.pattern  # `{T: *, a: Nat} as Ta` is implicit (upstream's AliasPtrn)
            implicit = isinstance(written, ast.PTuple) and written.implicit
            sig.doms.append((w.zonk(t), leaves, implicit))
            exp = None  # only the first domain is matched against an expected type
        sig.scope = sc
        last_t, last_leaves, last_impl = sig.doms[-1]
        if kind == "con":
            if codom_e is not None:
                raise TypeError_("a `con` has no return type (it never returns)", codom_e.loc)
            inner: Def = w.cn(last_t)
        elif kind == "fun":
            r = self.return_hole(loc) if codom_e is None else w.zonk(self.elab_type(codom_e, sc))
            sig.codom = r
            ret = w.cn(self.abstract_leaves(r, last_leaves, w.extract_n(w.bvar(0), 2, 0)))
            inner = w.cn(w.sigma([last_t, ret]))
        else:
            if codom_e is not None:
                r = w.zonk(self.elab_type(codom_e, sc))
            elif body is not None:
                r = None
            elif isinstance(expected, Pi) and len(domains) == 1:
                r = None
            else:
                r = self.return_hole(loc)
            body_v: Def | None = None
            if body is not None:
                if r is not None:
                    body_v = w.zonk(self.check(body, r, sc))
                else:
                    body_v, r = self.infer(body, sc)
                    body_v, r = w.zonk(body_v), w.zonk(r)
            if r is None:
                assert isinstance(expected, Pi)
                p = w.param(last_t)
                r = w.open(expected.codom, p)
                r = w.abstract(r, p)  # stays relative to the binder
                inner = w.pi(last_t, r, last_impl)
            else:
                sig.codom = r
                inner = w.pi(last_t, self.abstract_leaves(r, last_leaves), last_impl, self._names(last_leaves))
            if body_v is not None:
                assert isinstance(inner, Pi)
                lam: Def = w.lam(inner, self.abstract_leaves(body_v, last_leaves))
                types = [inner]
                t_acc: Def = inner
                for t, leaves, impl in reversed(sig.doms[:-1]):
                    t_acc = w.pi(t, self.abstract_leaves(t_acc, leaves), impl, self._names(leaves))
                    types.append(t_acc)
                for (t, leaves, impl), pi_t in zip(reversed(sig.doms[:-1]), types[1:]):
                    assert isinstance(pi_t, Pi)
                    lam = w.lam(pi_t, self.abstract_leaves(lam, leaves))
                sig.immutable = lam
                sig.pi = lam.pi  # type: ignore[attr-defined]
                return sig
        t_acc = inner
        for t, leaves, impl in reversed(sig.doms[:-1]):
            t_acc = w.pi(t, self.abstract_leaves(t_acc, leaves), impl, self._names(leaves))
        assert isinstance(t_acc, Pi)
        sig.pi = t_acc
        return sig

    def _written_fun_domain(self, dom: Def) -> Def | None:
        """`A` of a `fun`'s full domain `[A, Cn B]`; None when `dom` is not of that shape (the
        lambda's type is then compared with the expected one as a whole)."""
        w = self.world
        dom = w.zonk(dom)
        if not isinstance(dom, (Sigma, Arr)) or w.arity(dom) is not w.lit_nat(2):
            return None
        return w.zonk(w.extract_type(dom, w.hole(None, "_"), w.lit_idx(2, 0)))

    @staticmethod
    def _names(leaves: list[Leaf]) -> tuple[str | None, ...] | None:
        names = tuple(nm for nm, _, path in leaves if len(path) <= 1)
        return names or None

    def define_mut(self, m: MutLam, sig: Elaborator.Signature, body: ast.Expr | None, loc: Loc,
                   kind: str) -> None:
        """Queue the elaboration of a mutable's body. `kind` is the declared kind of the innermost
        lambda; a curried declaration's outer lambdas are `lam`s whose bodies are the next one."""
        if body is None:
            return

        def run() -> None:
            w = self.world
            cur = m
            sc = sig.outer.child()
            n = len(sig.doms)
            for i, (_, leaves, _) in enumerate(sig.doms):
                var = w.var(cur)
                cur.param_names = self.pattern_names(sig.patterns[i])
                last = i == n - 1
                root = w.extract_n(var, 2, 0) if (last and kind == "fun") else var
                for nm, _, path in leaves:
                    node = self.extract_path(root, path)
                    sc.bind(nm, node)
                    # a name inside a nested pattern (`(d, c)` of a kernel's arguments) is shown
                    # by diagnostics as written (printer.source_name knows the first level only)
                    if len(path) >= 2 and isinstance(node, Extract) and node.let_name is None and nm != "_" \
                            and w.level(w.type_of(node)) == 0:
                        node.let_name = nm
                if last:
                    break
                inner_t = w.open(cur.pi.codom, var)
                assert isinstance(inner_t, Pi)
                inner = w.mut_lam(inner_t, cur.name or "_", kind if i == n - 2 else "lam")
                inner.loc = loc
                cur.body = inner
                cur = inner
            last_mut = cur
            if kind == "fun":
                ret_k = w.extract_n(w.var(last_mut), 2, 1)
                sc.bind("return", ret_k)
                last_mut.body = self.statement(lambda: self.fun_body(body, sc))
            elif kind == "con":
                last_mut.body = self.statement(lambda: self.check(body, self.bot(), sc))
            else:
                codom = w.open(last_mut.pi.codom, w.var(last_mut))
                last_mut.body = self.statement(lambda: self.check(body, codom, sc))

        done: list[bool] = []

        def once() -> None:
            if not done:
                done.append(True)
                self.pending_bodies.pop(m.gid, None)
                run()

        self.pending_bodies[m.gid] = once
        self.deferred.append(once)

    def fun_body(self, body: ast.Expr, scope: Scope) -> Def:
        """A `fun`'s body is a jump, as a `con`'s: `fun` only adds the `return` parameter (its
        codomain is ⊥, as upstream's `add_ret`), so a body of the return type is ill-typed."""
        v, t = self.infer(body, scope)
        self.expect(body.loc, self.bot(), t, " in the body of a `fun` or `fn`, which jumps (`return e` returns e)")
        return v

    # ------------------------------------------------------------------ declaration lists

    def declare(self, decls: Sequence[ast.Decl], scope: Scope, lets: bool = True) -> None:
        """Register every declaration of a block as a lazy entry (without `lets`, all but the
        `let`s, which the caller binds in sequence). Each sees the block from its position
        (Scope.at): a rebound name is its nearest binding before it."""
        self.check_redeclarations(decls)
        self.group_members.update(_mutually_recursive(decls))
        for pos, d in enumerate(decls):
            if isinstance(d, ast.DeclLet) and not lets:
                continue
            view = scope.at(pos, own=not isinstance(d, ast.DeclLet))
            if not isinstance(d, ast.DeclRec):
                self.declare_one(d, view)
                continue
            if len(d.decls) > 1:
                # Members of a group may call each other: none can be a closed `Lam`.
                self.group_members.update(id(m) for m in d.decls)
            for member in d.decls:
                self.declare_one(member, view)  # one position: every member sees all of them

    def declare_one(self, d: ast.Decl, scope: Scope) -> None:
        if isinstance(d, ast.DeclLam):
            self.declare_lam(d, scope)
        elif isinstance(d, ast.DeclAxm):
            self.declare_axm(d, scope)
        elif isinstance(d, ast.DeclLet):
            self.declare_let(d, scope)
        elif isinstance(d, ast.DeclMod):
            self.declare_mod(d, scope)
        elif isinstance(d, ast.DeclC):
            self.declare_c(d, scope)
        elif isinstance(d, ast.DeclRecVal):
            self.declare_rec_val(d, scope)
        elif isinstance(d, ast.DeclRule):
            self.declare_rule(d, scope)

    @staticmethod
    def _declared_name(d: ast.Decl) -> str | None:
        """The name a non-`let` declaration binds in its block (annexes by their full name)."""
        if isinstance(d, (ast.DeclLam, ast.DeclRecVal)):
            return ".".join(d.percent_name) if d.percent_name else d.name
        if isinstance(d, (ast.DeclC, ast.DeclRule)):
            return d.name
        return None

    def check_redeclarations(self, decls: Sequence[ast.Decl]) -> None:
        """Two declarations of one name in one block (`lam`, `con`, `fun`, `rec`, `ccon`,
        `cfun`, `rule`) are an error, as upstream's "redeclaration"; `let` may rebind."""
        seen: dict[str, ast.Decl] = {}
        flat: list[ast.Decl] = []
        for d in decls:
            flat.extend(d.decls if isinstance(d, ast.DeclRec) else (d,))
        # in the text's order: a `where` block's declarations come here reversed (upstream binds
        # them so), and the one that is "first declared" is the one written first
        flat.sort(key=lambda d: (d.loc.line, d.loc.col) if d.loc is not None else (0, 0))
        for d in flat:
            name = self._declared_name(d)
            if name is None or name == "_":
                continue
            first = seen.get(name)
            if first is not None:
                raise NameError_(f"redeclaration of `{name}`", d.loc,
                                 (Related(f"`{name}` is first declared here", first.loc),))
            seen[name] = d

    def declare_c(self, d: ast.DeclC, scope: Scope) -> None:
        """`ccon f [D]` is an axiom `c.f: Cn D`; `cfun f [D]: R` one of type `Fn D → R`. The
        interpreter and the backends know C functions by that name (`World.c_functions`)."""

        def make() -> Def:
            type_e: ast.Expr = ast.Cn(d.loc, d.dom) if d.codom is None else ast.Fn(d.loc, d.dom, d.codom)
            t = self.statement(lambda: self.elab_type(type_e, scope))
            ax = self.world.axiom(C_PREFIX + d.name, t)
            ax.loc = d.loc
            self.world.c_functions[d.name] = ax
            return ax

        lazy = Lazy(d.name, d.loc, make)
        scope.bind(d.name, lazy)
        self._remember(d, lazy)

    def declare_rec_val(self, d: ast.DeclRecVal, scope: Scope) -> None:
        """`rec N (: T)? = e`. A lambda is a (recursive) declaration of that kind; a type that
        does not mention N is a plain definition; one that does is a recursive type, kept as an
        opaque constant that unfolds to its definition where its structure is needed."""
        value = d.value
        if isinstance(value, ast.Lambda):
            lam = ast.DeclLam(d.loc, d.doc, value.kind, d.name, value.domains, value.codom, value.body,
                              d.percent_name is not None, False, d.percent_name, value.filters)
            if id(d) in self.group_members:  # (`rec f = λ … and g = λ …`: f and g call each other)
                self.group_members.add(id(lam))
            self.declare_lam(lam, scope)
            self._remember(d, self.decl_lazies[id(lam)][0])
            return
        if not isinstance(value, (ast.Pi, ast.Sigma, ast.Cn, ast.Fn)):
            # upstream's RecDecl::bind_decl: a λ, a Π (`Cn`, `Fn`, an arrow) or a Σ, nothing else
            raise TypeError_("unsupported expression in `rec`: it defines a function, a Pi or a "
                             f"sigma type, found {self.describe_syntax(value)}", value.loc)
        if not mentions_name(value, d.name) and id(d) not in self.group_members:
            let = ast.DeclLet(d.loc, d.doc, ast.PVar(d.loc, d.name, d.type), value,
                              d.percent_name is not None, d.percent_name)
            self.declare_let(let, scope)
            for lazy in self.decl_lazies.get(id(let), ()):
                self._remember(d, lazy)
                lazy.thunk = self._noting_declared_sigma(lazy.thunk)
            return
        annex = ".".join(d.percent_name) if d.percent_name else None

        def make() -> Def:
            w = self.world
            t = w.star() if d.type is None else self.statement(lambda: self.elab_type(d.type, scope))  # type: ignore[arg-type]
            ax = w.axiom(REC_PREFIX + (annex or d.name), t)
            ax.loc = d.loc
            lazy.value = ax  # the definition refers to the constant itself
            sc = scope.child()
            sc.bind(d.name, ax)
            w.rec_defs[ax] = self.statement(lambda: self.check(value, t, sc))
            if annex:
                w.register_annex(annex, ax, d.doc)
                self.annexes.pending.pop(annex, None)
            return ax

        lazy = Lazy(d.name, d.loc, make)
        scope.bind(d.name, lazy)
        if annex:
            self.claim_annex(annex, d.loc)
            self.annexes.pending[annex] = lazy
        self._remember(d, lazy)

    def _noting_declared_sigma(self, thunk: Callable[[], Def]) -> Callable[[], Def]:
        """A `rec` sigma's definition, its sigma remembered: upstream makes it a mutable sigma,
        whose field names a `# name` prefers to a variable (infer_Extract)."""
        def make() -> Def:
            v = thunk()
            if isinstance(v, (Sigma, Arr)):  # (`[x: I32, y: I32]` is the array «2; I32» with field names)
                self.declared_sigmas.add(v.gid)
            return v
        return make

    @staticmethod
    def describe_syntax(e: ast.Expr) -> str:
        if isinstance(e, ast.Name):
            return f"`{e.text}`"
        if isinstance(e, ast.Builtin):
            return f"`{e.name}`"
        named = {ast.Arr: "an array type", ast.Union_: "a union type"}.get(type(e))
        if named is not None:
            return named
        word = type(e).__name__.rstrip('_').lower()
        return f"{'an' if word[0] in 'aeiou' else 'a'} {word} expression"

    def declare_rule(self, d: ast.DeclRule, scope: Scope) -> None:
        """`rule N p : lhs (when g)? => rhs`: type-checked (both sides of one type, the guard a
        `Bool`) over p's meta variables; its value is an opaque constant of type `Rule T`."""

        def make() -> Def:
            w = self.world

            sides: list[Def | None] = []

            def elaborate() -> Def:
                meta_t, leaves, sc = self.pattern_type(d.pattern, scope)
                lhs, lhs_t = self.infer(d.lhs, sc)
                rhs = self.check(d.rhs, lhs_t, sc)
                guard = self.check(d.guard, w.bool_t(), sc) if d.guard is not None else None
                # the sides over the meta variables (BVar 0: the pattern's value), for `dump`
                sides[:] = [None if x is None else self.abstract_leaves(w.zonk(x), leaves)
                            for x in (lhs, rhs, guard)]
                return w.zonk(meta_t)

            meta_t = self.statement(elaborate)
            ax = w.axiom(RULE_PREFIX + d.name, w.app(self.rule_type_former(), meta_t))
            ax.loc = d.loc
            lhs, rhs, guard = sides
            assert lhs is not None and rhs is not None
            w.rule_defs[ax] = RuleDef(d.name, d.norm, meta_t, self.pattern_names(d.pattern), lhs, rhs, guard)
            return ax

        lazy = Lazy(d.name, d.loc, make)
        scope.bind(d.name, lazy)
        self._remember(d, lazy)

    def rule_type_former(self) -> Def:
        """`Rule: * → *` — the type of rewrite rules over a meta type (a builtin of upstream's)."""
        w = self.world
        return w.axiom(RULE_TYPE, w.pi(w.star(), w.star()))

    # ------------------------------------------------------------------ unions

    def infer_Union_(self, e: ast.Union_, scope: Scope) -> Def:
        return self.world.join(self.elab_type(t, scope) for t in e.types)

    def union_members(self, t: Def, loc: Loc, what: str) -> tuple[Def, ...]:
        u = self.world.unfold(self.world.zonk(t))
        if not isinstance(u, Join):
            raise TypeError_(f"{what} needs a union type `A ∪ B`, found `{show(u)}`", loc)
        return u.ops

    def infer_Inj(self, e: ast.Inj, scope: Scope) -> Def:
        w = self.world
        union = self.elab_type(e.type, scope)
        members = self.union_members(union, e.type.loc, "`inj`")
        v, vt = self.infer(e.value, scope)
        for m in members:
            mark = len(self.unifier.trail)
            if self.unifier.unify(m, vt) is None:
                return w.inject(w.zonk(v), w.zonk(union))
            self.unifier.undo(mark)
        listed = ", ".join(f"`{show(m)}`" for m in members)
        raise TypeError_(f"`{show(w.zonk(vt))}` is not a member of the union `{show(union)}` "
                         f"(its members: {listed})", e.value.loc)

    def infer_Match(self, e: ast.Match, scope: Scope) -> Def:
        """Each arm's pattern names the member it handles by its type; an arm without a type
        takes the first member no typed arm names. Every member exactly once."""
        w = self.world
        u, ut = self.infer(e.scrutinee, scope)
        members = self.union_members(ut, e.scrutinee.loc, "`match`")
        owner: dict[int, ast.MatchArm] = {}
        untyped: list[ast.MatchArm] = []
        arm_member: dict[int, int] = {}
        for arm in e.arms:
            declared = self._declared_type(arm.pattern)
            if declared is None:
                untyped.append(arm)
                continue
            t = w.zonk(self.elab_type(declared, scope))
            if t not in members:
                raise TypeError_(f"the arm's type `{show(t)}` is not a member of `{show(ut)}`", arm.pattern.loc)
            j = members.index(t)
            if j in owner:
                raise TypeError_(f"a second arm for `{show(t)}`", arm.pattern.loc,
                                 (Related("the first arm for it", owner[j].loc),))
            owner[j] = arm
            arm_member[id(arm)] = j
        free = [j for j in range(len(members)) if j not in owner]
        for arm in untyped:
            if not free:
                raise TypeError_("this arm matches no member of the union left over", arm.pattern.loc)
            j = free.pop(0)
            owner[j] = arm
            arm_member[id(arm)] = j
        if free:
            missing = ", ".join(f"`{show(members[j])}`" for j in free)
            raise TypeError_(f"the match does not cover {missing}", e.loc)
        arms: list[Def | None] = [None] * len(members)
        result_t: Def | None = None
        for arm in e.arms:
            j = arm_member[id(arm)]
            t, leaves, sc = self.pattern_type(arm.pattern, scope, members[j])
            if result_t is None:
                body, result_t = self.infer(arm.body, sc)
                result_t = w.zonk(result_t)
            else:
                body = self.check(arm.body, result_t, sc)
            pi = w.pi(members[j], self.abstract_leaves(result_t, leaves))
            assert isinstance(pi, Pi)
            arms[j] = w.lam(pi, self.abstract_leaves(w.zonk(body), leaves))
        return w.match(w.zonk(u), [a for a in arms if a is not None])

    @staticmethod
    def _declared_type(p: ast.Pattern) -> ast.Expr | None:
        while isinstance(p, ast.PAs):
            p = p.pattern
        return p.type if isinstance(p, ast.PVar) else None

    def infer_RuleType(self, e: ast.RuleType, scope: Scope) -> Def:
        return self.world.app(self.rule_type_former(), self.elab_type(e.meta, scope))

    def force_all(self, decls: Sequence[ast.Decl]) -> None:
        for d in decls:
            if isinstance(d, ast.DeclRec):
                self.force_all(d.decls)  # every member of a group is checked, used or not
                continue
            for lazy in self.decl_lazies.get(id(d), ()):
                self.statement(lambda lazy=lazy: lazy.force())

    def claim_annex(self, annex: str, loc: Loc) -> None:
        """An annex is declared once: a program's `let %core.nat.add = …` silently replaced the
        plugin's operation for every use after it (upstream's World::register_annex asserts the
        name is new)."""
        first: Def | Lazy | None = self.annexes.world.annexes.get(annex)
        if first is None:
            first = self.annexes.pending.get(annex)
        if first is None:
            return
        at = first.loc
        raise NameError_(f"redeclaration of `%{annex}`, an annex already declared", loc,
                         (Related(f"`%{annex}` is first declared here", at),) if at is not None and at.line else ())

    def _remember(self, d: ast.Decl, lazy: Lazy) -> None:
        """The lazies a declaration registered, forced when its block is done (the syntax tree
        is immutable: this map lives here, keyed by the declaration)."""
        self.decl_lazies.setdefault(id(d), []).append(lazy)

    def declare_lam(self, d: ast.DeclLam, scope: Scope) -> None:
        annex = ".".join(d.percent_name) if d.percent_name else \
            (self.annex_name(d.name) if d.anx or self.in_mod else None)
        prefixes = list(self.prefixes)

        def make() -> Def:
            saved, self.prefixes = self.prefixes, prefixes
            try:
                return self.elab_decl_lam(d, scope, annex)
            finally:
                self.prefixes = saved

        lazy = Lazy(d.name, d.loc, make)
        scope.bind(d.name, lazy)
        if annex:
            self.claim_annex(annex, d.loc)
            self.annexes.pending[annex] = lazy
        self._remember(d, lazy)

    def elab_decl_lam(self, d: ast.DeclLam, scope: Scope, annex: str | None) -> Def:
        w = self.world
        immutable = d.kind == "lam" and d.body is not None and not needs_mutable(d.body) \
            and not mentions_name(d.body, d.name) and not d.extern and id(d) not in self.group_members
        if immutable:
            sig = self.signature("lam", d.domains, d.codom, scope, d.loc, body=d.body)
            value = sig.immutable
            value.name = value.name or d.name
        else:
            sig = self.signature(d.kind, d.domains, d.codom, scope, d.loc)
            kind = d.kind if len(d.domains) == 1 else "lam"
            m = w.mut_lam(sig.pi, d.name, kind)
            m.kind = kind
            m.loc = d.loc
            m.doc = d.doc
            m.external = d.extern
            m.annex = annex
            if any(f is not None for f in d.filters):
                one = len(d.filters) == 1 and d.filters[0] is not None
                self.filters[m.gid] = (d.filters[0] if one else ast.BoolLit(d.loc, False),  # type: ignore[arg-type]
                                       tuple(n or "" for n in self.pattern_names(d.domains[0])) if one else ())
            if d.extern:
                w.externals[d.name] = m
            self.define_mut(m, sig, d.body, d.loc, d.kind)
            value = m
        if annex:
            w.register_annex(annex, value, d.doc)
            self.annexes.pending.pop(annex, None)
        return value

    def declare_axm(self, d: ast.DeclAxm, scope: Scope) -> None:
        if not d.percent and not self.prefixes:
            # upstream's grammar: an axiom of a program is an annex `%plugin.name`; a plain name
            # is a plugin file's own (prefixed with the plugin) or a `mod`'s. Reported with the
            # module's other errors (elab_module); the axiom is still checked, as upstream does.
            self.syntax_errors.append(ParseError(f"expected an annex name `%plugin.name` after `axm`, "
                                                 f"found `{'.'.join(d.name)}`", d.name_loc or d.loc))
        base = ".".join(d.name) if d.percent else self.annex_name(".".join(d.name))
        names = [f"{base}.{t}" for t in d.tags] if d.tags else [base]
        # `(tag = alias = …)`: each alias names the same axiom as its tag (upstream's subs).
        aliases = [[f"{base}.{a}" for a in sub] for sub in d.aliases] or [[] for _ in names]
        self.check_tag_names(d, names, aliases)
        prefixes = list(self.prefixes)
        state: dict[str, Def] = {}

        def type_() -> Def:
            if "t" not in state:
                saved, self.prefixes = self.prefixes, prefixes
                try:
                    t = self.statement(lambda: self.elab_type(d.type, scope))
                finally:
                    self.prefixes = saved
                state["t"] = t
            return state["t"]

        for full, also in zip(names, aliases):
            def make(full: str = full, also: list[str] = also) -> Def:
                ax = self.world.axiom(full, type_())  # named by its tag: dumps print that name
                ax.loc = d.loc
                self.world.register_annex(full, ax, d.doc)
                self.annexes.pending.pop(full, None)
                for alias in also:
                    self.world.register_annex(alias, ax)
                    self.annexes.pending.pop(alias, None)
                return ax

            lazy = Lazy(full, d.loc, make)
            for name in (full, *also):
                self.claim_annex(name, d.loc)
                self.annexes.pending[name] = lazy
            if not d.percent and not d.tags and len(d.name) == 1:
                scope.bind(d.name[0], lazy)
            self._remember(d, lazy)

    @staticmethod
    def check_tag_names(d: ast.DeclAxm, names: list[str], aliases: list[list[str]]) -> None:
        """A tag or alias named twice in one `axm` would name two axioms (upstream: a
        redeclaration)."""
        seen: set[str] = set()
        for full in names + [a for sub in aliases for a in sub]:
            if full in seen:
                raise NameError_(f"redeclaration of `%{full}` in the tags of this `axm`", d.loc)
            seen.add(full)

    def declare_let(self, d: ast.DeclLet, scope: Scope) -> None:
        """A `let` among hoisted declarations (top level, `where`, `mod`): lazily elaborated."""
        annex: str | None = None
        if d.percent_name:
            annex = ".".join(d.percent_name)
        elif d.anx or (self.in_mod and isinstance(d.pattern, ast.PVar)):
            if not isinstance(d.pattern, ast.PVar):
                raise TypeError_("`anx let` binds a single name", d.loc)
            annex = self.annex_name(d.pattern.name)
        prefixes = list(self.prefixes)
        state: dict[str, Scope] = {}

        def elaborate() -> Scope:
            if "sc" not in state:
                saved, self.prefixes = self.prefixes, prefixes
                try:
                    sc = scope.child()
                    self.statement(lambda: self.elab_let(d, sc))
                finally:
                    self.prefixes = saved
                state["sc"] = sc
            return state["sc"]

        names = self._pattern_names(d.pattern)
        for nm in names:
            def make(nm: str = nm) -> Def:
                sc = elaborate()
                v = sc.names[nm]
                assert not isinstance(v, Lazy)
                if annex:
                    self.world.register_annex(annex, v, d.doc)
                    self.annexes.pending.pop(annex, None)
                return v

            lazy = Lazy(nm, d.loc, make)
            scope.bind(nm, lazy)
            if annex:
                self.claim_annex(annex, d.loc)
                self.annexes.pending[annex] = lazy
            self._remember(d, lazy)

    def _pattern_names(self, p: ast.Pattern) -> list[str]:
        if isinstance(p, ast.PVar):
            return [] if p.name == "_" else [p.name]
        if isinstance(p, ast.PAs):
            return self._pattern_names(p.pattern) + [p.name]
        assert isinstance(p, ast.PTuple)
        return [n for el in p.elems for n in self._pattern_names(el)]

    def declare_mod(self, d: ast.DeclMod, scope: Scope) -> None:
        # Every member of a `mod` is an annex `P.N.m`, with or without `anx`.
        self.prefixes.append(d.name)
        self.in_mod += 1
        try:
            sc = scope.child()
            self.declare(d.decls, sc)
            for sub in d.decls:
                for lazy in self.decl_lazies.get(id(sub), ()):
                    self._remember(d, lazy)
        finally:
            self.prefixes.pop()
            self.in_mod -= 1

    # ================================================================== modules

    def elab_module(self, module: ast.Module, scope: Scope) -> None:
        self.declare(module.decls, scope)
        # Each top-level declaration is checked on its own, so that independent errors are all
        # reported; a use of a failed declaration re-raises its error (Lazy), reported once.
        errors: list[VerimimError] = self.syntax_errors
        for d in module.decls:
            self._recover(errors, lambda d=d: self.force_all((d,)))
        while self.deferred:
            self._recover(errors, self.deferred.pop(0))
        if errors:
            first = errors[0]
            first.also = errors[1:]  # type: ignore[attr-defined]
            raise first
        self.settle_return_types()

    def _recover(self, errors: list[VerimimError], fn: Callable[[], None]) -> None:
        try:
            fn()
        except VerimimError as e:
            key = (e.code, str(e.loc), e.message)
            if not any(e is x or (x.code, str(x.loc), x.message) == key for x in errors):
                errors.append(e)

    def return_hole(self, loc: Loc) -> Hole:
        """A left-out return type: a metavariable the body (or a use) solves."""
        h = self.world.hole(self.world.star(), "return type")
        h.loc = loc
        self.return_holes.append((h, loc, "the function"))
        return h

    def settle_return_types(self) -> None:
        """Every left-out return type must be solved by now, by a type over at most the
        parameters of the functions whose types hold it (`fun f3 (T: *) (x y: T) = return x`
        returns T); then the mutables' types are final, their own parameters bound."""
        self._settle(list(self.return_holes), everywhere=True)

    def settle_before_use(self, d: Def) -> None:
        """A use of a function whose return type is left out needs that type, over the
        function's own parameters, before it is instantiated: `pick (1I32, argc)` of `fun pick
        {T: *} (a b: T) = return b` returns the I32 its T is here, not the T of pick's body (and
        must not solve pick's return type with this use's type). Its body is elaborated first;
        a use inside that body (recursion) finds it still open and is checked against the hole."""
        if not isinstance(d, MutLam) or not self.return_holes:
            return
        held = _holes_in(d.pi, {h.gid for h, _, _ in self.return_holes})
        if not held:
            return
        self.force_body(d)
        self._settle([entry for entry in self.return_holes if entry[0].gid in held and entry[0].value is not None])

    def _settle(self, entries: list[tuple[Hole, Loc, str]], everywhere: bool = False) -> None:
        """Check the solved return types of `entries` and bind the own parameters of the
        mutables whose types hold them (of every mutable, `everywhere`: the types are final)."""
        if not entries:
            return
        w = self.world
        scopes = Scopes()
        wanted = {h.gid for h, _, _ in entries}
        holders: dict[int, set[MutLam]] = {}  # hole → the mutables whose types hold it
        for m in w.muts:
            for g in _holes_in(m.pi, wanted):
                holders.setdefault(g, set()).add(m)
        for h, loc, _ in entries:
            if h.value is None:
                raise TypeError_("cannot infer the return type; write it: `… (params): T = …`", loc)
            stray = scopes.deps(w.zonk(h)) - holders.get(h.gid, set())
            if stray:
                other = show(w.var(min(stray, key=lambda m: m.gid)))
                raise TypeError_(f"the inferred return type `{show(w.zonk(h))}` depends on `{other}`, "
                                 f"which is not a parameter of the function; write it: `… (params): T = …`", loc)
        for m in (w.muts if everywhere else set().union(*holders.values())):
            pi = w.zonk(m.pi)
            if isinstance(pi, Pi) and m in scopes.deps(pi.codom):
                # its own parameter, solved into its return type: bound by the type's binder
                pi = w.pi(pi.dom, _abstract_var(w, pi.codom, m, scopes), pi.implicit, pi.names)
            m.pi = pi  # type: ignore[assignment]
            m._type = pi  # (type_of reads the type a mutable was made with)
        self.return_holes = [entry for entry in self.return_holes if entry[0].gid not in wanted]

    def force_body(self, m: MutLam) -> None:
        job = self.pending_bodies.get(m.gid)
        if job is not None:
            job()

    def run_deferred(self) -> None:
        while self.deferred:
            job = self.deferred.pop(0)
            job()


def _closed_value(d: Def) -> bool:
    """Whether d mentions no variable (upstream's `%core.pe.is_closed`): no parameter of a
    mutable, of the elaborator, or of an enclosing binder, and no unsolved hole."""
    stack, seen = [d], set()
    while stack:
        x = stack.pop()
        if x.gid in seen:
            continue
        seen.add(x.gid)
        if isinstance(x, (Var, Param, MutLam)) or x.bvd > 0 or (isinstance(x, Hole) and x.value is None):
            return False
        stack.extend(x.ops)
    return True


def _locate_new(root: Def, start: int, loc: Loc) -> None:
    """Give `loc` to the operations (axiom applications) below root made since `start` that have
    no position: what β-reducing a plugin's `anx lam` (`gpu.alloc_copy.asyn`) issued for this
    expression. A diagnostic about one of them (a stream race with the `gpu.alloc.asyn` inside
    the helper) then points at the call, not nowhere. Nodes that have a position stop the walk:
    an inner expression placed them and what they are made of. Only operations: an application
    of a parameter (`scope (m1, m3)` inside `gpu.synced_scope`) is replaced by its callee's body
    when a phase specialises it, and a position on it would move that body's effects there."""
    stack = list(root.ops)
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if x.gid <= start or x.loc is not None or x.mutable or x.gid in seen:
            continue
        seen.add(x.gid)
        if isinstance(x, App) and isinstance(x.head, Axiom):
            x.loc = loc
        stack.extend(x.ops)
