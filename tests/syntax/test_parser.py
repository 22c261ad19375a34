"""Tests of verimim.syntax.parser: every construct, precedence, spellings, the seed and examples,
positions, and error messages."""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from verimim.diagnostics import Loc, ParseError
from verimim.syntax import ast
from verimim.syntax.parser import parse_expr, parse_module

EXAMPLES = Path(__file__).resolve().parents[2] / ".." / "shared" / "examples"


def strip(node: Any) -> Any:
    """The node's structure without positions, for comparing trees of different spellings."""
    if is_dataclass(node) and not isinstance(node, type):
        items = tuple((f.name, strip(getattr(node, f.name))) for f in fields(node) if f.name != "loc")
        return (type(node).__name__, items)
    if isinstance(node, tuple):
        return tuple(strip(x) for x in node)
    return node


def E(text: str) -> ast.Expr:
    return parse_expr(text)


def M(text: str) -> ast.Module:
    return parse_module(text, "t.mim")


def D(text: str) -> ast.Decl:
    mod = M(text)
    assert len(mod.decls) == 1
    return mod.decls[0]


def same(a: str, b: str) -> bool:
    return strip(E(a)) == strip(E(b))


def name(*parts: str) -> Any:
    return strip(ast.Name(Loc("x"), parts))


def n(value: int, bits: int | None = None, size: int | None = None) -> Any:
    return strip(ast.NumLit(Loc("x"), value, bits, size))


# ----------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    "text, value, bits, size",
    [
        ("42", 42, None, None),
        ("0x1F", 31, None, None),
        ("0b101", 5, None, None),
        ("0o17", 15, None, None),
        ("1'000", 1000, None, None),
        ("42I32", 42, 32, None),
        ("7i8", 7, 8, None),
        ("1I1", 1, 1, None),
        ("3I64", 3, 64, None),
        ("3_4", 3, None, 4),
        ("3₄", 3, None, 4),
    ],
)
def test_number_literal_nodes(text: str, value: int, bits: int | None, size: int | None) -> None:
    e = E(text)
    assert e == ast.NumLit(Loc("<expr>", 1, 1), value, bits, size, None)


def test_ascribed_literals() -> None:
    e = E("42:I32")
    assert isinstance(e, ast.NumLit) and e.value == 42 and e.ascribed == ast.Builtin(Loc("<expr>", 1, 4), "I32")
    e = E("0:(Idx 4)")
    assert isinstance(e, ast.NumLit) and isinstance(e.ascribed, ast.IdxType)
    assert strip(e.ascribed.size) == n(4)
    # the ascription binds tightest (upstream's Prec::Lit): `0:Idx 4` is `(0:Idx) 4`
    e = E("0:Idx 4")
    assert isinstance(e, ast.App) and isinstance(e.callee, ast.NumLit)
    assert e.callee.ascribed == ast.Builtin(Loc("<expr>", 1, 3), "Idx")
    # a character literal parses with one too (upstream's parse_lit_expr), which the elaborator
    # refuses, as upstream's LitExpr::bind does
    ch = E("'a':I32")
    assert isinstance(ch, ast.CharLit) and ch.value == 97 and ch.ascribed == ast.Builtin(Loc("<expr>", 1, 5), "I32")
    assert isinstance(E("'a'"), ast.CharLit)
    top = E("⊤:Nat")
    assert isinstance(top, ast.TopBot) and top.top and strip(top.type) == strip(ast.Builtin(Loc("x"), "Nat"))
    bot = E("⊥:(Idx 2)")
    assert isinstance(bot, ast.TopBot) and not bot.top and isinstance(bot.type, ast.IdxType)
    assert E("⊤") == ast.TopBot(Loc("<expr>", 1, 1), True, None)


def test_bool_char_string_literals() -> None:
    assert E("ff") == ast.BoolLit(Loc("<expr>", 1, 1), False)
    assert E("tt") == ast.BoolLit(Loc("<expr>", 1, 1), True)
    assert E("'a'") == ast.CharLit(Loc("<expr>", 1, 1), 97)
    assert E("'\\n'") == ast.CharLit(Loc("<expr>", 1, 1), 10)
    assert E('"hi\\0"') == ast.StrLit(Loc("<expr>", 1, 1), b"hi\x00")


def test_builtins_and_sizes() -> None:
    for word in ["Nat", "Bool", "I1", "I8", "I16", "I32", "I64", "Univ", "*", "□"]:
        assert E(word) == ast.Builtin(Loc("<expr>", 1, 1), word)
    # Upstream's lowercase iN is the Nat size of IN.
    assert strip(E("i8")) == n(256)
    assert strip(E("i1")) == n(2)
    assert strip(E("i64")) == n(2**64)
    assert strip(E("Idx i32")) == strip(ast.IdxType(Loc("x"), ast.NumLit(Loc("x"), 2**32)))
    assert isinstance(E("Type 0"), ast.TypeUniverse)


