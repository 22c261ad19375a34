"""The checker on upstream's constructs (issue 10): each accepted with the meaning upstream
gives it, and an ill-typed or ill-named twin rejected with the right code at the right place."""
from __future__ import annotations

import pytest

from verimim.diagnostics import VerimimError
from verimim.frontend.loader import load_text
from verimim.frontend.scope import Lazy
from verimim.interp.machine import Machine, find_main
from verimim.ir.defs import App, Axiom, Def, Join, Lam, MutLam, Pi
from verimim.ir.world import World
from verimim.printer import show

HEADER = "plugin core;\n"


def load(body: str) -> tuple[World, dict[str, Def]]:
    w, unit = load_text(HEADER + body, "t.mim")
    values = {n: (v.force() if isinstance(v, Lazy) else v) for n, v in unit.scope.names.items()}
    return w, values


def fails(body: str) -> VerimimError:
    with pytest.raises(VerimimError) as info:
        load_text(HEADER + body, "t.mim")
    return info.value


def at(src: str, token: str) -> tuple[int, int]:
    src = HEADER + src
    i = src.index(token)
    return src.count("\n", 0, i) + 1, i - (src.rfind("\n", 0, i) + 1) + 1


def run(body: str, *args: str) -> int:
    w, _ = load(body)
    return Machine(w).run_main(find_main(w), ["prog", *args])


MAIN = "fun extern main (mem: %mem.M 0, argc: I32, argv: %mem.Ptr0 (%mem.Ptr0 I8)): [%mem.M 0, I32] =\n"


def test_c_declarations_are_axioms_of_con_and_fun_types() -> None:
    w, v = load("ccon atoi [%mem.M 0, %mem.Ptr0 «⊤:Nat; I8», Cn [%mem.M 0, I32]];\n"
                "cfun dont_know []: Bool;\n")
    atoi, dk = v["atoi"], v["dont_know"]
    assert isinstance(atoi, Axiom) and atoi.annex == "c.atoi" and w.c_functions["atoi"] is atoi
    assert show(w.type_of(atoi)) == "Cn [mem.M 0, mem.Ptr («⊤:Nat; I8», 0), Cn [mem.M 0, I32]]"
    assert isinstance(dk, Axiom) and show(w.type_of(dk)) == "Cn [[], Cn Bool]"


def test_c_call_with_wrong_argument_types_is_e_type() -> None:
    src = "ccon putchar [%mem.M 0, I32, Cn [%mem.M 0, I32]];\n" + MAIN + \
          "    ret (mem, r) = putchar $ (mem, 7I8);\n    return (mem, r);\n"
    e = fails(src.replace("ret (mem, r) = putchar $ (mem, 7I8);", "putchar (mem, 7I8, cn (m: %mem.M 0, r: I32) = return (m, r))"))
    assert e.code == "E-TYPE"


def test_redeclarations_are_e_name_with_the_first_as_related() -> None:
    src = "lam extern a () = ();\nlam extern a () = ();\n"
    e = fails(src)
    assert e.code == "E-NAME" and "redeclaration" in e.message
    assert (e.loc.line, e.loc.col) == (3, 1) and e.related and e.related[0].loc.line == 2  # type: ignore[union-attr]
    assert fails("rec F = Nat → Nat;\nrec F = Nat → Nat;\n").code == "E-NAME"
    load("let x = 1;\nlet x = 2;\n")  # `let` may rebind


