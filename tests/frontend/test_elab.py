"""Elaborator unit tests from Mim snippets: implicit arguments and the arity rule, dependent
types, `anx` unfolding, folding on literal arguments, recursive continuations, `ret`, `where`,
curried lambdas, diagnostics (codes and exact positions) and recovery after a failure."""
from __future__ import annotations

from pathlib import Path

import pytest

from verimim.diagnostics import Loc, VerimimError
from verimim.frontend.loader import Loader, load_text
from verimim.frontend.scope import Lazy
from verimim.ir.defs import App, Def, Extract, Lam, Lit, MutLam, Pi, Sigma, Tuple
from verimim.ir.world import World
from verimim.printer import show

HEADER = "plugin core; plugin mem; plugin gpu;\n"
MAIN_SIG = ("fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)"
            ": [mem.M 0, I32] =\n")


class Prog:
    def __init__(self, src: str, path: str = "t.mim", include: list[str] | None = None) -> None:
        self.path = path
        self.world, self.unit = load_text(src, path, include)

    def __getitem__(self, name: str) -> Def:
        v = self.unit.scope.names[name]
        return v.force() if isinstance(v, Lazy) else v

    def mut(self, name: str) -> MutLam:
        hits = [m for m in self.world.muts if m.name == name and m.loc is not None and m.loc.file == self.path]
        assert len(hits) == 1, f"{len(hits)} mutables named {name}"
        return hits[0]


def P(body: str, header: str = HEADER) -> Prog:
    return Prog(header + body)


def error(src: str, path: str = "t.mim", include: list[str] | None = None) -> VerimimError:
    with pytest.raises(VerimimError) as info:
        load_text(src, path, include)
    return info.value


def where(e: VerimimError) -> tuple[int, int]:
    assert e.loc is not None
    return e.loc.line, e.loc.col


def pos(src: str, token: str, nth: int = 0) -> tuple[int, int]:
    """The 1-based (line, col) of the `nth` occurrence of `token` in `src`."""
    at = -1
    for _ in range(nth + 1):
        at = src.index(token, at + 1)
    line = src.count("\n", 0, at) + 1
    return line, at - (src.rfind("\n", 0, at) + 1) + 1


# A kernel of the seed's shape, taking `args` as its launch-argument parameter.
def kernel(args: str) -> str:
    return ("con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,\n"
            "            group_id: Idx 2, item_id: Idx 4, (), " + args + ",\n"
            "            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =\n"
            "    return (m1, m3, m4, m5);\n")


def launch_implicits(p: Prog, name: str) -> Def:
    """The implicit argument `(n, Ts)` that elaboration supplied to `gpu.launch`."""
    v = p[name]
    assert isinstance(v, App) and v.head is p.world.annex("gpu.launch")
    return v.args()[0]


# ============================================================================= implicit arguments


def test_mem_load_store_infer_type_and_address_space() -> None:
    p = P("lam ld (m: mem.M 0, p: mem.Ptr (I16, 0)): [mem.M 0, I16] = mem.load (m, p);\n"
          "lam st (m: mem.M 3, p: mem.Ptr ([I8, I32], 3), v: [I8, I32]): mem.M 3 = mem.store (m, p, v);\n")
    w = p.world
    ld, st = p["ld"], p["st"]
    assert isinstance(ld, Lam) and isinstance(st, Lam)
    i8, i16, i32 = w.idx_n(2**8), w.idx_n(2**16), w.idx_n(2**32)
    assert isinstance(ld.body, App) and ld.body.args()[0] is w.tuple([i16, w.lit_nat(0)])
    assert isinstance(st.body, App) and st.body.args()[0] is w.tuple([w.sigma([i8, i32]), w.lit_nat(3)])