def test_names() -> None:
    assert E("core.nat.add") == ast.Name(Loc("<expr>", 1, 1), ("core", "nat", "add"))
    assert E("%gpu.init") == ast.Name(Loc("<expr>", 1, 1), ("gpu", "init"), percent=True)
    assert E("%gpu.init").text == "gpu.init"  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- spellings


@pytest.mark.parametrize(
    "uni, ascii_",
    [
        ("A → B", "A -> B"),
        ("λ (x: Nat) = x", "lm (x: Nat) = x"),
        ("«4; I32»", "<<4; I32>>"),
        ("‹4; 0I32›", "<4; 0I32>"),
        ("⊤:Nat", "top:Nat"),
        ("⊥:Nat", "bot:Nat"),
        ("‹r: 4; ‹c: 4; r››", "<r: 4; <c: 4; r>>"),
        ("«⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»", "<<top:Nat; mem.Ptr0 <<top:Nat; I8>>>>"),
        ("{T: *} → [T, «2; T»] → T", "{T: *} -> [T, <<2; T>>] -> T"),
        ("3₄", "3_4"),
        ("«3; ‹4; y›»", "<<3; <4; y>>>"),
        ("‹2; ‹3; ‹4; y›››", "<2; <3; <4; y>>>"),
        ("«2; «3; ‹4; y›»»", "<<2; <<3; <4; y>>>>>"),
        ("%core.nat.add", "core.nat.add"),
    ],
)
def test_spellings_give_equal_trees(uni: str, ascii_: str) -> None:
    if uni.startswith("%"):
        # The percent flag is kept (dump prints it back); the parts are the same.
        a, b = E(uni), E(ascii_)
        assert isinstance(a, ast.Name) and isinstance(b, ast.Name) and a.parts == b.parts
        return
    assert same(uni, ascii_)


def test_whole_program_spellings_are_equal() -> None:
    uni = "axm f: {T: *} → «2; T» → T;\nlet x = λ (y: Nat) = ‹2; y›;\nlet t = ⊤:Nat;"
    asc = "axm f: {T: *} -> <<2; T>> -> T;\nlet x = lm (y: Nat) = <2; y>;\nlet t = top:Nat;"
    assert strip(M(uni)) == strip(M(asc))


# ----------------------------------------------------------------------------- precedence


def test_application_is_left_associative() -> None:
    assert same("f a b c", "((f a) b) c")


def test_explicit_application_same_level() -> None:
    e = E("f @ a b")
    assert isinstance(e, ast.App) and not e.explicit
    assert isinstance(e.callee, ast.App) and e.callee.explicit
    assert strip(e.callee.arg) == name("a")


def test_extract_binds_tighter_than_application() -> None:
    e = E("f x#1 y")
    assert same("f x#1 y", "(f (x#1)) y")
    assert isinstance(e, ast.App) and isinstance(e.callee, ast.App)
    assert isinstance(e.callee.arg, ast.Extract)


def test_extract_chain_and_name_index() -> None:
    e = E("t#0#i")
    assert isinstance(e, ast.Extract) and strip(e.index) == name("i")
    assert isinstance(e.tuple, ast.Extract) and strip(e.tuple.index) == n(0)


def test_ascription_binds_tighter_than_extract() -> None:
    e = E("x#1:(Idx 2)")
    assert isinstance(e, ast.Extract)
    assert isinstance(e.index, ast.NumLit) and isinstance(e.index.ascribed, ast.IdxType)


def test_ascription_type_is_a_primary() -> None:
    e = E("f 0:(Idx 4) x")
    # `(Idx 4)` is the ascribed type; `x` is the next argument.
    assert isinstance(e, ast.App) and strip(e.arg) == name("x")
    lit = e.callee.arg  # type: ignore[attr-defined]
    assert isinstance(lit, ast.NumLit) and isinstance(lit.ascribed, ast.IdxType)


def test_branch_idiom() -> None:
    e = E("(run, body)#(core.ncmp.l (i, n)) (m0, m1)")
    assert isinstance(e, ast.App)
    assert isinstance(e.callee, ast.Extract)
    assert isinstance(e.callee.tuple, ast.Tuple) and isinstance(e.callee.index, ast.App)
    assert isinstance(e.arg, ast.Tuple)


def test_arrow_is_right_associative_and_looser_than_application() -> None:
    assert same("A → B → C", "A → (B → C)")
    assert same("f a → g b", "(f a) → (g b)")
    e = E("mem.M 0 → [mem.M 0, GlobalM]")
    assert isinstance(e, ast.Pi) and isinstance(e.dom, ast.App) and isinstance(e.codom, ast.Sigma)


