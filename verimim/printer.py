"""Printing IR nodes back as Mim text.

`show` prints one node (types in diagnostics, values in counterexamples); `verimim.dump` uses
the same `ExprPrinter` for whole worlds. What is printed parses back to the identical node:
bound variables get names (from the binder's debug names where the source had them), and
literals carry their type whenever a plain literal would mean something else.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.ir.defs import (
    App, Arr, Axiom, Bot, BVar, Def, Extract, Hole, IdxT, Inject, Insert, Join, Lam, Lit, Match, MutLam,
    NatT, Pack,
    Param, Pi, Sigma, Top, Tuple, TypeU, Univ, Var, mentions,
)

_INT_NAMES = {2: "Bool", 2**8: "I8", 2**16: "I16", 2**32: "I32", 2**64: "I64"}
_INT_SUFFIX = {2**8: "I8", 2**16: "I16", 2**32: "I32", 2**64: "I64"}


class _Binder:
    """A binder in scope while printing: `whole` names its value, `fields` its sigma fields."""

    __slots__ = ("whole", "fields", "dom")

    def __init__(self, whole: str, fields: tuple[str | None, ...] | None) -> None:
        self.whole = whole
        self.fields = fields
        self.dom: Def | None = None  # a λ binder's domain type (what an application of it fills)


def _uses_whole(d: Def, index: int, memo: dict[tuple[int, int], bool] | None = None) -> bool:
    """Whether BVar(index) occurs other than as `BVar(index) # literal`."""
    if d.bvd <= index:
        return False
    if isinstance(d, BVar):
        return d.index == index
    if isinstance(d, Extract) and isinstance(d.tup, BVar) and d.tup.index == index and isinstance(d.index, Lit):
        return False
    if memo is None:
        memo = {}
    key = (d.gid, index)
    if key in memo:
        return memo[key]
    res = any(_uses_whole(op, index + 1 if i in d.binder_ops else index, memo) for i, op in enumerate(d.ops))
    memo[key] = res
    return res


class ExprPrinter:
    def __init__(self, mut_name: Callable[[MutLam], str] | None = None,
                 var_name: Callable[[Var], str | None] | None = None,
                 field_name: Callable[[Var, int], str | None] | None = None,
                 type_of: Callable[[Def], Def] | None = None,
                 path_name: Callable[[Def], str | None] | None = None) -> None:
        self.mut_name = mut_name or (lambda m: m.name or f"_{m.gid}")
        self.path_name = path_name or (lambda d: None)  # a name for `x#i#j` deeper than one field
        self.type_of = type_of
        self.named: dict[int, str] = {}  # nodes printed by a name (parameters, let-bound nodes)
        self.var_name = var_name or (lambda v: None)
        self.field_name = field_name or (lambda v, i: None)
        self.binders: list[_Binder] = []
        self._fresh = 0

    # ------------------------------------------------------------------ names

    def fresh(self, hint: str | None) -> str:
        self._fresh += 1
        base = hint if hint and hint != "_" else "x"
        taken = {b.whole for b in self.binders} | {f for b in self.binders for f in (b.fields or ()) if f}
        name = base
        while name in taken:
            self._fresh += 1
            name = f"{base}_{self._fresh}"
        return name

    def _field_names(self, names: tuple[str | None, ...] | None, n: int) -> tuple[str, ...]:
        out = []
        for j in range(n):
            hint = names[j] if names and j < len(names) else None
            out.append(self.fresh(hint or f"x{j}"))
        return tuple(out)

    # ------------------------------------------------------------------ entry points

    def show(self, d: Def) -> str:
        return self.expr(d)

    def expr(self, d: Def) -> str:
        """An expression at the loosest level (arrows allowed)."""
        hit = self.named.get(d.gid)
        if hit is not None:
            return hit
        if isinstance(d, Pi):
            return self.pi(d)
        if isinstance(d, Lam):
            return self.lam(d)
        if isinstance(d, Inject):
            return f"{self.app_level(d.ops[0])} inj {self.app_level(d.ops[1])}"
        if isinstance(d, Match):
            return self.match(d)
        return self.app_level(d)

    def match(self, d: Match) -> str:
        """`match u with | x: T => (arm) x | …`: each arm applied to its bound variable, which
        re-elaborates (by β-reduction) to the same arm."""
        arms = []
        for j, arm in enumerate(d.ops[1:]):
            t = arm.pi.dom if isinstance(arm, Lam) else None
            x = self.fresh(f"m{j}")
            ty = f": {self.expr(t)}" if t is not None else ""
            arms.append(f"| {x}{ty} => ({self.expr(arm)}) {x}")
        return f"(match {self.expr(d.ops[0])} with {' '.join(arms)})"

    def app_level(self, d: Def) -> str:
        hit = self.named.get(d.gid)
        if hit is not None:
            return hit
        if isinstance(d, App):
            sep = " @" if self._implicit_callee(d.callee) else " "
            return f"{self.app_level(d.callee)}{sep}{self.atom(d.arg)}"
        if isinstance(d, IdxT):
            named = _INT_NAMES.get(d.size.value) if isinstance(d.size, Lit) else None
            return named if named else f"Idx {self.atom(d.size)}"
        if isinstance(d, TypeU) and d.level > 1:
            return f"Type {d.level}"
        if isinstance(d, Pi) and self._is_cn(d):
            return f"Cn {self.atom(d.dom)}"
        if isinstance(d, Insert):
            return f"ins ({self.expr(d.ops[0])}, {self.expr(d.ops[1])}, {self.expr(d.ops[2])})"
        return self.postfix(d)

    def _implicit_callee(self, callee: Def) -> bool:
        """Whether an argument fills an implicit domain (printed with `@` to parse back)."""
        bound = self._bound_type(callee)
        if bound is not None:  # a λ's parameter (`f: {T: *} → T → T` called `f @I32 x`)
            return isinstance(bound, Pi) and bound.implicit
        if callee.bvd or callee.has_hole:
            return False
        if self.type_of is None:
            t = callee._type  # the type, where it has been computed already
            if t is None:
                return _axiom_curry_implicit(callee)
        else:
            try:
                t = self.type_of(callee)
            except Exception:
                return False
        return isinstance(t, Pi) and t.implicit

    def _bound_type(self, d: Def) -> Def | None:
        """The type of a λ's parameter, or of a field of it, where the printer holds its binder."""
        field = None
        if isinstance(d, Extract) and isinstance(d.index, Lit) and isinstance(d.tup, BVar):
            d, field = d.tup, d.index.value
        if not isinstance(d, BVar) or d.index >= len(self.binders):
            return None
        dom = self.binders[-1 - d.index].dom
        if field is None or dom is None:
            return dom
        return dom.ops[field] if isinstance(dom, Sigma) and field < len(dom.ops) else None

    def postfix(self, d: Def) -> str:
        hit = self.named.get(d.gid)
        if hit is not None:
            return hit
        if isinstance(d, Extract):
            field = self._extract_name(d)
            if field is not None:
                return field
            if isinstance(d.index, Lit):
                return f"{self.postfix(d.tup)}#{self.index_lit(d.index)}"
            return f"{self.postfix(d.tup)}#{self.atom(d.index)}"
        return self.atom(d)

    def atom(self, d: Def) -> str:
        hit = self.named.get(d.gid)
        if hit is not None:
            return hit
        if isinstance(d, Extract):
            field = self._extract_name(d)
            if field is not None:
                return field
        if isinstance(d, Hole):
            return self.atom(d.value) if d.value is not None else f"?{d.hint.split(' ')[0]}"
        if isinstance(d, Univ):
            return "Univ"
        if isinstance(d, TypeU):
            return {0: "*", 1: "□"}.get(d.level, f"(Type {d.level})")
        if isinstance(d, NatT):
            return "Nat"
        if isinstance(d, IdxT) and isinstance(d.size, Lit) and d.size.value in _INT_NAMES:
            return _INT_NAMES[d.size.value]
        if isinstance(d, Lit):
            return self.lit(d)
        if isinstance(d, (Top, Bot)):
            sym = "⊤" if isinstance(d, Top) else "⊥"
            return f"{sym}:{self.atom(d.ops[0])}"
        if isinstance(d, Axiom):
            # A C function (`ccon`/`cfun`, the axiom `c.NAME`: verimim.plug.c_lib) is named as declared.
            # A recursive definition (`rec N = … N …`, the constant `rec.N`) by its name too.
            for prefix in ("c.", "rec."):
                if d.annex.startswith(prefix):
                    return d.annex[len(prefix):]
            return d.annex
        if isinstance(d, MutLam):
            return self.mut_name(d)
        if isinstance(d, Param):
            return d.name or f"_p{d.gid}"
        if isinstance(d, BVar):
            return self._bvar(d.index)
        if isinstance(d, Var):
            return self.var_name(d) or f"{self.mut_name(d.mut)}_var"
        if isinstance(d, Tuple):
            return "(" + ", ".join(self.expr(e) for e in d.ops) + ")"
        if isinstance(d, Join):
            return "(" + " ∪ ".join(self.postfix(m) for m in d.ops) + ")"
        if isinstance(d, Sigma):
            return self.sigma(d)
        if isinstance(d, Arr):
            return self.arr_pack(d, "«", "»")
        if isinstance(d, Pack):
            return self.arr_pack(d, "‹", "›")
        return f"({self.expr(d)})"

    # ------------------------------------------------------------------ pieces

    def lit(self, d: Lit) -> str:
        t = d.ops[0]
        if isinstance(t, NatT):
            return str(d.value)
        if isinstance(t, IdxT) and isinstance(t.size, Lit):
            n = t.size.value
            if n == 2:
                return "tt" if d.value else "ff"
            suffix = _INT_SUFFIX.get(n)
            if suffix:
                return f"{d.value}{suffix}"
            return f"{d.value}_{n}"
        return f"({d.value}:{self.atom(t)})"

    def index_lit(self, d: Lit) -> str:
        """An extract's literal index, always with its size (`x#1_2`): a plain `1` is a `Nat`."""
        t = d.ops[0]
        if isinstance(t, IdxT) and isinstance(t.size, Lit):
            return f"{d.value}_{t.size.value}"
        return self.lit(d)

    def _bvar(self, index: int) -> str:
        if index >= len(self.binders):
            return f"_free{index}"
        return self.binders[-1 - index].whole

    def _extract_name(self, d: Extract) -> str | None:
        if not isinstance(d.index, Lit):
            return None
        j = d.index.value
        if isinstance(d.tup, BVar) and d.tup.index < len(self.binders):
            fields = self.binders[-1 - d.tup.index].fields
            if fields and j < len(fields):
                return fields[j]
        if isinstance(d.tup, Var):
            name = self.field_name(d.tup, j)
            if name is not None:
                return name
        return self.path_name(d)

    def _is_cn(self, d: Pi) -> bool:
        return isinstance(d.codom, Bot) and isinstance(d.codom.ops[0], TypeU) and d.codom.ops[0].level == 0

    def _binder_header(self, dom: Def, body: Def, names: tuple[str | None, ...] | None,
                       hint: str | None = None) -> tuple[str, _Binder]:
        """How to write a binder's domain (`[a: A, b: B]`, `[x: D]` or just `D`) and its names."""
        if isinstance(dom, Sigma) and not _uses_whole(body, 0) and len(dom.ops) > 1:
            fields = self._field_names(names, len(dom.ops))
            return self.sigma(dom, fields), _Binder(self.fresh("_"), fields)
        whole = self.fresh(hint or (names[0] if names and len(names) == 1 else None))
        return f"[{whole}: {self.expr(dom)}]", _Binder(whole, None)

    def pi(self, d: Pi) -> str:
        if self._is_cn(d):
            return f"Cn {self.atom(d.dom)}"
        if not mentions(d.codom, 0) and not d.implicit:
            self.binders.append(_Binder("_", None))
            try:
                codom = self.expr(d.codom)
            finally:
                self.binders.pop()
            return f"{self.app_level(d.dom) if not isinstance(d.dom, Pi) else '(' + self.expr(d.dom) + ')'} → {codom}"
        header, binder = self._binder_header(d.dom, d.codom, d.names)
        if d.implicit:
            header = "{" + header[1:-1] + "}"
        self.binders.append(binder)
        try:
            codom = self.expr(d.codom)
        finally:
            self.binders.pop()
        return f"{header} → {codom}"

    def lam(self, d: Lam) -> str:
        pi = d.pi
        header, binder = self._binder_header(pi.dom, d.body, pi.names)
        if pi.implicit:
            header = "{" + header[1:-1] + "}"
        else:
            header = "(" + header[1:-1] + ")"
        binder.dom = pi.dom
        self.binders.append(binder)
        try:
            codom = self.expr(pi.codom)
            body = self.expr(d.body)
        finally:
            self.binders.pop()
        return f"lm {header}: {codom} = {body}"

    def sigma(self, d: Sigma, fields: tuple[str, ...] | None = None) -> str:
        if not d.ops:
            return "[]"
        dependent = fields is not None or any(_mentions0(f) for f in d.ops)
        if dependent and fields is None:
            fields = self._field_names(d.names, len(d.ops))
        binder = _Binder(self.fresh("_s"), fields)
        self.binders.append(binder)
        try:
            parts = []
            for j, f in enumerate(d.ops):
                text = self.expr(f)
                parts.append(f"{fields[j]}: {text}" if fields else text)
        finally:
            self.binders.pop()
        return "[" + ", ".join(parts) + "]"

    def arr_pack(self, d: Arr | Pack, open_: str, close: str) -> str:
        shape = self.expr(d.shape)
        if _mentions0(d.body):
            name = self.fresh(d.index_name or "i")
            self.binders.append(_Binder(name, None))
            try:
                return f"{open_}{name}: {shape}; {self.expr(d.body)}{close}"
            finally:
                self.binders.pop()
        self.binders.append(_Binder("_", None))
        try:
            return f"{open_}{shape}; {self.expr(d.body)}{close}"
        finally:
            self.binders.pop()