def test_mem_lea_arity_rule_on_arrays_and_sigmas() -> None:
    p = P("lam le (p: mem.Ptr («4; I32», 3), i: Idx 4): mem.Ptr (I32, 3) = mem.lea (p, i);\n"
          "lam le2 (p: mem.Ptr ([I8, I32], 0)): mem.Ptr (I32, 0) = mem.lea (p, 1_2);\n"
          "lam le3 (p: gpu.GlobalPtr «8; I16», i: Idx 8) = mem.lea (p, i);\n")
    w = p.world
    i8, i16, i32 = w.idx_n(2**8), w.idx_n(2**16), w.idx_n(2**32)
    le, le2, le3 = p["le"], p["le2"], p["le3"]
    assert isinstance(le, Lam) and isinstance(le2, Lam) and isinstance(le3, Lam)
    # n = 4, Ts = ‹4; I32›, a = 3
    assert le.body.args()[0] is w.tuple([w.lit_nat(4), w.pack(w.lit_nat(4), i32), w.lit_nat(3)])  # type: ignore[attr-defined]
    # a sigma: n = 2, Ts = (I8, I32)
    assert le2.body.args()[0] is w.tuple([w.lit_nat(2), w.tuple([i8, i32]), w.lit_nat(0)])  # type: ignore[attr-defined]
    # the result type is inferred: mem.Ptr (I16, 1)
    ptr = w.annex("mem.Ptr")
    assert le3.pi.codom is w.app(ptr, w.tuple([i16, w.lit_nat(1)]))


def test_mem_lea_index_of_the_wrong_size_is_a_type_error() -> None:
    src = HEADER + "lam le (p: mem.Ptr («4; I32», 0)): mem.Ptr (I32, 0) = mem.lea (p, 2_8);\n"
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "2_8")
    assert "Idx 4" in e.message and "Idx 8" in e.message


@pytest.mark.parametrize("args, call, n, ts", [
    ("()", "()", 0, None),
    ("data: gpu.GlobalPtr I32", "d", 1, "one"),
    ("(a: gpu.GlobalPtr I32, b: gpu.GlobalPtr I32)", "(d, d)", 2, "pair"),
    ("(a: gpu.GlobalPtr I32, b: gpu.GlobalPtr I8)", "(d, e)", 2, "mixed"),
    ("(a: gpu.GlobalPtr I32, b: gpu.GlobalPtr I32, c: Nat)", "(d, d, 3)", 3, "triple"),
])
def test_gpu_launch_infers_n_from_the_kernel(args: str, call: str, n: int, ts: str | None) -> None:
    p = P(kernel(args) +
          "lam go (d: gpu.GlobalPtr I32, e: gpu.GlobalPtr I8) = "
          f"gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel {call};\n"
          "let l = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel;\n")
    w = p.world
    imp = launch_implicits(p, "l")
    assert w.extract_n(imp, 2, 0) is w.lit_nat(n)
    ptr = w.app(w.annex("mem.Ptr"), w.tuple([w.idx_n(2**32), w.lit_nat(1)]))
    ptr8 = w.app(w.annex("mem.Ptr"), w.tuple([w.idx_n(2**8), w.lit_nat(1)]))
    want_ts = {None: w.unit(), "one": ptr, "pair": w.pack(w.lit_nat(2), ptr),
               "mixed": w.tuple([ptr, ptr8]), "triple": w.tuple([ptr, ptr, w.nat()])}[ts]
    assert w.extract_n(imp, 2, 1) is want_ts
    # applying it to the arguments type-checks, and yields a `Fn`
    go = p["go"]
    assert isinstance(go, Lam)
    assert w.is_cn(go.pi.codom)


def test_gpu_launch_with_the_wrong_argument_is_a_type_error() -> None:
    src = (HEADER + kernel("data: gpu.GlobalPtr I32") +
           "lam go (h: mem.Ptr0 I32) = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel h;\n")
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "h;")
    src = (HEADER + kernel("(a: gpu.GlobalPtr I32, b: gpu.GlobalPtr I32)") +
           "lam go (d: gpu.GlobalPtr I32) = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel d;\n")
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "d;")


def test_unsolved_implicit_is_a_type_error_naming_it() -> None:
    src = HEADER + "lam pick {T: *} (x: I32): I32 = x;\nlet y = pick 1I32;\n"
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "pick", 1)
    assert "`T`" in e.message and "@" in e.message