def test_where_is_loosest() -> None:
    e = E("f x → y where let x = 1; end")
    assert isinstance(e, ast.Where) and isinstance(e.expr, ast.Pi)
    assert len(e.decls) == 1


def test_cn_fn_idx() -> None:
    e = E("Cn [A, B] → C")
    assert isinstance(e, ast.Pi) and isinstance(e.dom, ast.Cn)
    assert same("Cn T#i", "Cn (T#i)")
    f = E("Fn A#0 → B → C")
    assert isinstance(f, ast.Fn) and isinstance(f.dom, ast.Extract)
    assert isinstance(f.codom, ast.Pi)
    i = E("Idx n x")
    assert isinstance(i, ast.App) and isinstance(i.callee, ast.IdxType)
    assert same("Idx n x", "(Idx n) x")


def test_implicit_pi() -> None:
    e = E("{T: *} → [GlobalM, GlobalPtr T] → GlobalM")
    assert isinstance(e, ast.Pi) and e.implicit
    assert isinstance(e.dom, ast.Sigma) and [x.name for x in e.dom.elems] == ["T"]
    assert isinstance(e.codom, ast.Pi) and not e.codom.implicit


def test_sigma_domain_pi() -> None:
    e = E("[x: A, y: B x] → C")
    assert isinstance(e, ast.Pi) and not e.implicit and isinstance(e.dom, ast.Sigma)
    assert [x.name for x in e.dom.elems] == ["x", "y"]


def test_insert() -> None:
    e = E("ins (t, 1, v)")
    assert isinstance(e, ast.Insert)
    assert (strip(e.tuple), strip(e.index), strip(e.value)) == (name("t"), n(1), name("v"))


# ----------------------------------------------------------------------------- tuples, sigmas, arrays


def test_tuples() -> None:
    assert E("()") == ast.Tuple(Loc("<expr>", 1, 1), ())
    assert same("(x)", "x")
    e = E("(a, b, c)")
    assert isinstance(e, ast.Tuple) and len(e.elems) == 3


def test_sigma_groups_share_type() -> None:
    e = E("[a b: Nat, T: *, I32]")
    assert isinstance(e, ast.Sigma)
    assert [x.name for x in e.elems] == ["a", "b", "T", None]
    assert e.elems[0].type is e.elems[1].type
    assert e.elems[0].loc.col == 2 and e.elems[1].loc.col == 4


def test_sigma_application_element_is_not_a_group() -> None:
    e = E("[mem.M 0, f a b]")
    assert isinstance(e, ast.Sigma) and all(x.name is None for x in e.elems)
    assert isinstance(e.elems[1].type, ast.App)


def test_unit_type() -> None:
    assert E("[]") == ast.Sigma(Loc("<expr>", 1, 1), ())


def test_arrays_and_packs() -> None:
    assert same("«2, 3; T»", "«2; «3; T»»")
    e = E("«i: n; Ts#i»")
    assert isinstance(e, ast.Arr) and e.index == "i" and strip(e.shape) == name("n")
    assert isinstance(e.body, ast.Extract)
    p = E("‹r: 4; ‹c: 4; f r c››")
    assert isinstance(p, ast.Pack) and p.index == "r"
    assert isinstance(p.body, ast.Pack) and p.body.index == "c"
    top = E("«⊤:Nat; I8»")
    assert isinstance(top, ast.Arr) and isinstance(top.shape, ast.TopBot)


def test_array_locations() -> None:
    e = E("«2, 3; T»")
    assert isinstance(e, ast.Arr) and isinstance(e.body, ast.Arr)
    assert (e.loc.col, e.body.loc.col) == (1, 5)


# ----------------------------------------------------------------------------- blocks, lambdas, ret, where


def test_brace_block() -> None:
    e = E("{ let x = 1; f x }")
    assert isinstance(e, ast.Block) and e.braces and len(e.decls) == 1
    b = E("{ x }")
    assert isinstance(b, ast.Block) and b.braces and b.decls == () and strip(b.expr) == name("x")


def test_body_without_decls_is_the_expression() -> None:
    lam = E("λ (x: Nat) = x")
    assert isinstance(lam, ast.Lambda) and isinstance(lam.body, ast.Name)


@pytest.mark.parametrize("kw, kind", [("λ", "lam"), ("lm", "lam"), ("cn", "con"), ("fn", "fun")])
def test_anonymous_lambdas(kw: str, kind: str) -> None:
    e = E(f"{kw} {{T: *}} (x: T, y: Nat) [z: T] : T = let w = x; w")
    assert isinstance(e, ast.Lambda) and e.kind == kind
    imp, tup, br = e.domains
    assert isinstance(imp, ast.PTuple) and imp.implicit
    assert isinstance(tup, ast.PTuple) and not tup.implicit and len(tup.elems) == 2
    assert isinstance(br, ast.PTuple) and br.brackets and len(br.elems) == 1
    assert strip(e.codom) == name("T")
    assert isinstance(e.body, ast.Block) and len(e.body.decls) == 1


