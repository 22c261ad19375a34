"""`verimim dump`: a World printed back as Mim (or as a Graphviz graph).

The printed text parses back to the same World: declarations keep their names, continuations
that capture another's parameters are printed nested in its `where` block, and every node that
is shared or has an effect (its type holds a `mem.M`) is bound once with a `let`, in dependency
order, so that printing a DAG never duplicates work.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import cast

from verimim.ir.analysis import apps_with_head, free_muts, innermost, scan_mut as _scan, vars_of
from verimim.ir.defs import App, Axiom, Def, Extract, Lam, Lit, MutLam, Pi, Sigma, Var
from verimim.ir.world import RuleDef, World
from verimim.printer import ExprPrinter
from verimim.syntax import ast
from verimim.frontend.loader import Unit
from verimim.frontend.scope import Lazy
from verimim.ir.schedule import postorder

INDENT = "    "


PRINT_DEPTH = 48  # operations nested in one printed expression before a `let` cuts it


class Dumper:
    def __init__(self, world: World) -> None:
        self.world = world
        self.fv_cache: dict[int, frozenset[MutLam]] = {}
        self.mut_names: dict[int, str] = {}
        self.used_names: set[str] = set()
        self._outer_return: dict[int, bool] = {}  # (_uses_an_outer_return, once per mutable)
        self._returns: set[int] = set()  # the continuations printed as `return`
        self.children: dict[int, list[MutLam]] = {}
        self.let_counter = 0
        # `lam`s that something in the printed program calls (Dumper.plan): printed with `@ff`
        self.called_lams: set[int] = set()
        self.printer = ExprPrinter(mut_name=self.mut_name, type_of=world.type_of)
        self.named = self.printer.named  # Def gid → name (parameters and let-bound nodes)

    # ------------------------------------------------------------------ names

    def unique(self, base: str) -> str:
        name = base
        k = 0
        while name in self.used_names or name in _KEYWORDS:
            k += 1
            name = f"{base}_{k}"
        self.used_names.add(name)
        return name

    def mut_name(self, m: MutLam) -> str:
        if m.annex:
            return m.annex
        hit = self.mut_names.get(m.gid)
        if hit is None:
            hit = self.unique(m.name or "k")
            self.mut_names[m.gid] = hit
        return hit

    # ------------------------------------------------------------------ structure

    def plan(self, roots: list[MutLam]) -> list[MutLam]:
        """Assign every reachable non-annex mutable to its parent; returns the top-level ones
        not among `roots` (continuations that capture nothing)."""
        seen: set[int] = set()
        extra_top: list[MutLam] = []
        stack = list(roots)
        root_ids = {r.gid for r in roots}
        while stack:
            m = stack.pop()
            if m.gid in seen:
                continue
            seen.add(m.gid)
            self.called_lams |= _lam_callees(m)
            _, muts = _scan(m)
            stack.extend(sorted(muts, key=lambda x: x.gid))
            if m.gid in root_ids:
                continue
            # A curried mutable's type may use an outer one's parameter (`con f {A: *} (x: A)`):
            # that makes it as local as a use in its body does.
            fv = free_muts(m, self.fv_cache) | _vars_in_type(m)
            if not fv:
                extra_top.append(m)
                continue
            self.children.setdefault(self._parent(fv).gid, []).append(m)
        for lst in self.children.values():
            lst.sort(key=lambda x: x.gid)
        return sorted(extra_top, key=lambda x: x.gid)

    def _parent(self, fv: frozenset[MutLam]) -> MutLam:
        """Where a mutable using the parameters of `fv` is printed: the one of them whose own
        free mutables hold all the others (the innermost scope: inside it, every parameter
        used is in scope); else the one with the most free mutables. (That count alone once
        put `after_depth`, using the parameters of `after_atoi` and of `joined`, beside
        `after_atoi` in `joined`: both have two free mutables, and `v` was out of scope.)"""
        def depth(o: MutLam) -> tuple[int, int]:
            return len(free_muts(o, self.fv_cache)), o.gid

        inner = innermost(fv, lambda o: free_muts(o, self.fv_cache))
        return max(inner or fv, key=depth)

    # ------------------------------------------------------------------ printing mutables

    def bind_params(self, m: MutLam) -> str:
        """Name m's parameter (and its fields) and return the printed domain."""
        w = self.world
        dom = m.pi.dom
        var = w.var(m)
        if m.kind == "fun" and self._fun_shape(m):
            assert isinstance(dom, Sigma)
            args_t = w.shift(dom.ops[0], -1)
            args = w.extract_n(var, 2, 0)
            ret = w.extract_n(var, 2, 1)
            self.named[ret.gid] = "return"
            self._returns.add(ret.gid)
            return self._domain(args, args_t, m.param_names)
        return self._domain(var, dom, m.param_names)

    def _fun_shape(self, m: MutLam) -> bool:
        dom = m.pi.dom
        return isinstance(dom, Sigma) and len(dom.ops) == 2 and not dom.dependent \
            and self.world.is_cn(self.world.shift(dom.ops[1], -1)) and not self._uses_an_outer_return(m)

    def _uses_an_outer_return(self, m: MutLam) -> bool:
        """Whether m's body (or a body nested in it) uses a continuation an enclosing declaration
        printed as `return`: printed as a `fun`, m's own `return` would shadow it (a kernel's
        `return` that a nested function jumps to became that function's own). Such an m is
        printed as a `con` with its continuation named apart."""
        hit = self._outer_return.get(m.gid)
        if hit is not None:
            return hit
        outer = self._returns
        found = False
        if outer:
            # m's body and the bodies printed inside m's (its `where` blocks'): another mutable's
            # body uses its own `return`, printed in its own scope
            inside = {m.gid}
            kids = list(self.children.get(m.gid, []))
            while kids:
                k = kids.pop()
                if k.gid not in inside:
                    inside.add(k.gid)
                    kids.extend(self.children.get(k.gid, []))
            seen: set[int] = set()
            stack: list[Def] = [m.body] if m.body is not None else []
            while stack and not found:
                d = stack.pop()
                if d.gid in seen:
                    continue
                seen.add(d.gid)
                if d.gid in outer:
                    found = True
                elif isinstance(d, MutLam):
                    if d.gid in inside and d.body is not None:
                        stack.append(d.body)
                else:
                    stack.extend(d.ops)
        self._outer_return[m.gid] = found
        return found

    def _domain(self, value: Def, t: Def, hint: tuple[str | None, ...] | None) -> str:
        w = self.world
        if isinstance(t, Sigma) and t.ops:
            n = len(t.ops)
            names = hint if hint and len(hint) == n else (t.names or ())
            parts = []
            binder_names = []
            for j, f in enumerate(t.ops):
                base = cast(str, names[j]) if j < len(names) and names[j] and names[j] != "_" else f"x{j}"
                nm = self.unique(base)
                binder_names.append(nm)
                field = w.extract_n(value, n, j)
                self.named[field.gid] = nm
                if nm == "return":
                    self._returns.add(field.gid)
            # the whole parameter, where the body uses it as a whole (`k t` for `t: [A, B]`): the
            # tuple of its fields (it had no name, and printed as `f_var#0_2`, unbound)
            self.named.setdefault(value.gid, "(" + ", ".join(binder_names) + ")")
            # Field types may mention earlier fields (dependent sigma): print them with the
            # sigma's own binder named by those fields.
            from verimim.printer import _Binder

            self.printer.binders.append(_Binder(self.unique("_self"), tuple(binder_names)))
            try:
                for j, f in enumerate(t.ops):
                    parts.append(f"{binder_names[j]}: {self.printer.expr(f)}")
            finally:
                self.printer.binders.pop()
            return "(" + ", ".join(parts) + ")"
        nm = self.unique(hint[0] if hint and len(hint) == 1 and hint[0] and hint[0] != "_" else "x")
        self.named[value.gid] = nm
        if nm == "return":
            self._returns.add(value.gid)
        return f"({nm}: {self.printer.expr(t)})"

    def curried_chain(self, m: MutLam) -> list[MutLam]:
        """m and the mutables a curried declaration made of it: a `lam` whose body is exactly
        its own nested mutable (`con f {A: *} (n: Nat) (k: Cn A) = …` is four mutables)."""
        chain = [m]
        while True:
            cur = chain[-1]
            nxt = cur.body
            # (a curried `cn (T: *) (…) = …` makes a `con` whose type returns the inner one)
            if not (not self.world.is_cn(cur.pi) and isinstance(nxt, MutLam) and not nxt.annex and not nxt.external
                    and nxt in self.children.get(cur.gid, [])):
                return chain
            chain.append(nxt)

    def print_mut(self, m: MutLam, depth: int, keyword: str | None = None) -> list[str]:
        pad = INDENT * depth
        lines: list[str] = []
        if m.doc:
            lines += [f"{pad}/// {ln}".rstrip() for ln in m.doc.split("\n")]
        name = self.mut_name(m)
        chain = self.curried_chain(m) if keyword is None else [m]
        doms: list[str] = []
        for x in chain:
            dom = self.bind_params(x)
            if x.pi.implicit and dom.startswith("(") and dom.endswith(")"):
                dom = "{" + dom[1:-1] + "}"
            doms.append(dom)
        last = chain[-1]
        kind = keyword or (last.kind if last.kind in ("con", "fun", "lam") else "con")
        if kind == "fun" and not self._fun_shape(last):
            kind = "con" if self.world.is_cn(last.pi) else "lam"
        if kind == "con" and not self.world.is_cn(last.pi):
            kind = "lam"
        ext = " extern" if m.external else ""
        head = f"{pad}{kind}{ext} {name} {' '.join(doms)}"
        w = self.world
        if kind == "fun":
            dom_t = last.pi.dom
            assert isinstance(dom_t, Sigma)
            r = w.open(dom_t.ops[1], w.var(last))
            assert isinstance(r, Pi)
            head += f": {self.printer.expr(r.dom)}"
        elif kind == "lam":
            if m.gid in self.called_lams and not m.external and m.body is not None:
                # The front end unfolds a call of a `lam` whose filter holds (none: `tt`) where it
                # is built. A call this World still holds is a call (its filter did not hold, or a
                # phase made it, e.g. inlining a literal into it): read back without a filter it
                # would be unfolded, another program (a recursion that ran for ever as a call
                # ended). `@ff` keeps it a call.
                head += " @ff"
            head += f": {self.printer.expr(w.open(last.pi.codom, w.var(last)))}"
        if last.body is None:
            return lines + [head + ";"]
        # Names bound by this body's lets are visible in its `where` block only: forget them after.
        before = set(self.named)
        body_lines = self.print_body(last.body, depth + 1)
        lines.append(head + " =")
        lines += body_lines
        kids = [k for x in chain for k in self.children.get(x.gid, []) if k not in chain]
        if kids:
            lines.append(f"{pad}{INDENT}where")
            for k in kids:
                lines += self.print_mut(k, depth + 2)
            lines.append(f"{pad}{INDENT}end;")
        else:
            lines[-1] += ";"
        for gid in set(self.named) - before:
            del self.named[gid]
        return lines

    def print_body(self, body: Def, depth: int) -> list[str]:
        pad = INDENT * depth
        lets = self.lets_of(body)
        lines = []
        for d in lets:
            text = self.printer.expr(d)
            nm = self.unique(f"_{self.let_counter}")
            self.let_counter += 1
            lines.append(f"{pad}let {nm} = {text};")
            self.named[d.gid] = nm
        lines.append(f"{pad}{self.printer.expr(body)}")
        return lines

    def lets_of(self, body: Def) -> list[Def]:
        """Nodes of a body to bind with `let`, dependencies first: those used more than once
        and those with an effect, excluding what is already named or trivially small."""
        uses: Counter[int] = Counter()
        nodes: dict[int, Def] = {}
        stack: list[Def] = [body]
        while stack:
            d = stack.pop()
            uses[d.gid] += 1
            if d.gid in nodes:
                continue
            nodes[d.gid] = d
            if self._opaque(d):
                continue
            stack.extend(d.ops)
        chosen = {gid for gid, d in nodes.items() if d is not body and self._bindable(d)
                  and (uses[gid] > 1 or self._effectful(d))}
        order = postorder(body, lambda d: False, lambda d: () if self._opaque(d) else d.ops)
        # An expression nested deeper than PRINT_DEPTH (a chain of 20,000 `let`s, each used once)
        # is cut by a `let` there: the text stays readable, and printing it recurses no deeper.
        nesting: dict[int, int] = {}
        for d in order:
            k = 0 if self._opaque(d) else 1 + max((nesting[op.gid] for op in d.ops if op.gid in nesting
                                                   and op.gid not in chosen), default=0)
            if k > PRINT_DEPTH and d is not body and self._bindable(d):
                chosen.add(d.gid)
                k = 0
            nesting[d.gid] = k
        return [d for d in order if d.gid in chosen]

    def _opaque(self, d: Def) -> bool:
        return d.gid in self.named or isinstance(d, (MutLam, Var, Axiom, Lit, Lam)) or d.bvd > 0

    def _bindable(self, d: Def) -> bool:
        if d.gid in self.named or d.bvd > 0 or d.mutable:
            return False
        if isinstance(d, Extract) and (isinstance(d.tup, Var) or d.tup.gid in self.named):
            return False
        if isinstance(d, App):
            from verimim.ir.defs import Pi

            try:
                if isinstance(self.world.type_of(d), Pi):
                    return False  # a partial application: printed where it is applied
            except Exception:
                return False
        return isinstance(d, (App, Extract)) and not self._is_type(d)

    def _is_type(self, d: Def) -> bool:
        try:
            from verimim.ir.defs import TypeU, Univ

            return isinstance(self.world.type_of(d), (TypeU, Univ))
        except Exception:
            return False

    def _effectful(self, d: Def) -> bool:
        if not isinstance(d, App):
            return False
        try:
            t = self.world.type_of(d)
        except Exception:
            return False
        return _mentions_mem(t)