def test_explicit_implicit_argument_with_at() -> None:
    p = P("lam pick {T: *} (x: I32): I32 = x;\nlet y = pick @I8 1I32;\n"
          "let z = core.wrap.add @256 0 (1I8, 2I8);\n")
    assert p["y"] is p.world.lit_idx(2**32, 1)
    assert p["z"] is p.world.lit_idx(256, 3)


def test_implicit_solved_by_a_type_with_one_value() -> None:
    # Ts: «0; *» has the one value (): solved without appearing anywhere
    p = P(kernel("()") + "let l = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel ();\n")
    assert p.world.extract_n(launch_implicits(p, "l"), 2, 1) is p.world.unit()


# ============================================================================= dependent types


def test_dependent_array_of_streams() -> None:
    p = P("lam f (n: Nat) (s: «n; gpu.Stream»): «n; gpu.Stream» = s;\n"
          "let f2 = f 2;\nlet f1 = f 1;\nlet f0 = f 0;\n")
    w = p.world
    stream = w.annex("gpu.Stream")
    assert w.type_of(p["f2"]) is w.pi(w.arr(w.lit_nat(2), stream), w.arr(w.lit_nat(2), stream))
    assert w.type_of(p["f1"]) is w.pi(stream, stream)  # «1; T» = T
    assert w.type_of(p["f0"]) is w.pi(w.unit_t(), w.unit_t())  # «0; T» = []


def test_with_streams_checks_the_dependent_function_type() -> None:
    ok = ("fun work (m0: mem.M 0, m1: gpu.GlobalM, ss: «2; gpu.Stream»): [mem.M 0, gpu.GlobalM] = "
          "return (m0, m1);\n"
          "let ws = gpu.with_streams (2, work);\n")
    p = P(ok)
    assert isinstance(p["ws"], App)
    src = HEADER + ok.replace("(2, work)", "(3, work)")
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "work)")
    one = ("fun work (m0: mem.M 0, m1: gpu.GlobalM, s: gpu.Stream): [mem.M 0, gpu.GlobalM] = "
           "return (m0, m1);\n")
    P(one + "let ws = gpu.with_streams (1, work);\n")  # «1; Stream» is Stream
    src = HEADER + one + "let ws = gpu.with_streams (2, work);\n"
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "work)")


def test_dependent_sigma_and_pi() -> None:
    p = P("lam mk (n: Nat, i: Idx n): [m: Nat, Idx m] = (n, i);\n"
          "let v = mk (4, 3_4);\n"
          "lam get (x: [m: Nat, Idx m]): Idx (x#0_2) = x#1_2;\n"
          "let g = get (5, 2_5);\n")
    w = p.world
    assert p["v"] is w.tuple([w.lit_nat(4), w.lit_idx(4, 3)])
    assert p["g"] is w.lit_idx(5, 2)
    src = HEADER + "lam mk (n: Nat, i: Idx n): [m: Nat, Idx m] = (n, i);\nlet v = mk (4, 3_5);\n"
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "3_5")


# ============================================================================= anx unfolding and folding


def test_anx_let_and_anx_lam_unfold() -> None:
    p = P("let gp = gpu.GlobalPtr I32;\nlet gm = gpu.GlobalM;\nlet sp = gpu.SharedPtr «4; I8»;\n"
          "let nuw = core.mode.nuw;\nlet h = mem.Ptr0 Nat;\nlet asg = gpu.addr_space_global;\n")
    w = p.world
    ptr, m = w.annex("mem.Ptr"), w.annex("mem.M")
    assert p["gp"] is w.app(ptr, w.tuple([w.idx_n(2**32), w.lit_nat(1)]))
    assert show(p["gp"]) == "mem.Ptr (I32, 1)"
    assert p["gm"] is w.app(m, w.lit_nat(1))
    assert p["sp"] is w.app(ptr, w.tuple([w.arr(w.lit_nat(4), w.idx_n(256)), w.lit_nat(3)]))
    assert p["nuw"] is w.lit_nat(2)
    assert p["h"] is w.app(ptr, w.tuple([w.nat(), w.lit_nat(0)]))
    assert p["asg"] is w.lit_nat(1)