def test_lambda_extends_as_far_as_possible() -> None:
    e = E("f λ (x) = x y")
    assert isinstance(e, ast.App) and isinstance(e.arg, ast.Lambda)
    assert isinstance(e.arg.body, ast.App)


def test_ret() -> None:
    e = E("let a = 1; ret (m0, m1) = gpu.launch (4, 4) kernel d $ (m0, m1); let b = 2; g b")
    assert isinstance(e, ast.Block) and len(e.decls) == 1
    r = e.expr
    assert isinstance(r, ast.Ret)
    assert isinstance(r.pattern, ast.PTuple) and len(r.pattern.elems) == 2
    assert isinstance(r.callee, ast.App) and isinstance(r.arg, ast.Tuple)
    assert isinstance(r.body, ast.Block) and isinstance(r.body.expr, ast.App)
    assert r.loc == Loc("<expr>", 1, 12)


def test_ret_chain() -> None:
    e = E("ret a = f $ x; ret b = g $ a; ret c = h $ b; c")
    assert isinstance(e, ast.Ret) and isinstance(e.body, ast.Ret) and isinstance(e.body.body, ast.Ret)
    assert strip(e.body.body.body) == name("c")


def test_where_attaches_to_final_expression_of_body() -> None:
    e = E("let x = a; f x where con f (y: Nat) = y; end")
    assert isinstance(e, ast.Block) and len(e.decls) == 1
    w = e.expr
    assert isinstance(w, ast.Where) and isinstance(w.expr, ast.App)
    assert len(w.decls) == 1 and isinstance(w.decls[0], ast.DeclLam)


def test_where_chains() -> None:
    e = E("f where let a = 1; end where let b = 2; end")
    assert isinstance(e, ast.Where) and isinstance(e.expr, ast.Where)


# ----------------------------------------------------------------------------- patterns


def test_pattern_groups_split() -> None:
    d = D("con k (m1: GlobalM, group_id item_id: Idx 4, (), data: GlobalPtr I32) = f;")
    assert isinstance(d, ast.DeclLam)
    (dom,) = d.domains
    assert isinstance(dom, ast.PTuple) and len(dom.elems) == 5
    g, i = dom.elems[1], dom.elems[2]
    assert isinstance(g, ast.PVar) and isinstance(i, ast.PVar)
    assert (g.name, i.name) == ("group_id", "item_id") and g.type is i.type
    assert dom.elems[3] == ast.PTuple(Loc("t.mim", 1, 46), ())


def test_patterns() -> None:
    d = D("let ((a, b: Nat) as p, _, [c: T]) = x;")
    assert isinstance(d, ast.DeclLet)
    pat = d.pattern
    assert isinstance(pat, ast.PTuple) and len(pat.elems) == 3
    first = pat.elems[0]
    assert isinstance(first, ast.PAs) and first.name == "p" and isinstance(first.pattern, ast.PTuple)
    assert pat.elems[1] == ast.PVar(Loc("t.mim", 1, 24), "_")
    br = pat.elems[2]
    assert isinstance(br, ast.PTuple) and br.brackets


def test_single_parenthesized_pattern_is_itself() -> None:
    d = D("lam f (T: *): * = T;")
    assert isinstance(d, ast.DeclLam)
    assert strip(d.domains) == strip((ast.PVar(Loc("x"), "T", ast.Builtin(Loc("x"), "*")),))
    d2 = D("lam g () = 1;")
    assert isinstance(d2, ast.DeclLam) and strip(d2.domains[0]) == strip(ast.PTuple(Loc("x"), ()))


def test_pattern_type_is_an_arrow() -> None:
    d = D("lam f (scope: [A] → [B]) = scope;")
    assert isinstance(d, ast.DeclLam)
    p = d.domains[0]
    assert isinstance(p, ast.PVar) and isinstance(p.type, ast.Pi)


# ----------------------------------------------------------------------------- declarations


def test_module_imports() -> None:
    m = M("plugin core;\nimport compile;\naxm x: Nat;")
    assert [(i.kind, i.name, i.loc.line) for i in m.imports] == [("plugin", "core", 1), ("import", "compile", 2)]
    assert len(m.decls) == 1 and m.loc == Loc("t.mim", 1, 1)