def test_rec_types_plain_recursive_and_unsupported() -> None:
    w, v = load("rec S = [n: Nat, a: «n; Nat»];\nlam f (): S = (3, (0, 1, 2));\n"
                "axm %phase.Phase: *;\nrec PiPeline: * = %phase.Phase → PiPeline;\n"
                "axm %phase.pipe: PiPeline;\naxm %phase.p1: %phase.Phase;\n"
                "let pl = %phase.pipe %phase.p1 %phase.p1;\n")
    assert w.type_of(v["pl"]) is v["PiPeline"] and v["PiPeline"] in w.rec_defs
    e = fails("rec S = Nat;")
    assert e.code == "E-TYPE" and "unsupported expression" in e.message and (e.loc.line, e.loc.col) == at("rec S = Nat;", "Nat")
    # upstream's RecDecl::bind_decl takes a λ, a Π or a Σ only: not an array or a union type
    for src, found in (("rec A = «2; Nat»;", "an array type"), ("rec U = Nat ∪ Bool;", "a union type")):
        e = fails(src)
        assert e.code == "E-TYPE" and f"found {found}" in e.message, e.message


def test_mutual_recursion_in_and_groups() -> None:
    body = ("lam is_even (i: Nat): Bool = (is_odd (%core.nat.sub (i, 1)), tt)#(%core.ncmp.e (i, 0))\n"
            "and\nlam is_odd (i: Nat): Bool = (is_even (%core.nat.sub (i, 1)), ff)#(%core.ncmp.e (i, 0));\n")
    _, v = load(body)
    assert isinstance(v["is_even"], MutLam) and isinstance(v["is_odd"], MutLam)
    e = fails(body.replace("(i: Nat): Bool = (is_even", "(i: Nat): Bool = (is_evem"))
    assert e.code == "E-NAME" and "is_even" in e.message


def test_inferred_return_types() -> None:
    w, v = load("lam extern a (x: Idx 23) = %core.icmp.e (x, x);\nfun twice (x: I32) = return (x, x);\n")
    assert show(w.type_of(v["a"])) == "Idx 23 → Bool"
    assert "Cn «2; I32»" in show(w.type_of(v["twice"]))
    e = fails("fun f (k: Cn Nat) = k 1;")  # the body never returns: nothing fixes the type
    assert e.code == "E-TYPE" and "cannot infer the return type" in e.message


def test_inferred_return_types_over_the_functions_own_parameters() -> None:
    # upstream's lit/fun.mim: the return type is the outer function's parameter T
    w, v = load("fun f3 (T: *) (x y: T) = return x;\nlet g3 = fn (T: *) (x y: T) = return x;\n")
    assert show(w.type_of(v["f3"])) == show(w.type_of(v["g3"]))
    assert "T" in show(w.type_of(v["f3"])).split("→")[-1]
    # a return type naming a value the function does not bind stays an error, located
    e = fails("fun f (x: I32) =\n    con k (n: Nat) = return ‹n; x›;\n    k 1;\n")
    assert e.code == "E-TYPE" and "not a parameter of the function" in e.message, e


def test_a_use_instantiates_a_return_type_over_the_functions_parameters() -> None:
    # the inferred return type T of a polymorphic `fun` is the T of each use (it was pick's own
    # T at every use: E-TYPE "expected I32, found T"), whether the body or the use comes first
    main = ("fun extern main (argc: I32, argv: Ptr0 (Ptr0 I8)): I32 =\n"
            "    ret r = pick $ (1I32, argc);\n    ret b = first Bool $ (ff, tt);\n"
            "    ret c = cnt $ (r, 0I32);\n    return (%core.select (b, 9I32, c));\n")
    defs = ("fun pick {T: *} (a b: T) = return b;\n"
            "fun first (T: *) (a b: T) = return a;\n"
            "fun cnt (n acc: I32) =\n    con stop () = return acc;\n    con go () =\n"
            "        ret v = cnt $ (%core.wrap.sub 0 (n, 1I32), %core.wrap.add 0 (acc, 2I32));\n"
            "        return v;\n    (go, stop)#(%core.icmp.e (n, 0I32)) ();\n")
    for body in (defs + main, main + defs):
        assert run(body) == 2 and run(body, "a", "b") == 6
    w, v = load(defs)
    assert show(w.type_of(v["pick"])) == "{T: *} → Cn [«2; T», Cn T]"
    e = fails(defs + "fun bad (x: I32): Bool =\n    ret r = pick $ (x, 2I32);\n    return r;\n")
    assert e.code == "E-TYPE" and "expected `Bool`, found `I32`" in e.message, e  # uses still checked