def test_anx_types_are_interchangeable_with_their_unfolding() -> None:
    P("lam f (p: gpu.GlobalPtr I32): mem.Ptr (I32, 1) = p;\n"
      "lam g (m: mem.M 3): gpu.SharedM = m;\n")
    src = HEADER + "lam f (p: gpu.GlobalPtr I32): mem.Ptr (I32, 3) = p;\n"
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "p;")
    assert "mem.Ptr (I32, 3)" in e.message and "mem.Ptr (I32, 1)" in e.message


@pytest.mark.parametrize("expr, want", [
    ("core.bitcast Nat ff", ("nat", 0)),
    ("core.bitcast Nat tt", ("nat", 1)),
    ("core.trait.size I32", ("nat", 4)),
    ("core.trait.size gpu.Stream", ("nat", 8)),
    ("core.trait.size (gpu.GlobalPtr I8)", ("nat", 8)),
    ("core.trait.size «4; I16»", ("nat", 8)),
    ("core.nat.add (2, 3)", ("nat", 5)),
    ("core.nat.add (2, core.nat.mul (3, 4))", ("nat", 14)),
    ("core.ncmp.l (2, 3)", ("bool", 1)),
    ("(10, 20)#tt", ("nat", 20)),
    ("(10, 20)#(core.ncmp.g (2, 3))", ("nat", 10)),
    ("‹4; 7›#2_4", ("nat", 7)),
    ("core.wrap.add 0 (200I8, 100I8)", ("idx", 256, 44)),
    ("core.select (ff, 1I8, 2I8)", ("idx", 256, 2)),
])
def test_normalizers_fold_on_literal_arguments(expr: str, want: tuple[str, ...]) -> None:
    p = P(f"let x = {expr};\n")
    w = p.world
    kind, *args = want
    expected = {"nat": lambda: w.lit_nat(args[0]), "bool": lambda: w.lit_bool(bool(args[0])),
                "idx": lambda: w.lit_idx(args[0], args[1])}[kind]()
    assert p["x"] is expected


def test_normal_forms_in_source() -> None:
    p = P("let a = «1; I32»;\nlet b = [I32];\nlet c = (5);\nlet d = «0; I32»;\nlet e = ‹0; 5›;\n"
          "let f = [I32, I32, I32];\nlet g = (1, 1);\nlet h = «2, 3; I8»;\nlet i = «i: 2; (Nat, Bool)#i»;\n"
          "let j = 7#0_1;\n")
    w = p.world
    i8, i32 = w.idx_n(256), w.idx_n(2**32)
    assert p["a"] is i32 and p["b"] is i32
    assert p["c"] is w.lit_nat(5)
    assert p["d"] is w.unit_t() and p["e"] is w.unit()
    assert p["f"] is w.arr(w.lit_nat(3), i32)
    assert p["g"] is w.pack(w.lit_nat(2), w.lit_nat(1))
    assert p["h"] is w.arr(w.lit_nat(2), w.arr(w.lit_nat(3), i8))
    assert p["i"] is w.sigma([w.nat(), w.bool_t()])
    assert p["j"] is w.lit_nat(7)


def test_multi_dimensional_shape_written_as_a_tuple() -> None:
    p = P("let a = «(2, 2); I32»;\nlet b = «2; «2; I32»»;\n")
    assert p["a"] is p["b"]


# ============================================================================= lambdas and continuations


def test_curried_lams_beta_reduce() -> None:
    p = P("lam scale (k: I32) (x: I32): I32 = core.wrap.mul 0 (k, x);\n"
          "let twelve = scale 3I32 4I32;\nlet triple = scale 3I32;\nlet nine = triple 3I32;\n"
          "lam add3 (a: Nat, b: Nat, c: Nat): Nat = core.nat.add (core.nat.add (a, b), c);\n"
          "let six = add3 (1, 2, 3);\n")
    w = p.world
    i32 = w.idx_n(2**32)
    assert p["twelve"] is w.lit_idx(2**32, 12)
    assert p["nine"] is w.lit_idx(2**32, 9)
    assert isinstance(p["triple"], Lam) and w.type_of(p["triple"]) is w.pi(i32, i32)
    assert isinstance(p["scale"], Lam) and w.type_of(p["scale"]) is w.pi(i32, w.pi(i32, i32))
    assert p["six"] is w.lit_nat(6)