def test_axioms() -> None:
    a = D("axm Stream: *;")
    assert isinstance(a, ast.DeclAxm) and a.name == ("Stream",) and a.tags is None and not a.percent
    t = D("axm alloc(block, asyn): Nat;")
    assert isinstance(t, ast.DeclAxm) and t.tags == ("block", "asyn")
    p = D("axm %gpu.alloc(block): Nat;")
    assert isinstance(p, ast.DeclAxm) and p.name == ("gpu", "alloc") and p.percent and p.tags == ("block",)


def test_lets() -> None:
    a = D("let x = 1;")
    assert isinstance(a, ast.DeclLet) and not a.anx and a.percent_name is None
    b = D("anx let GlobalM = mem.M addr_space_global;")
    assert isinstance(b, ast.DeclLet) and b.anx and b.pattern == ast.PVar(Loc("t.mim", 1, 9), "GlobalM")
    c = D("let %gpu.addr_space_global = 1;")
    assert isinstance(c, ast.DeclLet) and c.anx and c.percent_name == ("gpu", "addr_space_global")
    assert isinstance(c.pattern, ast.PVar) and c.pattern.name == "addr_space_global"
    t = D("let x: Nat = 1;")
    assert isinstance(t, ast.DeclLet) and isinstance(t.pattern, ast.PVar) and t.pattern.type is not None


@pytest.mark.parametrize(
    "text, kind, anx, extern",
    [
        ("lam f (x: Nat): Nat = x;", "lam", False, False),
        ("con f (x: Nat) = x;", "con", False, False),
        ("fun f (x: Nat): Nat = x;", "fun", False, False),
        ("anx lam f (x: Nat): Nat = x;", "lam", True, False),
        ("fun extern main (x: Nat): Nat = x;", "fun", False, True),
        ("extern fun main (x: Nat): Nat = x;", "fun", False, True),
        ("anx extern con f (x: Nat) = x;", "con", True, True),
    ],
)
def test_lambda_declarations(text: str, kind: str, anx: bool, extern: bool) -> None:
    d = D(text)
    assert isinstance(d, ast.DeclLam)
    assert (d.kind, d.anx, d.extern, d.name) == (kind, anx, extern, d.name)
    assert d.name in ("f", "main") and d.body is not None


def test_con_without_body_and_curried_domains() -> None:
    d = D("con exit (m: M) [x: T] {U: *};")
    assert isinstance(d, ast.DeclLam) and d.body is None and len(d.domains) == 3
    assert isinstance(d.domains[2], ast.PTuple) and d.domains[2].implicit


def test_percent_lambda_declaration() -> None:
    d = D("lam %gpu.f (x: Nat): Nat = x;")
    assert isinstance(d, ast.DeclLam) and d.percent_name == ("gpu", "f") and d.name == "f" and d.anx


def test_modules() -> None:
    m = M("mod a { axm x: Nat; }\npub mod b { let y = 1; mod c { } };\nlet z = 2;")
    a, b, z = m.decls
    assert isinstance(a, ast.DeclMod) and a.name == "a" and not a.pub and len(a.decls) == 1
    assert isinstance(b, ast.DeclMod) and b.pub and isinstance(b.decls[1], ast.DeclMod)
    assert isinstance(z, ast.DeclLet)


def test_rec() -> None:
    d = D("rec lam even (n: Nat): Bool = odd n and lam odd (n: Nat): Bool = even n;")
    assert isinstance(d, ast.DeclRec) and len(d.decls) == 2
    assert [x.name for x in d.decls] == ["even", "odd"]  # type: ignore[attr-defined]


def test_doc_comments_attach_to_declarations() -> None:
    m = M("/// The answer.\n/// Always.\nanx let x = 42;\n// plain\nlet y = 1;\nmod m {\n  /// inner\n  axm a: Nat;\n}")
    x, y, mod = m.decls
    assert x.doc == "The answer.\nAlways." and y.doc is None
    assert isinstance(mod, ast.DeclMod) and mod.decls[0].doc == "inner"


# ----------------------------------------------------------------------------- the seed

WITH_STREAMS = """
anx fun with_streams (n: Nat, func: Fn [mem.M 0, GlobalM, «n; Stream»] → [mem.M 0, GlobalM])
(m0: mem.M 0, m1: GlobalM)
: [mem.M 0, GlobalM] =
let (m0, streams_ptr) = mem.alloc («n; Stream», 0) m0;
init (m0, m1)
where
con init (m0: mem.M 0, m1: GlobalM) =
loop (m0, m1, 0)
where
con loop (m0: mem.M 0, m1: GlobalM, i: Nat) =
(run, body)#(core.ncmp.l (i, n)) (m0, m1)
where
con body (m0: mem.M 0, m1: GlobalM) =
let lea = mem.lea (streams_ptr, core.bitcast (Idx n) i);
let (m0, m1) = stream_init (m0, m1, lea);
let inc = core.nat.add (i, 1);
loop (m0, m1, inc);
end;
end;
con run (m0: mem.M 0, m1: GlobalM) =
let (m0, streams) = mem.load (m0, streams_ptr);
ret (m0, m1) = func $ (m0, m1, streams);
deinit (m0, m1);
con deinit (m0: mem.M 0, m1: GlobalM) =
let (m0, streams) = mem.load (m0, streams_ptr);
loop (m0, m1, 0)
where
con loop (m0: mem.M 0, m1: GlobalM, i: Nat) =
(return, body)#(core.ncmp.l (i, n)) (m0, m1)
where
con body (m0: mem.M 0, m1: GlobalM) =
let idx = core.bitcast (Idx n) i;
let (m0, m1) = stream_deinit (m0, m1, streams#idx);
let inc = core.nat.add (i, 1);
loop (m0, m1, inc);
end;
end;
end;
"""