def _vars_in_type(m: MutLam) -> frozenset[MutLam]:
    """The mutables whose parameters m's own type mentions (other than m)."""
    return frozenset(v.mut for v in vars_of(m.pi) if v.mut is not m)


def _lam_callees(m: MutLam) -> set[int]:
    """The `lam` mutables m's body applies (`f a`, as the front end's partial evaluation sees a
    call: the callee itself a mutable; not looking inside other mutables)."""
    out: set[int] = set()
    if m.body is None:
        return out
    seen: set[int] = set()
    stack: list[Def] = [m.body]
    while stack:
        d = stack.pop()
        if d.gid in seen or isinstance(d, (MutLam, Var)):
            continue
        seen.add(d.gid)
        if isinstance(d, App) and isinstance(d.callee, MutLam) and d.callee.kind == "lam":
            out.add(d.callee.gid)
        stack.extend(d.ops)
    return out


def _mentions_mem(t: Def) -> bool:
    return bool(apps_with_head(t, "mem.M"))


_KEYWORDS = set("""Bool Cn Fn I1 I8 I16 I32 I64 Idx Nat Type Univ and anx as axm cn con end extern ff
fn fun i1 i8 i16 i32 i64 import ins lam let lm mod plugin pub rec ret tt where top bot""".split())