def test_lambda_expression_and_block() -> None:
    p = P("let inc = lm (x: Nat): Nat = core.nat.add (x, 1);\nlet five = inc 4;\n"
          "let v = { let a = 2; let b = core.nat.mul (a, a); core.nat.add (a, b) };\n")
    assert p["five"] is p.world.lit_nat(5)
    assert p["v"] is p.world.lit_nat(6)


def test_recursive_continuation_loop() -> None:
    p = P(MAIN_SIG +
          "    loop (m0, 0, 0I32)\n"
          "    where\n"
          "        con loop (m0: mem.M 0, i: Nat, acc: I32) =\n"
          "            (done, body)#(core.ncmp.l (i, 10)) (m0, acc)\n"
          "            where\n"
          "                con body (m0: mem.M 0, acc: I32) =\n"
          "                    loop (m0, core.nat.add (i, 1), core.wrap.add 0 (acc, core.bitcast I32 i));\n"
          "            end;\n"
          "        con done (m0: mem.M 0, acc: I32) = return (m0, acc);\n"
          "    end;\n")
    w = p.world
    loop, body, done, main = p.mut("loop"), p.mut("body"), p.mut("done"), p.mut("main")
    assert w.externals["main"] is main and main.external
    assert main.body is not None and isinstance(main.body, App) and main.body.callee is loop
    assert isinstance(body.body, App) and body.body.callee is loop  # the recursion
    # the branch: an extract from the tuple of continuations by a comparison
    assert isinstance(loop.body, App) and isinstance(loop.body.callee, Extract)
    assert loop.body.callee.tup is w.tuple([done, body])
    assert loop.kind == "con" and w.is_cn(loop.pi)


def test_ret_calls_a_fun() -> None:
    p = P("fun sq (m0: mem.M 0, x: I32): [mem.M 0, I32] = return (m0, core.wrap.mul 0 (x, x));\n" +
          MAIN_SIG +
          "    ret (m0, y) = sq $ (m0, argc);\n"
          "    return (m0, y);\n")
    w = p.world
    sq, main = p.mut("sq"), p.mut("main")
    i32, m0 = w.idx_n(2**32), w.app(w.annex("mem.M"), w.lit_nat(0))
    # fun f (A): B is Cn [A, Cn B]
    assert sq.pi is w.cn(w.sigma([w.sigma([m0, i32]), w.cn(w.sigma([m0, i32]))]))
    assert isinstance(main.body, App) and main.body.callee is sq
    k = main.body.arg.ops[1]
    assert isinstance(k, MutLam) and k.kind == "con"


def test_ret_on_a_non_function_is_a_type_error() -> None:
    src = HEADER + MAIN_SIG + "    ret (m0, y) = argc $ (m0, argc);\n    return (m0, y);\n"
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "argc $")
    assert "ret" in e.message


def test_where_scopes_its_declarations() -> None:
    p = P("let x = dbl (inc 20) where lam inc (y: Nat): Nat = core.nat.add (y, %t.one); "
          "lam dbl (y: Nat): Nat = core.nat.mul (y, 2); axm %t.one: Nat; end;\n")
    x = p["x"]
    assert isinstance(x, App) and x.head is p.world.annex("core.nat.mul")  # `one` is an axiom
    p = P("let x = dbl (inc 20) where lam inc (y: Nat): Nat = core.nat.add (y, 1); "
          "lam dbl (y: Nat): Nat = core.nat.mul (y, 2); end;\n")
    assert p["x"] is p.world.lit_nat(42)
    src = HEADER + "let x = inc 1 where lam inc (y: Nat): Nat = y; end;\nlet z = inc 2;\n"
    e = error(src)
    assert e.code == "E-NAME" and where(e) == pos(src, "inc", 2)