def test_a_pack_of_continuations_of_a_run_time_length_using_its_index() -> None:
    # (a literal length: corpus valid/a_pack_of_continuations_using_its_index.mim)
    body = ("fun extern main (m: %mem.M 0, argc: I32, argv: Ptr0 (Ptr0 I8)): [%mem.M 0, I32] =\n"
            "    let n = %core.bitcast Nat argc;\n"
            "    let ks = ‹i: n; cn (x: I32) = return (m, %core.wrap.mul 0 (x, %core.conv.u i32 i))›;\n"
            "    ks#(%core.conv.u n (%core.wrap.sub 0 (argc, 1I32))) 7I32;\n")
    assert run("plugin mem;\n" + body) == 0 and run("plugin mem;\n" + body, "a", "b") == 14


def test_an_implicit_argument_of_a_type_with_one_value_solves_itself() -> None:
    # LANGUAGE.md: `«3; []»` has one value, as `[]` has (btensor.map_reduce with no inputs
    # needed `@((), (), ())`: E-TYPE "cannot infer the implicit argument")
    body = ("lam f {u: «3; []»} {v: [[], Idx 1]} (x: I32): I32 = x;\n"
            "fun extern main (argc: I32, argv: Ptr0 (Ptr0 I8)): I32 = return (f argc);\n")
    assert run(body, "a", "b") == 3


def test_a_let_in_a_parameter_type_scopes_over_the_binder() -> None:
    # upstream's lit/let_ptrn.mim
    w, v = load("axm %foo.F: * → *;\naxm %foo.f: [T: *] → Nat → %foo.F T;\n"
                "fun extern f (T: *, U: let F = %foo.F T; F, V: F) (W: F): F = return (%foo.f T 23);\n")
    assert show(w.type_of(v["f"])).count("foo.F") == 4
    e = fails("lam g (T: *, U: let F = %foo.F T; F): F = T;\nlet h = F;\n")
    assert e.code == "E-NAME"  # (the block's names do not leave the binder)


def test_an_axiom_of_a_program_needs_an_annex_name() -> None:
    e = fails("axm foo: Nat → x;\n")  # upstream's lit/error/annex.mim
    # at the name, where upstream's syntax_err points (the token found), not at `axm`
    assert e.code == "E-PARSE" and "%plugin.name" in e.message and (e.loc.line, e.loc.col) == at("axm foo", "foo")
    # and, as upstream, the unknown name in its type too
    assert [d.code for d in e.diagnostics()] == ["E-PARSE", "E-NAME"]
    w, v = load("axm %t.foo: Nat → Nat;\nlet y = %t.foo 2;\n")
    assert isinstance(v["y"].ops[0], Axiom) or "t.foo" in show(v["y"])


def test_bare_top_bottom_and_strings() -> None:
    w, v = load('let t = ⊤;\nlet s = "ab\\0";\n')
    assert show(w.type_of(v["t"])) == "*"
    assert show(w.type_of(v["s"])) == "«3; I8»"  # no terminator added: upstream's type


def test_top_is_assignable_as_in_upstream() -> None:
    load("lam f (p: %mem.Ptr0 «⊤:Nat; I8»): %mem.Ptr0 I8 = %mem.lea (p, 5I32);\n"
         "lam g (i: Idx ⊤:Nat): Idx 100 = i;\n")


def test_type_level_computation_by_unfolding() -> None:
    load("lam PtrN (n: Nat, T: *): * = (PtrN (%core.nat.sub (n, 1), %mem.Ptr0 T), T)#(%core.ncmp.e (n, 0));\n"
         "fun extern foo (mem: %mem.M 0, p: PtrN (4, I32)): [%mem.M 0, PtrN (3, I32)] = return (%mem.load (mem, p));\n")
    e = fails("lam PtrN (n: Nat, T: *): * = (PtrN (%core.nat.sub (n, 1), %mem.Ptr0 T), T)#(%core.ncmp.e (n, 0));\n"
              "fun extern foo (mem: %mem.M 0, p: PtrN (4, I32)): [%mem.M 0, PtrN (2, I32)] = return (%mem.load (mem, p));\n")
    assert e.code == "E-TYPE"


