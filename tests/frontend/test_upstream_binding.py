"""Name binding and type equality as upstream MimIR has them (src/mim/ast/bind.cpp, emit.cpp,
world.cpp, the core normalizers), where verimim's front end differed on programs upstream
accepts: a later declaration shadowing an outer name, `where` blocks bound in reverse order, an
`as` alias on a lambda's parameters, tuples' η rule, commuted `core.nat` operands."""
from __future__ import annotations

from tests.frontend.test_upstream_constructs import MAIN, run  # (`%mem.…` loads mem)


def test_a_use_before_a_local_declaration_means_the_outer_name() -> None:
    # Upstream binds a block's declarations in order: `r` calls the top-level `f` (1), the
    # return the local one (100). verimim hoisted the local `f` over the whole block (200).
    body = ("lam f (x: I32): I32 = x;\n" + MAIN + "    let r = f argc;\n    lam f (x: I32): I32 = 100I32;\n"
            "    return (mem, %core.wrap.add 0 (r, f 0I32));\n")
    assert run(body) == 101


def test_a_forward_reference_to_a_name_nothing_outside_binds_still_resolves() -> None:
    # (LANGUAGE.md: declarations of a block may refer to each other.)
    body = MAIN + "    let r = g argc;\n    lam g (x: I32): I32 = %core.wrap.add 0 (x, 5I32);\n    return (mem, r);\n"
    assert run(body) == 6


def test_a_where_block_binds_its_declarations_in_reverse_order() -> None:
    # `let r = g argc` comes last in the block, so it is bound first: its `g` is the top-level one.
    body = ("lam g (x: I32): I32 = x;\n" + MAIN + "    return (mem, r)\n    where\n"
            "        lam g (x: I32): I32 = 100I32;\n        let r = g argc;\n    end\n")
    assert run(body) == 1
    # The other order: `r` sees the where block's `g`.
    body = ("lam g (x: I32): I32 = x;\n" + MAIN + "    return (mem, r)\n    where\n"
            "        let r = g argc;\n        lam g (x: I32): I32 = 100I32;\n    end\n")
    assert run(body) == 100


def test_an_alias_of_implicit_parameters_stays_implicit() -> None:
    body = ("lam ld {T: *, a: Nat} as Ta (m: %mem.M a, p: %mem.Ptr (T, a)): [%mem.M a, T] = %mem.load (m, p);\n"
            + MAIN + "    let (mem, p) = %mem.alloc (I32, 0) mem;\n    let mem = %mem.store (mem, p, argc);\n"
            "    let (mem, v) = ld (mem, p);\n    let mem = %mem.free (mem, p);\n    return (mem, v);\n")
    assert run(body, "x") == 2


def test_an_alias_is_the_tuple_of_its_components() -> None:
    # `X#1_2` is `n` (upstream binds each component to the alias's projection), and a pointer
    # of the alias is one of its components, as upstream mem.mim writes its signatures.
    body = ("lam g [T: *, n: Nat] as X (a: «n; T»): «X#1_2; X#0_2» = a;\n"
            "lam ld [T: *, a: Nat] as Ta (m: %mem.M a, p: %mem.Ptr Ta): [%mem.M a, T] = %mem.load (m, p);\n"
            + MAIN + "    let a = g (I32, 2) ‹2; argc›;\n    let (mem, p) = %mem.alloc (I32, 0) mem;\n"
            "    let mem = %mem.store (mem, p, a#1_2);\n    let (mem, v) = ld (I32, 0) (mem, p);\n"
            "    let mem = %mem.free (mem, p);\n    return (mem, v);\n")
    assert run(body, "x", "y") == 3


def test_a_tuple_of_a_values_projections_is_that_value() -> None:
    body = "lam g (X: [*, Nat]) (p: %mem.Ptr (X#0_2, X#1_2)): %mem.Ptr X = p;\n" + MAIN + "    return (mem, argc);\n"
    assert run(body) == 1


def test_nat_operands_commute_and_a_sum_of_twins_is_a_product() -> None:
    body = ("lam swap {T: *} (n m: Nat) (x: «%core.nat.add (n, m); T»): «%core.nat.add (m, n); T» = x;\n"
            "lam dbl (n: Nat) (x: «%core.nat.add (n, n); I32»): «%core.nat.mul (2, n); I32» = x;\n"
            + MAIN + "    let a = swap (1, 2) ‹3; argc›;\n    let b = dbl 2 ‹4; argc›;\n"
            "    return (mem, %core.wrap.add 0 (a#2_3, b#3_4));\n")
    assert run(body, "x") == 4
