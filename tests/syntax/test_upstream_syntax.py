"""Upstream's surface syntax (issue 10): each construct parses to the expected tree, and its
ill-formed twin is E-PARSE at the first bad token."""
from __future__ import annotations

import pytest

from verimim.diagnostics import ParseError
from verimim.syntax import ast
from verimim.syntax.parser import parse_expr, parse_module


def M(text: str) -> ast.Module:
    return parse_module(text, "t.mim")


def only(text: str) -> ast.Decl:
    mod = M(text)
    assert len(mod.decls) == 1, mod.decls
    return mod.decls[0]


def test_ccon_and_cfun() -> None:
    c = only("ccon atoi [%mem.M 0, %mem.Ptr0 «⊤:Nat; I8», Cn [%mem.M 0, I32]];")
    assert isinstance(c, ast.DeclC) and c.kind == "ccon" and c.name == "atoi" and c.codom is None
    assert isinstance(c.dom, ast.Sigma) and len(c.dom.elems) == 3
    f = only("cfun dont_know[]: Bool;")
    assert isinstance(f, ast.DeclC) and f.kind == "cfun" and isinstance(f.codom, ast.Builtin)
    named = only("ccon print [mem: %mem.M 0, val: I32, return : Cn [%mem.M 0]];")
    assert isinstance(named, ast.DeclC) and [e.name for e in named.dom.elems] == ["mem", "val", "return"]  # type: ignore[attr-defined]


def test_filters_after_domains() -> None:
    d = only("con head (i: Nat, acc: A)@%core.pe.is_closed n = f i;")
    assert isinstance(d, ast.DeclLam) and len(d.filters) == 1 and isinstance(d.filters[0], ast.App)
    d2 = only("con seq {A: *} (n: Nat) (acc: A)@tt = x;")
    assert isinstance(d2, ast.DeclLam) and d2.filters == (None, None, ast.BoolLit(d2.filters[2].loc, True))  # type: ignore[union-attr]
    d3 = only("fun foo(mem: %mem.M 0, x: I32)@(%core.icmp.e (x, 23I32)): [%mem.M 0, I32] = return (mem, x);")
    assert isinstance(d3, ast.DeclLam) and d3.filters and d3.codom is not None


def test_domains_without_parentheses() -> None:
    d = only("con body m: %mem.M 0 = loop (m, 1);")
    assert isinstance(d, ast.DeclLam) and isinstance(d.domains[0], ast.PVar)
    assert d.domains[0].name == "m" and isinstance(d.domains[0].type, ast.App)
    lam = parse_expr("λ y: Nat = y")
    assert isinstance(lam, ast.Lambda) and isinstance(lam.domains[0], ast.PVar)
    # A `lam`'s bare domain type stops before `→`, a `con`'s takes it.
    lam2 = only("lam f x: Nat: Nat = x;")
    assert isinstance(lam2, ast.DeclLam) and isinstance(lam2.codom, ast.Builtin)


def test_rec_on_a_plain_name_and_and_groups() -> None:
    r = only("rec PiPeline: * = %phase.Phase → PiPeline;")
    assert isinstance(r, ast.DeclRec) and isinstance(r.decls[0], ast.DeclRecVal)
    g = only("lam is_even(i: Nat): Bool = is_odd i\nand\nlam is_odd (i: Nat): Bool = is_even i;")
    assert isinstance(g, ast.DeclRec) and [m.name for m in g.decls] == ["is_even", "is_odd"]  # type: ignore[attr-defined]
    g2 = only("con hi (i: Nat) = hj i and con hj (j: Nat) = hi j;")
    assert isinstance(g2, ast.DeclRec) and len(g2.decls) == 2
    mixed = only("rec F = [Nat] and G = F;")
    assert isinstance(mixed, ast.DeclRec) and all(isinstance(m, ast.DeclRecVal) for m in mixed.decls)


def test_as_on_binders_and_pi_domains() -> None:
    d = only("axm %foo.bar: {p e: Nat} as pe → Nat → %foo.F pe;")
    assert isinstance(d, ast.DeclAxm) and isinstance(d.type, ast.Pi) and d.type.alias == "pe" and d.type.implicit
    s = only("axm %foo.baz: [a: Nat, b: Nat] as ab → %foo.F ab;")
    assert isinstance(s, ast.DeclAxm) and isinstance(s.type, ast.Pi) and s.type.alias == "ab"
    let = only("let (a, b, c) as abc = (1, 2, 3);")
    assert isinstance(let, ast.DeclLet) and isinstance(let.pattern, ast.PAs)


def test_let_as_an_expression_and_optional_semicolons() -> None:
    e = parse_expr("let x = let y = 1; y; x")
    assert isinstance(e, ast.Block) and isinstance(e.decls[0], ast.DeclLet)
    assert isinstance(e.decls[0].value, ast.Block)  # type: ignore[attr-defined]
    mod = M("axm %a.x: Nat\nlet y = 1;;\n;lam f (x: Nat): Nat = x\n")
    assert len(mod.decls) == 3
    ty = only("fun f (T: *, U: let F = T; F): * = return U;")
    assert isinstance(ty, ast.DeclLam)