def test_as_alias_in_a_pi_type() -> None:
    w, v = load("axm %foo.F: [p e: Nat] → *;\naxm %foo.bar: {p e: Nat} as pe → Nat → [a b: %foo.F pe] → %foo.F (p, e);\n")
    assert isinstance(w.type_of(w.annexes["foo.bar"]), Pi)


def test_index_must_be_idx() -> None:
    src = "lam extern g (a: [Nat, Bool]) = a#1;"
    e = fails(src)
    assert e.code == "E-TYPE" and "is not of Idx type" in e.message and (e.loc.line, e.loc.col) == at(src, "1;")
    load("lam extern g (a: [Nat, Bool]): Bool = a#1_2;")


def test_unions_inj_match_and_dynamic_extract() -> None:
    body = ("lam pick (b: Bool, x: I32, y: Nat): I32 ∪ Nat = ((y inj I32 ∪ Nat), (x inj I32 ∪ Nat))#b;\n"
            "lam size (u: I32 ∪ Nat): I32 = match u with | a: I32 => a | n: Nat => %core.bitcast I32 n;\n"
            "lam dyn (i: Idx 2, t: [I32, Nat]): I32 = size (t#i);\n" + MAIN +
            "    let a = size (pick (tt, argc, 40));\n    let b = size (pick (ff, argc, 40));\n"
            "    let c = dyn (%core.bitcast (Idx 2) argc, (7I32, 5));\n"
            "    return (mem, %core.wrap.add 0 (%core.wrap.add 0 (a, b), c));\n")
    w, v = load(body)
    assert isinstance(w.type_of(v["pick"]), Pi) and isinstance(w.zonk(w.type_of(v["pick"]).codom), Join)  # type: ignore[attr-defined]
    assert run(body) == 1 + 40 + 5  # argc = 1: picks x = 1, then y = 40; t#1 = 5
    miss = fails("lam size (u: I32 ∪ Nat): I32 = match u with | a: I32 => a;")
    assert miss.code == "E-TYPE" and "does not cover `Nat`" in miss.message
    bad = fails("lam f (x: Bool): I32 ∪ Nat = x inj I32 ∪ Nat;")
    assert bad.code == "E-TYPE" and "not a member" in bad.message


def test_rules_are_checked_over_their_meta_variables() -> None:
    w, v = load("rule foo (a: Nat) : (%core.nat.add (a, a)) => (%core.nat.mul (a, 2));\n"
                "lam extern rules (): Rule Nat = foo;\n")
    assert show(w.type_of(v["foo"])) == "Rule Nat"
    e = fails("rule foo (a: Nat) : (%core.nat.add (a, a)) => tt;")
    assert e.code == "E-TYPE"


def test_dump_prints_rules_back_and_round_trips() -> None:
    from verimim.dump import dump_unit

    src = (HEADER + "rule foo (a: Nat) : (%core.nat.add (a, a)) => (%core.nat.mul (a, 2));\n"
           "rule bar (b: Nat) : %core.nat.add (b, 1) when %core.ncmp.l (b, 3) => %core.nat.add (1, b);\n"
           "lam extern rules (): [Rule Nat, Rule Nat] = (foo, bar);\n")
    w, unit = load_text(src, "t.mim")
    text = dump_unit(w, unit)
    assert "rule foo (a: Nat) : " in text and " => core.nat.mul (2, a);" in text
    assert "when core.ncmp.l (b, 3) =>" in text and "(foo, bar)" in text
    w2, unit2 = load_text(text, "t2.mim")
    assert dump_unit(w2, unit2) == text