MOD_ALLOC = """
mod alloc {
axm block: [T: *] → GlobalM → [GlobalM, GlobalPtr T];
axm asyn: [T: *] → [GlobalM, Stream] → [GlobalM, GlobalPtr T];
}
pub mod free {
axm block: {T: *} → [GlobalM, GlobalPtr T] → GlobalM;
axm asyn: {T: *} → [GlobalM, GlobalPtr T, Stream] → GlobalM;
}
"""

ALLOC_COPY = """
pub mod alloc_copy {
anx let block = lm {T: *}
(m0: mem.M 0, m1: GlobalM, ptr: mem.Ptr0 T)
: [mem.M 0, GlobalM, GlobalPtr T] =
let (m1, d_ptr) = alloc.block T m1;
let (m0, m1) = copy_to_device.block (m0, m1, ptr, d_ptr);
(m0, m1, d_ptr);
anx let asyn = lm {T: *}
(m0: mem.M 0, m1: GlobalM, ptr: mem.Ptr0 T, stream: Stream)
: [mem.M 0, GlobalM, GlobalPtr T] =
let (m1, d_ptr) = alloc.asyn T (m1, stream);
let (m0, m1) = copy_to_device.asyn (m0, m1, ptr, d_ptr, stream);
(m0, m1, d_ptr);
}
"""

LAUNCH = """
// TODO: refactor to {n m: N, Ts: «n; *»} as soon as type inference bug is fixed
axm launch: {n: Nat, Ts: «n; *»}
→ [n_groups n_items: Nat, Stream, m: Bool, MT: «core.bitcast Nat m; *»]
→ Cn [GlobalM, SharedM, ConstM, LocalM, Idx n_groups, Idx n_items,
«i: core.bitcast Nat m; SharedPtr MT#i», «i: n; Ts#i»,
Cn [GlobalM, SharedM, ConstM, LocalM]]
→ «i: n; Ts#i»
→ Fn [mem.M 0, GlobalM, ConstM]
→ [mem.M 0, GlobalM, ConstM];
"""

SYNCED_SCOPE = """
anx lam synced_scope (m1: GlobalM, m3: SharedM,
scope: [GlobalM, SharedM] → [GlobalM, SharedM])
: [GlobalM, SharedM] =
let (m1, m3) = sync_work_items (m1, m3);
let (m1, m3) = scope (m1, m3);
let (m1, m3) = sync_work_items (m1, m3);
(m1, m3);
"""

SEED_MISC = """
plugin core;
plugin mem;
plugin buffer;
import compile;
anx let addr_space_global = 1;
anx let GlobalM = mem.M addr_space_global;
anx lam GlobalPtr(T: *): * = mem.Ptr (T, addr_space_global);
axm Stream: *;
axm default_stream: Stream;
axm init: mem.M 0 → [mem.M 0, GlobalM, ConstM];
axm deinit: [mem.M 0, GlobalM, ConstM] → mem.M 0;
axm stream_init: [mem.M 0, GlobalM, mem.Ptr0 Stream] → [mem.M 0, GlobalM];
axm buf_alloc_copy: {r: Nat, s: «r; Nat», T: *}
→ [mem.M 0, GlobalM, buffer.Buf (r, s, T)]
→ [mem.M 0, GlobalM, GlobalPtr «s; T»];
axm check_addr_spaces_repl: compile.Phase;
anx lam host_specific_phases () = host_malloc2gpualloc_repl;
"""


def lam(decl: ast.Decl) -> ast.DeclLam:
    assert isinstance(decl, ast.DeclLam)
    return decl