def _mentions0(d: Def) -> bool:
    return mentions(d, 0)


def source_name(d: Def) -> str | None:
    """The name the source gave a parameter or one of its fields (`argc` for `main`'s
    `main_var#0#1`), where the mutable kept its parameters' names; None otherwise."""
    path: list[int] = []
    while isinstance(d, Extract) and isinstance(d.index, Lit):
        path.append(d.index.value)
        d = d.tup
    if not isinstance(d, Var):
        return None
    path.reverse()
    m, names = d.mut, d.mut.param_names
    dom = m.pi.dom
    if m.kind == "fun" and isinstance(dom, Sigma) and len(dom.ops) == 2 and isinstance(dom.ops[1], Pi):
        # a `fun`'s parameter is (its arguments, its return continuation)
        if path == [1]:
            return "return"
        if not path or path[0] != 0:
            return None
        path, dom = path[1:], dom.ops[0]
    if not names:
        return None
    if not path:
        return names[0] if len(names) == 1 else None
    if len(path) == 1 and isinstance(dom, Sigma) and len(names) == len(dom.ops) and path[0] < len(names):
        return names[path[0]]
    return None


def show(d: Def) -> str:
    """One node as Mim text (for diagnostics and repr): parameters by their source names, and
    its operands that a `let` bound by that name (`m4` for `(gpu.init m0)#2`); d itself in full."""
    p = ExprPrinter(var_name=source_name, path_name=source_name)
    stack, seen = list(d.ops), {d.gid}
    while stack:
        x = stack.pop()
        if x.gid in seen:
            continue
        seen.add(x.gid)
        if x.let_name is not None and x.bvd == 0:
            p.named[x.gid] = x.let_name
            continue
        if not isinstance(x, MutLam):
            stack.extend(x.ops)
    return p.show(d)


def _axiom_curry_implicit(callee: Def) -> bool:
    """Whether the next argument of an axiom applied to some arguments (`core.bitcast @I32 Nat`)
    fills an implicit domain, read off the axiom's type without computing any: the implicit flag
    is the structure of its curried Π, whatever the arguments (a diagnostic printed
    `core.bitcast I32 Nat argc`, which does not parse back)."""
    head, depth = (callee.head, callee.depth) if isinstance(callee, App) else (callee, 0)
    if not isinstance(head, Axiom):
        return False
    t = head.ops[0]
    for _ in range(depth):
        if not isinstance(t, Pi):
            return False
        t = t.codom
    return isinstance(t, Pi) and t.implicit