def test_filters_are_accepted_and_imports_share_names() -> None:
    load("fun foo (mem: %mem.M 0, x: I32)@(%core.icmp.e (x, 23I32)): [%mem.M 0, I32] = return (mem, x);\n")
    w, _ = load_text("import compile;\nlet p = optimization_phase;\n", "t.mim")


MAIN_CON = "con extern main [mem: %mem.M 0, argc: I32, argv: %mem.Ptr0 «⊤:Nat; %mem.Ptr0 «⊤:Nat; I8»», " \
           "return: Cn [%mem.M 0, I32]] =\n"


def test_a_bracket_pattern_element_may_be_a_type_alone() -> None:
    # upstream's `b → e` (lit/regex, lit/affine): `con k [mem: %mem.M 0, I32]` takes an I32 it
    # does not name; a bare name in brackets is a type too, as upstream parses it.
    body = MAIN_CON + """    con k [mem: %mem.M 0, I32] = return (mem, 7I32);
    k (mem, argc);
"""
    assert run(body, "a") == 7
    _, values = load("lam f [Nat, n: Nat]: Nat = n;\n")
    assert show(values["f"].pi) == "«2; Nat» → Nat"  # type: ignore[attr-defined]


def test_a_bracket_element_that_is_a_function_type_over_a_sigma() -> None:
    # `[…, [Nat, Nat] → Nat, …]`: the nested brackets are the domain of a function type, not a
    # nested pattern.
    _, values = load("lam g [x: Nat, [Nat, Nat] → Nat]: Nat = x;\n")
    assert show(values["g"].pi) == "[Nat, «2; Nat» → Nat] → Nat"  # type: ignore[attr-defined]


def test_a_nested_bracket_pattern_still_binds() -> None:
    body = "lam h [[a: Nat, b: Nat], c: Nat]: Nat = %core.nat.add (a, c);\n" + MAIN_CON + \
        "    return (mem, %core.bitcast I32 (h ((2, 3), 4)));\n"
    assert run(body) == 6


def test_a_shipped_plugin_named_with_percent_is_loaded_as_upstream_does() -> None:
    # Upstream's driver loads `opt`, which imports `direct` (and gpu, …): `%direct.cps2ds`
    # resolves without `plugin direct;`.
    body = MAIN + """    con twice [m: %mem.M 0, yield: Cn [%mem.M 0, I32]] = yield (m, core.wrap.add 0 (argc, argc));
    let (mem, a) = %direct.cps2ds (%mem.M 0, [%mem.M 0, I32]) twice (mem);
    return (mem, a);
"""
    w, _ = load(body)
    assert "direct.cps2ds_dep" in w.annexes
    assert run(body, "x") == 4
    # Only `%` names (upstream's spelling) load a plugin; verimim's plain spelling asks for the line.
    e = fails(body.replace("%direct.cps2ds", "direct.cps2ds"))
    assert e.code == "E-NAME" and "is `plugin direct;` missing?" in e.message
    # verimim's own plugins are never loaded implicitly, and a `%` in a comment loads nothing.
    e = fails(MAIN + "    let b = %buffer.Buf;\n    return (mem, 0I32);\n")
    assert e.code == "E-NAME"
    w, _ = load("// 100% %gpu.init in a comment\n" + MAIN + "    return (mem, 0I32);\n")
    assert not any(name.startswith("gpu.") for name in w.annexes)


PE_DECLS = """
lam is_even (i: Nat): Bool = (is_odd (core.nat.sub (i, 1)), tt)#(core.ncmp.e (i, 0))
and
lam is_odd (i: Nat): Bool = (is_even (core.nat.sub (i, 1)), ff)#(core.ncmp.e (i, 0));
lam keep (i: Nat) @ff : Bool = (keep (core.nat.sub (i, 1)), tt)#(core.ncmp.e (i, 0));
"""