def test_seed_with_streams_tree() -> None:
    ws = lam(D(WITH_STREAMS))
    assert (ws.kind, ws.name, ws.anx, len(ws.domains)) == ("fun", "with_streams", True, 2)
    func = ws.domains[0]
    assert isinstance(func, ast.PTuple) and isinstance(func.elems[1], ast.PVar)
    assert isinstance(func.elems[1].type, ast.Fn)
    assert isinstance(ws.codom, ast.Sigma)
    # body: Block([let], Where(init (m0, m1), [con init, con run, con deinit]))
    body = ws.body
    assert isinstance(body, ast.Block) and len(body.decls) == 1
    outer = body.expr
    assert isinstance(outer, ast.Where) and isinstance(outer.expr, ast.App)
    assert [lam(d).name for d in outer.decls] == ["init", "run", "deinit"]
    init, run, deinit = (lam(d) for d in outer.decls)
    # init's body: Where(loop (…), [con loop]) and loop's body: Where(branch, [con body])
    assert isinstance(init.body, ast.Where) and [lam(d).name for d in init.body.decls] == ["loop"]
    loop = lam(init.body.decls[0])
    assert isinstance(loop.body, ast.Where) and isinstance(loop.body.expr, ast.App)
    inner = lam(loop.body.decls[0])
    assert inner.name == "body" and isinstance(inner.body, ast.Block) and len(inner.body.decls) == 3
    # run's body: Block([let], Ret(…, deinit (m0, m1)))
    assert isinstance(run.body, ast.Block) and isinstance(run.body.expr, ast.Ret)
    assert isinstance(run.body.expr.body, ast.App)
    # deinit's body: Block([let], Where(loop …, [con loop]))
    assert isinstance(deinit.body, ast.Block) and isinstance(deinit.body.expr, ast.Where)
    loop2 = lam(deinit.body.expr.decls[0])
    assert isinstance(loop2.body, ast.Where) and lam(loop2.body.decls[0]).name == "body"


def test_seed_mods() -> None:
    m = M(MOD_ALLOC)
    alloc, free = m.decls
    assert isinstance(alloc, ast.DeclMod) and not alloc.pub and len(alloc.decls) == 2
    assert isinstance(free, ast.DeclMod) and free.pub
    block = free.decls[0]
    assert isinstance(block, ast.DeclAxm) and isinstance(block.type, ast.Pi) and block.type.implicit


def test_seed_alloc_copy() -> None:
    mod = D(ALLOC_COPY)
    assert isinstance(mod, ast.DeclMod) and mod.pub and mod.name == "alloc_copy"
    block = mod.decls[0]
    assert isinstance(block, ast.DeclLet) and block.anx
    fn = block.value
    assert isinstance(fn, ast.Lambda) and fn.kind == "lam" and len(fn.domains) == 2
    assert isinstance(fn.domains[0], ast.PTuple) and fn.domains[0].implicit
    assert isinstance(fn.codom, ast.Sigma) and len(fn.codom.elems) == 3
    assert isinstance(fn.body, ast.Block) and isinstance(fn.body.expr, ast.Tuple)


def test_seed_launch() -> None:
    a = D(LAUNCH)
    assert isinstance(a, ast.DeclAxm) and a.name == ("launch",)
    t = a.type
    assert isinstance(t, ast.Pi) and t.implicit and [e.name for e in t.dom.elems] == ["n", "Ts"]  # type: ignore[attr-defined]
    chain = []
    cur: ast.Expr = t.codom
    while isinstance(cur, ast.Pi):
        chain.append(cur.dom)
        cur = cur.codom
    # [..] → Cn [..] → «..» → Fn [..] → [..]: the Fn swallows the last arrow.
    assert [type(x).__name__ for x in chain] == ["Sigma", "Cn", "Arr"]
    assert isinstance(cur, ast.Fn) and isinstance(cur.codom, ast.Sigma)
    sig = chain[0]
    assert isinstance(sig, ast.Sigma)
    assert [e.name for e in sig.elems] == ["n_groups", "n_items", None, "m", "MT"]
    cn = chain[1]
    assert isinstance(cn, ast.Cn) and isinstance(cn.dom, ast.Sigma) and len(cn.dom.elems) == 9


def test_seed_synced_scope() -> None:
    d = lam(D(SYNCED_SCOPE))
    assert d.anx and d.kind == "lam" and d.name == "synced_scope"
    (dom,) = d.domains
    assert isinstance(dom, ast.PTuple) and len(dom.elems) == 3
    assert isinstance(d.body, ast.Block) and len(d.body.decls) == 3 and isinstance(d.body.expr, ast.Tuple)


def test_seed_misc() -> None:
    m = M(SEED_MISC)
    assert [i.name for i in m.imports] == ["core", "mem", "buffer", "compile"]
    assert len(m.decls) == 11


def test_seed_snippets_together() -> None:
    m = M(SEED_MISC + WITH_STREAMS + MOD_ALLOC + ALLOC_COPY + LAUNCH + SYNCED_SCOPE)
    assert len(m.decls) == 11 + 1 + 2 + 1 + 1 + 1