def _unit_decls(unit: Unit) -> Iterator[tuple[ast.Decl, str, Def]]:
    """Top-level declarations of a unit with the value each name denotes."""
    for pos, d in enumerate(unit.module.decls):
        yield from _decl_values(d, unit, pos)


def _decl_values(d: ast.Decl, unit: Unit, pos: int) -> Iterator[tuple[ast.Decl, str, Def]]:
    if isinstance(d, ast.DeclRec):
        for sub in d.decls:
            yield from _decl_values(sub, unit, pos)
        return
    names: list[str] = []
    if isinstance(d, ast.DeclLam):
        names = [d.name]
    elif isinstance(d, ast.DeclLet) and isinstance(d.pattern, ast.PVar):
        names = [d.pattern.name]
    for nm in names:
        entry = unit.scope.binding_at(nm, pos)  # a rebound `let a`: this declaration's binding
        if entry is None:
            continue
        v = entry.force() if isinstance(entry, Lazy) else entry
        yield d, nm, v


def c_declarations(dumper: Dumper, roots: list[MutLam]) -> list[str]:
    """`ccon NAME [D];` for every C function (the axiom `c.NAME : Cn D`, verimim.plug.c_lib)
    that the mutables below `roots` call: `cfun NAME [A]: R` is `Cn [A, Cn R]`, the same type."""
    found: dict[str, Axiom] = {}
    seen: set[int] = set()
    stack: list[Def] = list(roots)
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, MutLam):
            if d.body is not None and not d.annex:
                stack.append(d.body)
        elif isinstance(d, Axiom):
            if d.annex.startswith("c."):
                found[d.annex[2:]] = d
        else:
            stack.extend(d.ops)
    out = []
    for name in sorted(found):
        pi = found[name].ops[0]
        dom = dumper.printer.expr(pi.ops[0]) if isinstance(pi, Pi) else "[]"
        out.append(f"ccon {name} {dom if dom.startswith('[') else f'[{dom}]'};")
    return out


