"""Regression tests for front-end bugs found by probe programs: a `fn` checked against a known
`Fn` type, field names against local variables in `e # name`, `let` rebinding in source order,
`Idx` as a value, and axiom tag aliases."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.frontend.test_upstream_constructs import HEADER, MAIN, at, fails
from tests.frontend.test_upstream_constructs import load as load_upstream
from verimim import driver
from verimim.frontend.loader import load_text
from verimim.interp.machine import Machine, find_main
from verimim.ir.world import World
from verimim.printer import show


def load(body: str) -> World:
    w, _ = load_text(HEADER + body, "t.mim")
    return w


def run(body: str, *args: str) -> int:
    w = load(body)
    return Machine(w).run_main(find_main(w), ["prog", *args])


# ---------------------------------------------------------------- 1. `fn` against a known type

def test_fn_returned_where_a_fn_type_is_expected() -> None:
    body = ("fun mk (k: I32): Fn I32 → I32 =\n"
            "    return (fn (x: I32): I32 = return (%core.wrap.mul 0 (x, k)));\n"
            + MAIN + "    ret f = mk $ 3I32;\n    ret r = f $ 5I32;\n    return (mem, r);\n")
    assert run(body) == 15


def test_fn_passed_as_an_argument_of_fn_type() -> None:
    body = ("fun apply2 (f: Fn I32 → I32, x: I32): I32 =\n"
            "    ret y = f $ x;\n    ret z = f $ y;\n    return z;\n"
            + MAIN + "    ret a = apply2 $ (fn (v: I32): I32 = return (%core.wrap.add 0 (v, 3I32)), argc);\n"
            "    return (mem, a);\n")
    assert run(body) == 7


def test_fn_with_a_named_tuple_domain_against_a_fn_type() -> None:
    body = ("fun mk (k: I32): Fn [I32, I32] → I32 =\n"
            "    return (fn (a: I32, b: I32): I32 = return (%core.wrap.add 0 (a, b)));\n"
            + MAIN + "    ret f = mk $ 3I32;\n    ret r = f $ (5I32, 6I32);\n    return (mem, r);\n")
    assert run(body) == 11


def test_fn_of_the_wrong_domain_or_return_type_is_still_e_type() -> None:
    wrong_dom = "fun mk (k: I32): Fn I32 → I32 =\n    return (fn (x: I64): I32 = return 0I32);\n"
    e = fails(wrong_dom)
    assert e.code == "E-TYPE" and (e.loc.line, e.loc.col) == at(wrong_dom, "I64")
    wrong_codom = "fun mk (k: I32): Fn I32 → I32 =\n    return (fn (x: I32): I64 = return 0I64);\n"
    e = fails(wrong_codom)
    assert e.code == "E-TYPE" and (e.loc.line, e.loc.col) == at(wrong_codom, "fn (x")


def test_lam_with_a_written_codomain_other_than_the_expected_is_e_type() -> None:
    body = "let f: I32 → I32 = λ (x: I32): I64 = 0I64;\n"
    e = fails(body)
    assert e.code == "E-TYPE" and (e.loc.line, e.loc.col) == at(body, "λ")


# ---------------------------------------------------------------- 2. field names before variables

FIELDS = "rec Pt = [x: I32, y: I32, z: I32];\n"


def test_a_field_name_takes_precedence_over_a_variable_of_the_same_name() -> None:
    body = FIELDS + ("lam get (p: Pt): I32 = let x = 2_3; %core.wrap.add 0 (p#x, p#(x));\n"
                     + MAIN + "    return (mem, get (1I32, 20I32, 300I32));\n")
    assert run(body) == 301  # p#x is the field x (1), p#(x) the variable (2_3: the field z, 300)


def test_a_field_name_of_an_anonymous_sigma_gives_way_to_a_variable() -> None:
    # Upstream keeps field names only on a mutable sigma (a `rec`'s): on `[i: I32, j: I32]`
    # written as a parameter's type, `p#j` is the variable `j` (0_2). verimim read the field (22).
    body = ("lam pick (p: [i: I32, j: I32]): I32 = let j = 0_2; p#j;\n"
            + MAIN + "    return (mem, pick (21I32, 22I32));\n")
    assert run(body) == 21
    # without such a variable the field is read (upstream rejects it)
    body = "lam pick (p: [i: I32, j: I32]): I32 = p#j;\n" + MAIN + "    return (mem, pick (21I32, 22I32));\n"
    assert run(body) == 22


def test_a_parenthesized_name_is_always_the_variable() -> None:
    body = FIELDS + ("lam get (p: Pt, y: Idx 3): I32 = p#(y);\n"
                     + MAIN + "    return (mem, get ((1I32, 20I32, 300I32), 0_3));\n")
    assert run(body) == 1


def test_a_name_that_is_no_field_is_the_variable() -> None:
    body = FIELDS + ("lam get (p: Pt): I32 = let w = 1_3; p#w;\n"
                     + MAIN + "    return (mem, get (1I32, 20I32, 300I32));\n")
    assert run(body) == 20


# ---------------------------------------------------------------- 3. `let` rebinding in source order

def test_a_top_level_let_may_rebind_in_terms_of_the_previous_binding() -> None:
    body = "let a = 1I32;\nlet a = %core.wrap.add 0 (a, 2I32);\n" + MAIN + "    return (mem, a);\n"
    assert run(body) == 3


def test_a_use_between_two_bindings_refers_to_the_earlier() -> None:
    body = ("let a = 1I32;\nlet b = %core.wrap.add 0 (a, 1I32);\nlet a = 10I32;\n"
            + MAIN + "    return (mem, %core.wrap.add 0 (a, b));\n")
    assert run(body) == 12


def test_a_function_sees_the_binding_before_it_and_forward_references_stay() -> None:
    body = ("let k = 1I32;\n"
            "lam f (x: I32): I32 = %core.wrap.add 0 (g x, k);\n"  # g: forward; k: the first
            "let k = 100I32;\n"
            "lam g (x: I32): I32 = %core.wrap.mul 0 (x, k);\n"   # k: the second
            + MAIN + "    return (mem, f 2I32);\n")
    assert run(body) == 201


def test_a_name_with_no_binding_before_it_is_the_first_after_it() -> None:
    body = ("lam f (x: I32): I32 = %core.wrap.add 0 (x, k);\n"
            "let k = 5I32;\nlet k = 7I32;\n" + MAIN + "    return (mem, f 0I32);\n")
    assert run(body) == 5


def test_a_let_defined_in_terms_of_itself_is_still_an_error() -> None:
    # upstream binds a let's value before its name: the name is unknown there (E-NAME)
    body = "let a = %core.wrap.add 0 (a, 2I32);\n"
    e = fails(body)
    assert e.code == "E-NAME" and "a `let` does not see the name it binds" in e.message, e.message


def test_a_let_in_a_where_block_rebinding_a_parameter_reads_the_parameter() -> None:
    # `where let argc = argc + 41I32; end`: the value reads main's argc (it was E-TYPE "defined
    # in terms of itself"); a later let of the block is still seen by an earlier one
    assert run(MAIN + "    return (mem, argc)\n    where\n        let argc = %core.wrap.add 0 (argc, 41I32);\n"
               "    end;\n") == 42
    assert run("let x = 1I32;\n" + MAIN + "    return (mem, y)\n    where\n        let y = x;\n"
               "        let x = %core.wrap.add 0 (x, 41I32);\n    end;\n") == 42


def test_rebinding_in_a_where_block_and_recursion_keep_working() -> None:
    body = (MAIN + "    loop (mem, argc, 0I32)\n    where\n"
            "        let step = 1I32;\n"
            "        let step = %core.wrap.add 0 (step, step);\n"
            "        con loop (m: %mem.M 0, n: I32, acc: I32) =\n"
            "            (stop, go)#(%core.icmp.ne (n, 0I32)) ()\n"
            "            where\n"
            "                con stop () = return (m, acc);\n"
            "                con go () = loop (m, %core.wrap.sub 0 (n, 1I32), %core.wrap.add 0 (acc, step));\n"
            "            end;\n    end\n")
    assert run(body) == 2
    assert run(body, "x", "y") == 6


def test_mutually_recursive_group_members_see_each_other() -> None:
    body = (MAIN + "    ev (argc, 0I32)\n    where\n"
            "        let base = 100I32;\n"
            "        rec ev: Cn [I32, I32] = cn (n acc: I32) =\n"
            "            (done, step)#(%core.icmp.ne (n, 0I32)) ()\n"
            "            where\n"
            "                con done () = return (mem, %core.wrap.add 0 (acc, base));\n"
            "                con step () = od (%core.wrap.sub 0 (n, 1I32), %core.wrap.add 0 (acc, 1I32));\n"
            "            end\n"
            "        and con od (n acc: I32) =\n"
            "            (done, step)#(%core.icmp.ne (n, 0I32)) ()\n"
            "            where\n"
            "                con done () = return (mem, %core.wrap.add 0 (acc, base));\n"
            "                con step () = ev (%core.wrap.sub 0 (n, 1I32), %core.wrap.add 0 (acc, 1I32));\n"
            "            end;\n"
            "        let base = 0I32;\n    end\n")
    # Upstream binds a `where` block's declarations in reverse order (each sees those after it):
    # the group sees the `base` after it, 0 (it said 101, reading the one before it).
    assert run(body) == 1
    assert run(body, "x") == 2


def test_body_lets_rebind_in_sequence_with_hoisted_functions() -> None:
    body = (MAIN + "    let a = argc;\n    let a = %core.wrap.add 0 (a, 10I32);\n"
            "    return (mem, a);\n")
    assert run(body, "x") == 12


# ---------------------------------------------------------------- 4. `Idx` as a value

def test_idx_alone_is_the_type_former_nat_to_star() -> None:
    body = ("let F = Idx;\n" + MAIN + "    let x: F 4 = 3_4;\n    return (mem, %core.conv.u i32 x);\n")
    assert run(body) == 3
    w, unit = load_text(HEADER + "let F = Idx;\nlet T = (Idx) 6;\n", "t.mim")
    F, T = (unit.scope.names[n].force() for n in ("F", "T"))  # type: ignore[union-attr]
    assert show(w.type_of(F)) == "Nat → *" and T is w.idx_n(6)


def test_idx_as_an_argument_of_a_higher_order_type_function() -> None:
    body = ("lam Ap (G: Nat → *) (n: Nat): * = G n;\n"
            + MAIN + "    let x: Ap (Idx) 5 = 4_5;\n    return (mem, %core.conv.u i32 x);\n")
    assert run(body) == 4


def test_type_without_a_level_is_still_a_parse_error() -> None:
    e = fails("let F = Type;\n")  # upstream's `Type` always takes a level
    line, col = at("let F = Type;\n", "Type;")
    assert e.code == "E-PARSE" and (e.loc.line, e.loc.col) == (line, col + 4)  # type: ignore[union-attr]


# ---------------------------------------------------------------- 5. axiom tag aliases

ALIASED = "axm %foo.op(a, b = bee = bz): I32 → I32;\n"


def test_an_alias_names_the_same_axiom_as_its_tag() -> None:
    w = load(ALIASED + "let x = %foo.op.bee;\nlet y = %foo.op.bz;\n")
    b = w.annexes["foo.op.b"]
    assert w.annexes["foo.op.bee"] is b and w.annexes["foo.op.bz"] is b and w.annexes["foo.op.a"] is not b
    body = ALIASED + "lam f (x: I32): I32 = %foo.op.bee x;\n" + MAIN + "    return (mem, argc);\n"
    assert run(body) == 1


def test_a_tag_or_alias_named_twice_is_e_name() -> None:
    e = fails("axm %foo.op(a, b = a): I32 → I32;\n")
    assert e.code == "E-NAME" and "redeclaration" in e.message


def test_dump_of_an_aliased_axiom_reparses(tmp_path: Path) -> None:
    src = tmp_path / "alias.mim"
    src.write_text(HEADER + ALIASED + "lam f (x: I32): I32 = %foo.op.bee x;\n"
                   + MAIN + "    return (mem, f argc);\n", encoding="utf-8")
    first = driver.dump(str(src), [])
    assert first.ok and first.text, [d.render() for d in first.diagnostics]
    again = tmp_path / "again.mim"
    again.write_text(first.text, encoding="utf-8")
    second = driver.dump(str(again), [])
    assert second.ok and second.text == first.text, [d.render() for d in second.diagnostics]


def test_dump_prints_each_binding_of_a_rebound_let_with_its_own_value(tmp_path: Path) -> None:
    # It printed every binding of `a` with the last one's value (`let a = 10I32;` twice).
    src = tmp_path / "rebound.mim"
    src.write_text(HEADER + "let a = 1I32;\nlet b = %core.wrap.add 0 (a, 1I32);\nlet a = 10I32;\n"
                   + MAIN + "    return (mem, %core.wrap.add 0 (a, b));\n", encoding="utf-8")
    text = driver.dump(str(src), []).text
    lets = [line for line in text.splitlines() if line.startswith("let ")]
    assert lets == ["let a = 1I32;", "let b = 2I32;", "let a_1 = 10I32;"], text
    again = tmp_path / "again.mim"
    again.write_text(text, encoding="utf-8")
    assert driver.run(str(again), [], []).data["result"] == 12


@pytest.mark.parametrize("phases, ran", [
    ("()", []),  # «?n; compile.Phase» against `[]`: n = 0
    ("(compile.named \"mem.alloc2malloc_repl\", mem.alloc2malloc_repl)", ["mem.alloc2malloc_repl"] * 2),
])
def test_an_array_of_unknown_arity_takes_the_arity_of_what_it_meets(tmp_path: Path, phases: str,
                                                                    ran: list[str]) -> None:
    # LANGUAGE.md: «0; T» = [], so `compile.phases ff ()` has n = 0 (it was E-TYPE "expected
    # «?n; compile.Phase», found []"). A single phase needs `@1`: n = 1 is one answer among
    # others for a type that is no array (buffer shapes rely on that).
    src = tmp_path / "own.mim"
    src.write_text("plugin core;\nplugin mem;\nimport compile;\n"
                   f"lam _compile (): compile.Phase = compile.phases ff {phases};\n"
                   + MAIN + "    return (mem, 43I32);\n", encoding="utf-8")
    report = driver.run(str(src), [], [])
    assert report.ok and report.data["result"] == 43, [d.render() for d in report.diagnostics]
    assert [r for r in report.data["pipeline"]["ran"] if "alloc2malloc" in r] == ran


def test_an_array_of_unknown_arity_still_checks_its_elements() -> None:
    e = fails("import compile;\nlam _compile (): compile.Phase = compile.phases ff (1I32, 2I32);\n")
    assert e.code == "E-TYPE"


def test_a_fun_called_in_direct_style_is_told_how_it_is_called() -> None:
    """`let (m0, r) = twice (m0, x);` checks `(m0, x)` against (arguments, return continuation):
    the mismatch points at `m0`; a note at the callee says the calling convention and `ret`."""
    body = ("plugin mem;\n"
            "fun twice (m0: %mem.M 0, v: I32): [%mem.M 0, I32] = return (m0, %core.wrap.add 0 (v, v));\n"
            "fun f (m0: %mem.M 0, x: I32): [%mem.M 0, I32] =\n"
            "    let (m0, r) = twice (m0, x);\n"
            "    return (m0, r);\n")
    e = fails(body)
    assert e.code == "E-TYPE" and (e.loc.line, e.loc.col) == at(body, "m0, x)")
    (note,) = e.related
    assert note.loc is not None and (note.loc.line, note.loc.col) == at(body, "twice (m0, x)")
    assert "continuation-passing style" in note.message and "`ret … = twice $ (…);`" in note.message
    assert "[[mem.M 0, I32], Cn [mem.M 0, I32]]" in note.message
    # A mismatch in an argument of something that is no `fun` has no such note.
    e = fails("lam g (x: I32): I32 = x;\nlet y = g 1I64;\n")
    assert e.code == "E-TYPE" and e.related == ()


@pytest.mark.parametrize("arg, note", [
    ("%mem.lea (a, 2)", "the `Idx 4` literal 2 is written `2_4`"),
    ("%mem.lea (a, 9)", "9 is no value of `Idx 4` (0 to 3)"),
])
def test_a_number_without_suffix_where_an_index_is_expected_says_how_the_literal_is_written(arg: str, note: str) -> None:
    body = ("plugin mem;\n"
            "fun f (m0: %mem.M 0, a: %mem.Ptr0 «4; I32»): [%mem.M 0, I32] =\n"
            f"    let (m0, v) = %mem.load (m0, {arg});\n"
            "    return (m0, v);\n")
    e = fails(body)
    assert e.code == "E-TYPE" and "expected `Idx 4`, found `Nat`" in e.message
    assert [r.message for r in e.related] == [f"a number without suffix is a `Nat`; {note}"]
    e = fails("lam g (x: I32): I32 = x;\nlet y = g 7;\n")
    assert [r.message for r in e.related] == ["a number without suffix is a `Nat`; the `I32` literal 7 is written `7I32`"]
    e = fails("lam g (x: Bool): Bool = x;\nlet y = g 1;\n")
    assert [r.message for r in e.related] == ["a number without suffix is a `Nat`; the `Bool` literal 1 is written `tt` or `1_2`"]


@pytest.mark.parametrize("decl", ["let %core.nat.add = lm (a: Nat, b: Nat): Nat = 7;",
                                  "axm %core.wrap.add: Nat;",
                                  "lam %core.trait.size (T: *): Nat = 3;",
                                  "axm %foo.op: Nat;\naxm %foo.op: Nat;"])
def test_a_program_cannot_declare_an_annex_again(decl: str) -> None:
    # A program's `let %core.nat.add = …` replaced the plugin's operation for every use after
    # it: `check` said ok and `run` computed 1 + 1 = 7 (upstream asserts an annex is new).
    e = fails(decl + "\n")
    assert e.code == "E-NAME" and "redeclaration of `%" in e.message, e.message
    assert e.loc is not None and e.loc.line == (HEADER + decl).count("\n") + 1, e.loc


def test_a_program_may_declare_a_new_annex() -> None:
    w, v = load_upstream("let %foo.k = 4;\nlet x = core.nat.add (%foo.k, 1);\n")
    assert show(v["x"]) == "5"


def test_an_operation_on_an_index_of_unknown_width_names_it() -> None:
    # `core.idx_unsafe 7` is an `Idx ⊤:Nat`: the message said "not known: None"
    from verimim.diagnostics import VerimimError

    body = MAIN + "    return (mem, core.bitcast I32 (core.conv.u 4294967296 (core.idx_unsafe 7)));\n"
    with pytest.raises(VerimimError) as info:
        run(body)
    assert info.value.code == "E-UNSUPPORTED" and "None" not in info.value.message, info.value.message
    assert "`core.conv.u` on an `Idx ⊤:Nat`" in info.value.message, info.value.message


@pytest.mark.parametrize("arg, n", [("(1I32, 2I8)", 2), ("3I32", 1), ("()", 0)])
def test_an_arity_that_is_one_component_of_an_implicit_pair_is_inferred(arg: str, n: int) -> None:
    # `{n m: Nat}` is one implicit argument, a pair: `«i: n; Ts#i»` is `«i: ?p#0; ?Ts#i»`, which
    # the arity rule did not solve (E-TYPE, while `{n: Nat}` alone worked): so
    # `btensor.map_reduce_post` could not be applied without spelling out its implicit arguments
    w, v = load_upstream("axm %foo.pair: {n m: Nat} → {Ts: «n; *»} → [x: «i: n; Ts#i»] → Nat;\n"
                         "lam count {n m: Nat} {Ts: «n; *»} (x: «i: n; Ts#i»): Nat = n;\n"
                         f"let x = %foo.pair {arg};\nlet c = count {arg};\n")
    assert show(v["c"]) == str(n)


def test_a_type_level_recursion_that_never_ends_is_a_mismatch_that_says_so() -> None:
    # upstream's lit/ptrn.mim with `nat.sub` made `nat.add`: each unfolding of `PtrN (n + 1, Ptr0 T)`
    # first tried the whole, growing term, and the check ran for minutes on the unifier's fuel
    decl = ("plugin mem;\nlam PtrN(n: Nat, T: *): * = (PtrN (%core.nat.add (n, 1), %mem.Ptr0 T), T)#(%core.ncmp.e (n, 0));\n"
            "fun extern foo(mem: %mem.M 0, p: PtrN (4, I32)): [%mem.M 0, PtrN (3, I32)] = return (%mem.load (mem, p));\n")
    e = fails(decl)
    assert e.code == "E-TYPE" and "the type-level recursion of `PtrN` did not end within 256 nested unfoldings" \
        in e.message, e.message
    # the recursion that ends (upstream's own) still reduces
    load_upstream(decl.replace("core.nat.add (n, 1)", "core.nat.sub (n, 1)"))