# ----------------------------------------------------------------------------- examples


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.mim")) if EXAMPLES.is_dir() else []


def test_examples_folder_present() -> None:
    if not EXAMPLES.is_dir():
        pytest.skip("../shared/examples is missing")
    assert example_files()


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_examples_parse(path: Path) -> None:
    m = parse_module(path.read_text(encoding="utf-8"), str(path))
    assert [i.name for i in m.imports][:2] == ["core", "mem"]
    kinds = [(type(d).__name__, getattr(d, "name", None)) for d in m.decls]
    assert ("DeclLam", "main") in kinds and ("DeclLam", "kernel") in kinds
    main = next(d for d in m.decls if getattr(d, "name", None) == "main")
    assert isinstance(main, ast.DeclLam) and main.extern and main.kind == "fun"


# ----------------------------------------------------------------------------- positions


def test_locations_are_first_tokens() -> None:
    text = "let x =\n  f a → g\n    b;"
    d = D(text)
    assert isinstance(d, ast.DeclLet) and d.loc == Loc("t.mim", 1, 1)
    pi = d.value
    assert isinstance(pi, ast.Pi) and pi.loc == Loc("t.mim", 2, 3)
    assert isinstance(pi.codom, ast.App) and pi.codom.loc == Loc("t.mim", 2, 9)
    assert pi.codom.arg.loc == Loc("t.mim", 3, 5)


def test_block_and_where_locations() -> None:
    e = E("let a = 1;\nf a where let b = 2; end")
    assert isinstance(e, ast.Block) and e.loc == Loc("<expr>", 1, 1)
    assert isinstance(e.expr, ast.Where) and e.expr.loc == Loc("<expr>", 2, 1)


def test_unicode_columns() -> None:
    e = E("«n; λ (x) = x»")
    assert isinstance(e, ast.Arr) and isinstance(e.body, ast.Lambda)
    assert e.body.loc.col == 5 and e.body.domains[0].loc.col == 8


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, line, col, fragment",
    [
        ("let x = ;", 1, 9, "expected an expression, found ';'"),
        ("lam f = x;", 1, 7, "expected a domain '(', '[', '{' or a parameter name, found '='"),
        ("let x = (1, 2;", 1, 14, "expected ',' or ')', found ';'"),
        ("let a = 1;\nlet b = [2,\n   3;\n", 3, 5, "expected ',' or ']', found ';'"),
        ("let x = «n; T›;", 1, 14, "expected '»', found '›'"),
        ("con f (x) = g x where con g (y) = y;", 1, 37, "expected a declaration or 'end', found end of input"),
        ("f x;", 1, 1, "expected a declaration, found name 'f'"),
        ("plugin;", 1, 7, "expected a plugin name, found ';'"),
        ("let x = 1;\nplugin core;", 2, 1, "expected a declaration, found keyword 'plugin'"),
        ("axm x: Nat -> ;", 1, 15, "expected an expression, found ';'"),
        ("anx axm x: Nat;", 1, 5, "after 'anx'"),
        ("let (a, b: ) = x;", 1, 12, "expected an expression, found ')'"),
        ("let λ = 1;", 1, 5, "expected a pattern, found 'λ'"),
        ("let a.b = 1;", 1, 5, "expected a variable name, found name 'a.b'"),
        ("mod m { let x = 1; ", 1, 20, "expected a declaration or '}', found end of input"),
        ("let f = Fn A B;", 1, 15, "expected '→' after the domain of 'Fn'"),
        ("let r = ret x = f x; y;", 1, 20, "expected '$', found ';'"),
        ("let s = «i: ; T»;", 1, 13, "expected an expression, found ';'"),
        ("let t = ins (a, b);", 1, 18, "expected ',', found ')'"),
        ("let u = x # ;", 1, 13, "expected an expression, found ';'"),
        ("axm a(b.c): Nat;", 1, 7, "expected a tag name"),
        ("let x = 1 . 2;", 1, 11, "expected a declaration, found '.'"),
    ],
)
def test_parse_errors(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_module(text, "bad.mim")
    err = info.value
    assert err.code == "E-PARSE"
    assert fragment in err.message, err.message
    assert err.loc == Loc("bad.mim", line, col)


def test_parse_expr_rejects_trailing_tokens() -> None:
    with pytest.raises(ParseError) as info:
        parse_expr("f x )", "e.mim")
    assert "expected end of input, found ')'" in info.value.message
    assert info.value.loc == Loc("e.mim", 1, 5)


def test_lexical_error_surfaces_through_parser() -> None:
    with pytest.raises(ParseError) as info:
        parse_module("let x = 42I65;", "bad.mim")
    assert info.value.loc == Loc("bad.mim", 1, 9) and "width 65" in info.value.message