def test_let_inside_where() -> None:
    p = P("let x = core.nat.add (a, b) where let a = 2; let b = core.nat.mul (a, 10); end;\n")
    assert p["x"] is p.world.lit_nat(22)


def test_declarations_may_refer_to_later_ones() -> None:
    p = P("let a = core.nat.add (b, 1);\nlet b = 41;\n")
    assert p["a"] is p.world.lit_nat(42)


def test_patterns_bind_components() -> None:
    p = P("let (a, (b, c), d) = (1, (2, 3), 4);\nlet s = core.nat.add (core.nat.add (a, b), core.nat.add (c, d));\n"
          "let (u, v) as t = (5, 6);\nlet (x, y) = ‹2; 9›;\n")
    w = p.world
    assert p["s"] is w.lit_nat(10)
    assert p["t"] is w.tuple([w.lit_nat(5), w.lit_nat(6)]) and p["u"] is w.lit_nat(5) and p["v"] is w.lit_nat(6)
    assert p["x"] is w.lit_nat(9) and p["y"] is w.lit_nat(9)


def test_named_sigma_field_extract() -> None:
    p = P("lam f (x: [lo: Nat, hi: Bool]): Bool = x#hi;\nlet y = f (1, tt);\n"
          "lam g (x: [lo: Nat, hi: Bool]): Nat = x#lo;\nlet z = g (7, tt);\n")
    assert p["y"] is p.world.lit_bool(True)
    assert p["z"] is p.world.lit_nat(7)


def test_named_field_extract_from_a_sigma_of_equal_types() -> None:
    p = P("lam f (x: [lo: Nat, hi: Nat]): Nat = x#hi;\nlet y = f (1, 2);\n")
    assert p["y"] is p.world.lit_nat(2)


def test_fun_type_is_cn_of_arg_and_return() -> None:
    p = P("let t = Fn [Nat, Bool] → I8;\n")
    w = p.world
    assert p["t"] is w.cn(w.sigma([w.sigma([w.nat(), w.bool_t()]), w.cn(w.idx_n(256))]))
    assert isinstance(p["t"], Pi)


# ============================================================================= diagnostics


@pytest.mark.parametrize("src, token, fragment", [
    # operand of the wrong width: the implicit s is solved to 256 by the first operand
    ("let x8 = 5I8;\nlet y = core.wrap.add 0 (x8, 7I32);", "7I32", "expected `I8`, found `I32`"),
    ("let x = 300:I8;", "300", "does not fit"),
    ("let x = 5:(Idx 0);", "5:", "which upstream spells `Idx 0`"),  # upstream's size 0 is 2^64
    ("let x: I8 = 300I32;", "300I32", "expected `I8`, found `I32`"),
    ("let y = core.nat.add (1, 2, 3);", "(1, 2, 3)", "found a tuple of 3"),
    ("let x = 3;\nlet y = x 4;", "x 4", "not a function"),
    ("let t = (1, 2);\nlet y = t#5;", "5;", "is not of Idx type but of type `Nat`"),
    ("let t = (1, 2);\nlet y = t#1;", "1;", "write `1_2`"),
    ("let t = (1, 2, 3);\nlet y = t#1_2;", "1_2;", "has 3 elements"),
    ("let (a, b) = (1, 2, 3);", "(a, b)", "the pattern has 2 elements"),
    ("lam f (m: mem.M 0, p: gpu.GlobalPtr I32): mem.M 0 = mem.store (m, p, 1I32);", "p, 1I32",
     "found `mem.Ptr (I32, 1)`"),
    ("lam f (x: Nat): Bool = x;", "x;", "expected `Bool`, found `Nat`"),
    ("let b = core.ncmp.l (1I32, 2);", "1I32", "expected `Nat`, found `I32`"),
    # an array of a length to infer (`compile.phases ff (p, q, 42I32)`): the element at fault,
    # not the whole tuple
    ("lam f {n: Nat} (xs: «n; I32»): Nat = n;\nlet y = f (1I32, 2I32, 3I8);", "3I8", "expected `I32`, found `I8`"),
])
def test_type_errors_have_exact_positions(src: str, token: str, fragment: str) -> None:
    e = error(HEADER + src)
    assert e.code == "E-TYPE", e
    assert e.loc is not None and e.loc.file == "t.mim"
    assert where(e) == pos(HEADER + src, token), str(e)
    assert fragment in e.message