def test_a_recursive_lam_call_is_unfolded_where_it_is_built_as_upstream() -> None:
    """lit/rec.mim: `is_even 4` is `tt` in the World (upstream's World::app reduces a `lam`
    whose filter is `tt`); a `@ff` filter keeps the call, and so does a recursion on a run-time
    value, whose unfolding does not end."""
    w, v = load(PE_DECLS + "let four = is_even 4;\nlet seven = is_odd 7;\nlet kept = keep 2;\n"
                "lam dyn (n: Nat): Bool = is_even n;\n")
    assert show(v["four"]) == "tt" and show(v["seven"]) == "tt"
    kept = v["kept"]
    assert isinstance(kept, App) and kept.callee.name == "keep", show(kept)
    dyn = v["dyn"]
    assert isinstance(dyn, (MutLam, Lam)) and dyn.body is not None
    body = dyn.body
    assert isinstance(body, App) and isinstance(body.callee, MutLam) and body.callee.name == "is_even", show(body)


def test_a_typed_literal_with_an_annotation_and_idx_after_a_colon_are_refused_as_upstream() -> None:
    """upstream's LitExpr::bind refuses `3_4:(Idx 4)` (the literal states its type), and the
    ascription binds tightest, so `5:Idx 8` is `(5:Idx) 8`; verimim accepted both."""
    e = fails("let x = 3_4:(Idx 4);\n")
    assert e.code == "E-TYPE" and "shall not have a type annotation" in e.message
    assert e.loc is not None and (e.loc.line, e.loc.col) == at("let x = 3_4:(Idx 4);\n", "Idx 4")
    e = fails("let y = 7I32:I32;\n")
    assert e.code == "E-TYPE" and "`7I32` shall not have a type annotation" in e.message
    e = fails("let z = 5:Idx 8;\n")
    assert e.code == "E-TYPE" and "write `5:(Idx n)`" in e.message
    _, v = load("let z = 5:(Idx 8);\n")
    assert show(v["z"]) == "5_8"


def test_a_filter_decides_whether_a_recursive_lam_call_unfolds() -> None:
    """upstream's lit/pow_pe.mim: `@(%core.pe.is_closed b)` unfolds `pow (x, 3)` (b literal),
    not `pow (x, n)`; run on the kept call never ended (E-FUEL)."""
    src = ("lam pow (a b: Nat) @(%core.pe.is_closed b): Nat =\n"
           "    (%core.nat.mul (a, pow (a, %core.nat.sub (b, 1))), 1)#(%core.ncmp.e (b, 0));\n"
           "lam cube (x: Nat): Nat = pow (x, 3);\n"
           "lam any (x: Nat, n: Nat): Nat = pow (x, n);\n")
    _, v = load(src)
    cube, any_ = v["cube"], v["any"]
    assert "pow" not in show(cube.body) and "core.nat.mul" in show(cube.body), show(cube.body)  # type: ignore[union-attr]
    assert "pow" in show(any_.body), show(any_.body)  # type: ignore[union-attr]


def test_a_type_level_written_as_a_univ_literal() -> None:
    # langref: `*` abbreviates `Type (0:Univ)`; the level literal of type Univ was refused
    # ("a number literal cannot have type `Univ`")
    w, names = load("let S: Type (1:Univ) = Type (0:Univ);\nlet T: S = I32;\n")
    assert show(names["S"]) == "*" and show(names["T"]) == "I32"


def test_an_unknown_annex_of_a_loaded_plugin_does_not_ask_for_the_plugin() -> None:
    # (the hint asked whether `plugin direct;` was missing, on a file that has it)
    e = fails("plugin direct;\nlet x = %direct.nosuch_thing;\n")
    assert e.code == "E-NAME" and "the plugin `direct` declares no such annex" in e.message, e.message


def test_an_import_named_with_its_extension_is_the_module() -> None:
    # langref: "If the resolved file name has no extension, `.mim` is appended" (it was E-IMPORT)
    assert run("import mem.mim;\nimport compile.mim;\n" + MAIN + "    return (mem, %core.wrap.add 0 (argc, 1I32));\n") == 2