def test_axm_suffixes_and_aliases() -> None:
    d = only("axm %core.icmp(xygle = f, xyglE = e, xygLe): Bool, normalize_icmp, 1, 2;")
    assert isinstance(d, ast.DeclAxm) and d.tags == ("xygle", "xyglE", "xygLe")
    assert d.aliases == (("f",), ("e",), ()) and d.normalizer == "normalize_icmp"
    assert (d.curry, d.trip) == (1, 2)


def test_rules_unions_match() -> None:
    r = only("rule foo (a: Nat) : (%core.nat.add (a, a)) when tt => (%core.nat.mul (a, 2));")
    assert isinstance(r, ast.DeclRule) and not r.norm and r.guard is not None
    n = only("norm bar (a: Nat) : a => a;")
    assert isinstance(n, ast.DeclRule) and n.norm and n.guard is None
    u = parse_expr("x inj t1 ∪ t2 ∪ t3")
    assert isinstance(u, ast.Inj) and isinstance(u.type, ast.Union_) and len(u.type.types) == 3
    app = parse_expr("f A ∪ B")  # ∪ binds tighter than application
    assert isinstance(app, ast.App) and isinstance(app.arg, ast.Union_)
    m = parse_expr("match u with | a: t1 => x | (i, y) => y")
    assert isinstance(m, ast.Match) and len(m.arms) == 2
    assert isinstance(parse_expr("Rule Nat"), ast.RuleType)


def test_cn_and_fn_domains_that_are_applications() -> None:
    cn = parse_expr("Cn %mem.M 0")
    assert isinstance(cn, ast.Cn) and isinstance(cn.dom, ast.App)
    fn = parse_expr("Fn %mem.M 0 → I32")
    assert isinstance(fn, ast.Fn) and isinstance(fn.dom, ast.App)
    # A bracketed domain is only the bracket: `Cn [A] → B` is an arrow from a Cn.
    arrow = parse_expr("Cn [A] → B")
    assert isinstance(arrow, ast.Pi) and isinstance(arrow.dom, ast.Cn)


def test_lexical_additions() -> None:
    e = parse_expr("'\\r'")
    assert isinstance(e, ast.CharLit) and e.value == 13
    assert isinstance(parse_expr("⟪2; I8⟫"), ast.Arr)
    assert isinstance(parse_expr("insert (t, 0_2, 1)"), ast.Insert)
    # upstream's lexer reads `★` as `*` (the type of types)
    assert parse_expr("{T: ★} → T") == parse_expr("{T: *} → T")


@pytest.mark.parametrize(
    "text, line, col, fragment",
    [
        ("ccon [I32];", 1, 6, "expected the name of the C function"),
        ("cfun f [I32];", 1, 13, "':' and the return type of the 'cfun'"),
        ("con head (i: Nat)@ = x;", 1, 20, "expected an expression"),
        ("rec = Nat;", 1, 5, "expected a name, or 'lam', 'con' or 'fun'"),
        ("rec F: * Nat;", 1, 13, "'='"),  # `* Nat` is an application
        ("lam f (x: Nat): Nat = x and;", 1, 28, "expected a name"),
        ("rule foo (a: Nat) (a) => a;", 1, 19, "expected ':' before the rule's left-hand side"),
        ("rule foo (a: Nat) : a a;", 1, 24, "expected '=>'"),
        ("let m = match u | a: T => a;", 1, 17, "expected 'with'"),
        ("let m = match u with a: T a;", 1, 28, "expected '=>'"),
        ("axm %a.b: Nat, 1, x;", 1, 19, "expected a trip count"),
        ("axm %a.b(t = ): Nat;", 1, 14, "expected an alias of the tag"),
        ("axm %foo.bar: {p: Nat} as → Nat;", 1, 27, "expected a name after 'as'"),
        ("let f = Fn %mem.M 0 I32;", 1, 24, "expected '→' after the domain of 'Fn'"),
        # `con body m` is a declaration without a body; what follows is no declaration.
        ("con body m %mem.M 0 = x;", 1, 12, "expected a declaration"),
    ],
)
def test_ill_formed_twins(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        M(text)
    e = info.value
    assert e.code == "E-PARSE" and fragment in e.message, e.message
    assert e.loc is not None and (e.loc.line, e.loc.col) == (line, col), e


def test_extract_by_a_bare_name_or_a_parenthesized_one() -> None:
    # upstream: `e#x` may name a field (it wins over a variable x); `e#(x)` is the variable
    bare, paren, lit = parse_expr("p#x"), parse_expr("p#(x)"), parse_expr("p#1_2")
    assert isinstance(bare, ast.Extract) and bare.by_name
    assert isinstance(paren, ast.Extract) and not paren.by_name and isinstance(paren.index, ast.Name)
    assert isinstance(lit, ast.Extract) and not lit.by_name


def test_idx_without_an_operand_is_the_builtin_type_former() -> None:
    assert isinstance(parse_expr("Idx"), ast.Builtin) and parse_expr("Idx").name == "Idx"  # type: ignore[attr-defined]
    let = only("let F = Idx;")
    assert isinstance(let, ast.DeclLet) and isinstance(let.value, ast.Builtin)
    app = parse_expr("(Idx) 4")
    assert isinstance(app, ast.App) and isinstance(app.callee, ast.Builtin)
    assert isinstance(parse_expr("Idx 4"), ast.IdxType)
    assert isinstance(parse_expr("Idx n#i"), ast.IdxType)