def test_type_mismatch_points_at_the_differing_component() -> None:
    e = error(HEADER + "lam f (p: mem.Ptr («4; I32», 0)): mem.Ptr («4; I16», 0) = p;\n")
    assert e.code == "E-TYPE"
    assert "differ" in e.message and "I16" in e.message and "I32" in e.message


def test_continuation_called_with_the_wrong_arity() -> None:
    src = (HEADER + MAIN_SIG + "    loop (m0, 0)\n    where\n"
           "        con loop (m0: mem.M 0, i: Nat, acc: I32) = return (m0, acc);\n    end;\n")
    e = error(src)
    assert e.code == "E-TYPE" and where(e) == pos(src, "(m0, 0)")


def test_unknown_name_suggests_a_close_one() -> None:
    src = HEADER + MAIN_SIG + "    return (m0, core.wrap.add 0 (argcc, 1I32));\n"
    e = error(src)
    assert e.code == "E-NAME" and where(e) == pos(src, "argcc")
    assert "`argcc`" in e.message and "did you mean `argc`?" in e.message


def test_unknown_annex_suggests_a_close_one() -> None:
    e = error(HEADER + "let y = core.wrap.ad 0 (1I32, 1I32);\n")
    assert e.code == "E-NAME" and where(e) == (2, 9)
    assert "did you mean `core.wrap.add`?" in e.message


def test_annex_of_a_plugin_not_loaded_hints_at_the_plugin() -> None:
    e = error("plugin core;\nlet y = gpu.Stream;\n")
    assert e.code == "E-NAME" and where(e) == (2, 9)
    assert "plugin gpu;" in e.message


def test_missing_plugin_is_an_import_error() -> None:
    e = error("plugin core;\nplugin nosuch;\n")
    assert e.code == "E-IMPORT" and where(e) == (2, 1)
    assert "nosuch" in e.message
    assert e.message.startswith("plugin `nosuch` not found")
    e = error("import nosuch;\n")
    assert e.code == "E-IMPORT" and e.message.startswith("module `nosuch` not found"), e.message
    assert "-I DIR" in e.message


def test_path_like_plugin_names_are_rejected() -> None:
    # the parser accepts only an identifier after `plugin`
    e = error("plugin ../x;\n")
    assert e.code == "E-PARSE" and e.loc is not None and e.loc.line == 1
    e = error('plugin "x";\n')
    assert e.code == "E-PARSE"
    # the loader refuses any name that is not an identifier, whatever reaches it
    loader = Loader(World())
    for bad in ("../x", "a/b", "/etc/passwd", "x.y", ""):
        with pytest.raises(VerimimError) as info:
            loader.find(bad, Loc("t.mim", 1, 1))
        assert info.value.code == "E-IMPORT"


def test_plugins_from_an_include_directory(tmp_path: Path) -> None:
    (tmp_path / "myplug.mim").write_text("plugin core;\naxm thing: Nat → Nat;\nanx let two = core.nat.add (1, 1);\n")
    p = Prog("plugin myplug;\nlet t = myplug.two;\nlet a = myplug.thing 3;\n", include=[str(tmp_path)])
    assert p["t"] is p.world.lit_nat(2)
    assert isinstance(p["a"], App)
    # without -I it is not found
    assert error("plugin myplug;\n").code == "E-IMPORT"


def test_cyclic_let_is_a_type_error() -> None:
    e = error("let a = b;\nlet b = a;\n")
    assert e.code == "E-TYPE" and where(e) == (2, 9)
    assert "itself" in e.message
    e = error("let a = a;\n")  # a let's value does not see its own name (upstream: unknown there)
    assert e.code == "E-NAME" and where(e) == (1, 9)