def axiom_declarations(dumper: Dumper, world: World, unit: Unit) -> list[str]:
    """The file's own axioms (`axm %p.n: T;`, one per tag) and recursive definitions
    (`rec N: T = e;`), in declaration order: what the rest of the dump refers to by name."""
    out: list[str] = []
    recs: list[str] = []
    at = 0
    for d in _flat_decls(unit.module.decls):
        if isinstance(d, ast.DeclAxm):
            base = ".".join(d.name)
            for full in [f"{base}.{t}" for t in d.tags] if d.tags else [base]:
                ax = world.annexes.get(full)
                if ax is None:
                    continue
                out.append(f"axm %{full}: {dumper.printer.expr(world.type_of(ax))};")
        elif isinstance(d, ast.DeclRule):
            entry = unit.scope.names.get(d.name)
            v = entry.value if isinstance(entry, Lazy) else entry
            if isinstance(v, Axiom) and v in world.rule_defs:
                out.append(_rule_text(dumper, world.rule_defs[v]))
                dumper.named[v.gid] = d.name
        elif isinstance(d, ast.DeclRecVal):
            entry = unit.scope.names.get(d.name)
            v = entry.value if isinstance(entry, Lazy) else entry
            if isinstance(v, Axiom) and v in world.rec_defs:
                name = dumper.printer.expr(v)
                spelled = f"%{name}" if "." in name else name
                recs.append(f"{spelled}: {dumper.printer.expr(world.type_of(v))} = "
                            f"{dumper.printer.expr(world.rec_defs[v])}")
                if len(recs) == 1:
                    at = len(out)  # where the group goes: at the first recursive definition
    if recs:
        # One `rec … and …` group: a definition may name one after it (`rec A = [I32, Ptr0 B]
        # and B = [I8, Ptr0 A]`), which only a group's members see while they are defined.
        out.insert(at, "rec " + "\nand ".join(recs) + ";")
    return out