@pytest.mark.parametrize("decl, token", [("let c = 'a':I8;", "I8;"), ("let c = 'a':Nat;", "Nat;"),
                                         ('let s = "ab":«2; I8»;', "«2")])
def test_a_character_or_string_literal_with_a_type_annotation_is_e_type(decl: str, token: str) -> None:
    # upstream's LitExpr::bind: "a {} shall not have a type annotation" (`'a':Nat` was the Nat 97,
    # a typed string E-PARSE at its `:`)
    e = fails(decl + "\n")
    assert e.code == "E-TYPE" and "shall not have a type annotation" in e.message
    assert e.loc is not None and (e.loc.line, e.loc.col) == at(decl, token)


def test_index_literals_of_any_width_up_to_64() -> None:
    # `3I2` is an `Idx 4` (upstream's lexer: `lit_int(width, v)`); it was E-PARSE "invalid width 2"
    assert run(MAIN + "    let b = %core.wrap.add 0 (3I2, 2I2);\n"
               "    return (mem, %core.bitcast I32 (%core.bitcast Nat b));\n") == 1
    assert fails("let a = 4I2;\n").code == "E-TYPE"


def test_an_implicit_type_parameter_takes_a_type_as_its_argument() -> None:
    # upstream's checker solves a hole without comparing universe levels (Checker::alpha_:
    # `h1->set(d2)`): `core.select (b, I32, I8)` picks a type (upstream's own `tuple.typecat`
    # does so); it was E-TYPE "expected `?T`, found `*`"
    body = ("lam Pick (b: Bool): * = %core.select (b, I32, I8);\n" + MAIN +
            "    let x: Pick tt = argc;\n"
            "    return (mem, %core.wrap.add 0 (x, %core.bitcast I32 (%core.trait.size (Pick (%core.icmp.e (argc, 1I32))))));\n")
    assert run(body) == 1 + 4 and run(body, "a") == 2 + 1
    # an explicit argument keeps its level check, as upstream's
    assert fails("lam idt {T: *} (x: T): T = x;\nlam G (U: *): * = idt @* U;\n").code == "E-TYPE"


def test_one_type_passed_for_an_array_of_types_has_arity_one() -> None:
    # `«1; *» = *` (upstream: the arity of `*` is 1), also for an element of a grouped implicit
    # `{n m: Nat}`; both were E-TYPE "expected `«?implicit; *»`, found `*`"
    body = ("lam count2 {n m: Nat} (Ts: «n; *») (Us: «m; *»): Nat = %core.nat.add (%core.nat.mul (n, 10), m);\n"
            + MAIN + "    let a = count2 I32 (I8, I16);\n    let b = count2 (I8, I16) I32;\n"
            "    return (mem, %core.bitcast I32 (%core.nat.add (%core.nat.mul (a, 100), b)));\n")
    assert run(body) == 12 * 100 + 21


def test_the_arity_rule_for_elements_of_grouped_implicits() -> None:
    # upstream's `vec.zip: {ni n: Nat} → {Is: «ni; *», R: *} → [f: «i: ni; Is#i» → R] → …`:
    # `?ni` and `?Is` are elements of one hole each; unifying `«i: ?ni; ?Is#i» → ?R` with
    # `«2; Idx ?s» → Idx ?s` solves them as for lone implicits (it was E-TYPE "expected
    # `[?Is, ?Is] → ?R`")
    body = ("lam zip {ni n: Nat} {Is: «ni; *», R: *} (f: «i: ni; Is#i» → R) (x: «i: ni; «n; Is#i»»): «n; R» =\n"
            "    ‹j: n; f ‹i: ni; x#i#j››;\n" + MAIN +
            "    let v = zip (%core.wrap.add 0) ((argc, 2I32, 3I32), (10I32, 20I32, 30I32));\n"
            "    return (mem, %core.wrap.add 0 (v#0_3, v#2_3));\n")
    assert run(body) == 11 + 33 and run(body, "a") == 12 + 33