def test_parse_error_has_a_position() -> None:
    e = error("plugin core;\nlet x = (1, ;\n")
    assert e.code == "E-PARSE" and e.loc is not None and e.loc.line == 2


# ============================================================================= recovery


GOOD = HEADER + kernel("(a: gpu.GlobalPtr I32, b: gpu.GlobalPtr I32)") + MAIN_SIG + (
    "    let (m0, m1, m4) = gpu.init m0;\n"
    "    let (m1, d) = gpu.alloc.block I32 m1;\n"
    "    ret (m0, m1, m4) = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel (d, d) $ (m0, m1, m4);\n"
    "    let m1 = gpu.free.block (m1, d);\n"
    "    let m0 = gpu.deinit (m0, m1, m4);\n"
    "    return (m0, core.wrap.add 0 (argc, core.bitcast I32 (core.trait.size [I8, I32])));\n")

BAD = [
    ("E-TYPE", HEADER + "let x8 = 5I8;\nlet y = core.wrap.add 0 (x8, 7I32);\n"),
    ("E-NAME", HEADER + "let y = nosuchname;\n"),
    ("E-TYPE", "let a = b;\nlet b = a;\n"),
    ("E-IMPORT", "plugin nosuch;\n"),
    ("E-PARSE", "let = ;\n"),
    ("E-TYPE", HEADER + "lam pick {T: *} (x: I32): I32 = x;\nlet y = pick 1I32;\n"),
    ("E-TYPE", HEADER + kernel("()") + MAIN_SIG +
     "    ret (m0, m1, m4) = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel 5 $ (m0, 0, 0);\n"
     "    return (m0, argc);\n"),
]


def _fingerprint(src: str) -> tuple[int, str, str]:
    p = Prog(src)
    main = p.world.externals["main"]
    return p.world.num_nodes, show(main.pi), repr(sorted(m.name for m in p.world.muts))


def test_a_failed_elaboration_does_not_break_the_next() -> None:
    baseline = _fingerprint(GOOD)
    for code, bad in BAD:
        e = error(bad)
        assert e.code == code, (code, str(e))
        assert _fingerprint(GOOD) == baseline
    # the same failure twice gives the same diagnostic
    for code, bad in BAD:
        assert str(error(bad)) == str(error(bad))


def test_a_broken_plugin_in_an_include_directory_does_not_break_the_next(tmp_path: Path) -> None:
    (tmp_path / "broken.mim").write_text("plugin core;\naxm f: Nat → Nat;\nanx let g = f ff;\n")
    e = error("plugin broken;\n", include=[str(tmp_path)])
    assert e.code == "E-TYPE" and e.loc is not None and e.loc.file.endswith("broken.mim")
    assert (e.loc.line, e.loc.col) == (3, 15)
    assert _fingerprint(GOOD) == _fingerprint(GOOD)
    p = P("let x = core.trait.size [I8, I32];\n")
    assert p["x"] is p.world.lit_nat(8)


def test_worlds_are_independent() -> None:
    a, b = Prog(GOOD), Prog(GOOD)
    assert a.world is not b.world
    assert a.world.annex("gpu.Stream") is not b.world.annex("gpu.Stream")
    assert show(a.world.externals["main"].pi) == show(b.world.externals["main"].pi)


def test_sigma_and_tuple_of_the_main_signature() -> None:
    p = Prog(GOOD)
    w = p.world
    main = w.externals["main"]
    dom = main.pi.dom
    assert isinstance(dom, Sigma) and len(dom.ops) == 2
    args = w.shift(dom.ops[0], -1)
    assert isinstance(args, Sigma) and len(args.ops) == 3
    argv_t = args.ops[2]
    assert isinstance(argv_t, App) and argv_t.head is w.annex("mem.Ptr")
    assert isinstance(argv_t.arg, Tuple) and isinstance(argv_t.arg.ops[1], Lit)