def _rule_text(dumper: Dumper, r: RuleDef) -> str:
    """`rule N (p: T) : lhs (when g)? => rhs;` — the sides printed under the meta binder."""
    pr = dumper.printer
    header, binder = pr._binder_header(r.meta_type, r.lhs, r.meta_names)
    pr.binders.append(binder)
    try:
        lhs, rhs = pr.expr(r.lhs), pr.expr(r.rhs)
        guard = f" when {pr.expr(r.guard)}" if r.guard is not None else ""
    finally:
        pr.binders.pop()
    return f"{'norm' if r.norm else 'rule'} {r.name} ({header[1:-1]}) : {lhs}{guard} => {rhs};"


def _flat_decls(decls: tuple[ast.Decl, ...]) -> Iterator[ast.Decl]:
    for d in decls:
        if isinstance(d, ast.DeclRec):
            yield from d.decls
        else:
            yield d


def dump_unit(world: World, unit: Unit) -> str:
    dumper = Dumper(world)
    out: list[str] = []
    for imp in unit.module.imports:
        out.append(f"{imp.kind} {imp.name};")
    if out:
        out.append("")
    axioms = axiom_declarations(dumper, world, unit)
    out += axioms + ([""] if axioms else [])
    decls = list(_unit_decls(unit))
    roots = [v for _, _, v in decls if isinstance(v, MutLam)]
    c_decls = c_declarations(dumper, roots)
    out += c_decls + ([""] if c_decls else [])
    # A mutable is printed once, under its first top-level name; another name for it (`let g = f;`)
    # is printed as that alias (printing the mutable again named it twice: a redeclaration).
    aliases: set[int] = set()
    for d, nm, v in decls:
        if isinstance(v, MutLam):
            if v.gid in dumper.mut_names:
                aliases.add(id(d))
                continue
            dumper.mut_names[v.gid] = dumper.unique(nm)
    extra_top = dumper.plan(roots)
    for m in extra_top:
        out += dumper.print_mut(m, 0) + [""]
    later_members = {id(m) for g in unit.module.decls if isinstance(g, ast.DeclRec) for m in g.decls[1:]}
    for d, nm, v in decls:
        if isinstance(v, MutLam) and id(d) in aliases:
            out += [f"let {dumper.unique(nm)} = {dumper.mut_names[v.gid]};", ""]
            continue
        if isinstance(v, MutLam):
            lines = dumper.print_mut(v, 0)
            if id(d) in later_members and lines:
                # A member of a mutually recursive group is printed as one: `… and lam g …`.
                while out and out[-1] == "":
                    out.pop()
                lines[0] = "and " + lines[0]
            out += lines + [""]
            continue
        if d.doc:
            out += [f"/// {ln}".rstrip() for ln in d.doc.split("\n")]
        name = dumper.unique(nm)
        out.append(f"let {name} = {dumper.printer.expr(v)};")
        dumper.named.setdefault(v.gid, name) if not isinstance(v, (Lit,)) else None
        out.append("")
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def dump_dot(world: World, unit: Unit) -> str:
    """A Graphviz digraph of the unit's mutables and the nodes of their bodies."""
    return _dot([(Dumper(world), [v for _, _, v in _unit_decls(unit)])])


def dump_dot_worlds(worlds: list[World]) -> str:
    """The same of Worlds a pipeline made (`dump --dot --after PHASE`): their externals and
    what they reach (node ids are unique across Worlds)."""
    return _dot([(Dumper(w), [m for _, m in sorted(w.externals.items())]) for w in worlds])


def _dot(parts: list[tuple[Dumper, list[Def]]]) -> str:
    lines = ["digraph verimim {", '  node [shape=box, fontname="monospace"];']
    seen: set[int] = set()
    for dumper, roots in parts:
        _dot_nodes(dumper, roots, seen, lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_nodes(dumper: Dumper, roots: list[Def], seen: set[int], lines: list[str]) -> None:
    stack: list[Def] = list(roots)
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, MutLam):
            label = f"{d.kind} {dumper.mut_name(d)}"
            ops = [d.body] if d.body is not None and not d.annex else []
        else:
            label = _dot_label(dumper, d)
            ops = [] if isinstance(d, Axiom) else list(d.ops)
        shape = ', shape=ellipse' if isinstance(d, MutLam) else ""
        lines.append(f'  n{d.gid} [label="{_esc(label)}"{shape}];')
        for i, op in enumerate(ops):
            lines.append(f'  n{d.gid} -> n{op.gid} [label="{i}"];')
            stack.append(op)


def _dot_label(dumper: Dumper, d: Def) -> str:
    kind = type(d).__name__
    if isinstance(d, (Lit, Axiom, Var)):
        try:
            return f"{kind}: {dumper.printer.expr(d)}"
        except Exception:
            return kind
    return kind


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def dump_world(world: World, header: list[str]) -> str:
    """A whole World (after a phase): its externals and what they reach."""
    return dump_worlds([world], header)


def _defined_before(dumper: Dumper, m: MutLam, before: dict[str, str]) -> bool:
    """Whether m is only declared in this World and defined by a World printed before: then it
    is printed there, and here it takes the name it has there."""
    if m.body is not None or (m.name or "main") not in before:
        return False
    dumper.mut_names[m.gid] = before[m.name or "main"]
    return True


def dump_worlds(worlds: list[World], header: list[str]) -> str:
    """Worlds of one program (after `gpu.split_apply`: the device World, then the host World) as
    one module that parses, checks and runs: one name space, and a mutable a World only declares
    (the host's launched kernels, without a body there) printed once, by the World that defines
    it, under its name (device kernels are externals of their World, named as launched)."""
    out = list(header) + ([""] if header else [])
    used: set[str] = set()
    defined: dict[str, str] = {}  # an external's name → the name it is printed under
    plans: list[tuple[Dumper, list[MutLam]]] = []
    c_decls: list[str] = []
    for world in worlds:
        dumper = Dumper(world)
        dumper.used_names = used
        roots = [world.externals[n] for n in sorted(world.externals)]
        c_decls += [c for c in c_declarations(dumper, roots) if c not in c_decls]
        before = dict(defined)  # what the Worlds printed before this one define
        mine = [m for m in roots if not _defined_before(dumper, m, before)]
        for m in mine:
            defined[m.name or "main"] = dumper.mut_names[m.gid] = dumper.unique(m.name or "main")
        tops = [m for m in dumper.plan(roots) if not _defined_before(dumper, m, before)]
        plans.append((dumper, tops + mine))
    out += c_decls + ([""] if c_decls else [])
    # One numbering of the `let`s over every World, as the printed module read back (one World)
    # numbers them: the dump of the dump is then the same text.
    lets = 0
    for dumper, muts in plans:
        dumper.let_counter = lets
        for m in muts:
            out += dumper.print_mut(m, 0) + [""]
        lets = dumper.let_counter
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"
