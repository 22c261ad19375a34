"""Robustness of the lexer and parser: random and mutated input either parses or raises
ParseError (never another exception) — or, for a typed literal whose value does not fit its type
(`427i8`: the tokens `42` and `7i8` run together), the located E-TYPE the lexer reports, as
upstream's World::lit does — deep nesting is E-UNSUPPORTED, and big flat input parses."""
from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimim.diagnostics import ParseError, TypeError_, UnsupportedError
from verimim.syntax import ast
from verimim.syntax.lexer import EOF, tokenize
from verimim.syntax.parser import MAX_DEPTH, parse_expr, parse_module

TOKENS = [
    "let", "anx", "axm", "lam", "con", "fun", "extern", "mod", "pub", "rec", "and", "where", "end",
    "ret", "plugin", "import", "λ", "lm", "cn", "fn", "Cn", "Fn", "Idx", "Type", "ins", "as",
    "Nat", "Bool", "I32", "i8", "*", "□", "ff", "tt", "⊤", "⊥", "top", "bot",
    "x", "y", "f", "_", "a.b", "%p.n", "core.nat.add", "m0",
    "42", "0x1F", "0b101", "1'000", "42I32", "7i8", "3_4", "3₄", "'a'", '"s"',
    "(", ")", "[", "]", "{", "}", "«", "»", "‹", "›", "<", ">", "<<", ">>", "->", "→",
    ",", ";", ":", "=", "#", "@", "$", ".", "%",
    "///d\n", "//c\n", "/*c*/", "\n", "/*", "'", '"', "\\", "€",
]

CHARS = "abxyz_019 \n\t(){}[]«»‹›<>-=;:,.#@$%*□λ⊤⊥→'\"/\\₄I€é"

PROGRAMS = [
    "plugin core;\nlet x = f (a, b)#1 c;\n",
    "axm launch: {n: Nat, Ts: «n; *»} → [a b: Nat, m: Bool] → Cn [Idx a, «i: n; Ts#i»] → Fn [I32] → [];",
    "con k (m: M, g i: Idx 4, (), d: P I32, return: Cn [M]) =\n"
    "  let (m, p) = mem.slot (I32, 4) (m, 0);\n"
    "  (exit, body)#(core.ncmp.l (c, 4)) (m, 0I32)\n"
    "  where con body (m: M) = loop (m, 1_2); con exit (m: M) = return m; end;",
    "fun extern main (m0: mem.M 0, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =\n"
    "  ret (m0, m1) = gpu.launch (4, 4, s, ff, ()) k d $ (m0, m1);\n"
    "  return (m0, ‹r: 4; ‹c: 4; f r c››);",
    "pub mod alloc_copy { anx let block = lm {T: *} (m0: M, p: Ptr T) : [M, P T] = let (m1, d) = a T m1; (m0, d); }",
    "rec lam even (n: Nat): Bool = odd n and lam odd (n: Nat): Bool = { let k = ins (t, 0, 1); even k };",
    "/// doc\nanx lam f [x: T] {U: *} (y: U as z) = λ (q) : Nat = 'a';\nlet s = \"str\\n\";",
]


def check_module(text: str) -> None:
    """Parsing succeeds (a Module) or fails with a located ParseError (or a literal's E-TYPE);
    nothing else may escape."""
    try:
        result = parse_module(text, "fuzz.mim")
    except ParseError as err:
        assert err.code == "E-PARSE"
        assert err.loc is not None and err.loc.line >= 1 and err.loc.col >= 1
        return
    except TypeError_ as err:
        assert "does not fit" in err.message, err
        assert err.loc is not None and err.loc.line >= 1 and err.loc.col >= 1
        return
    assert isinstance(result, ast.Module)


def check_expr(text: str) -> None:
    try:
        result = parse_expr(text, "fuzz")
    except ParseError as err:
        assert err.loc is not None and err.loc.line >= 1
        return
    except TypeError_ as err:
        assert "does not fit" in err.message and err.loc is not None and err.loc.line >= 1, err
        return
    assert isinstance(result, ast.Expr)


def test_a_typed_literal_that_does_not_fit_is_a_located_type_error() -> None:
    # (found by test_random_token_sequences: `42` and `7i8` run together)
    check_module("427i8")
    with pytest.raises(TypeError_):
        parse_module("427i8", "fuzz.mim")


def token_texts(text: str) -> list[str]:
    """The source spelling of each token of a valid program (comments dropped)."""
    return [t.text for t in tokenize(text) if t.kind != EOF]


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_sample_programs_are_valid() -> None:
    # The mutation tests start from these: make sure they really parse.
    for program in PROGRAMS:
        assert isinstance(parse_module(program, "p.mim"), ast.Module)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=60), st.sampled_from([" ", ""]))
def test_random_token_sequences(tokens: list[str], sep: str) -> None:
    text = sep.join(tokens)
    check_module(text)
    check_expr(text)


@FUZZ
@given(st.text(alphabet=CHARS, max_size=120))
def test_random_text(text: str) -> None:
    check_module(text)
    check_expr(text)


@st.composite
def mutated_program(draw: st.DrawFn) -> str:
    toks = token_texts(draw(st.sampled_from(PROGRAMS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "swap", "duplicate"]))
        i = draw(st.integers(0, len(toks) - 1))
        if op == "delete" and len(toks) > 1:
            del toks[i]
        elif op == "insert":
            toks.insert(i, draw(st.sampled_from(TOKENS)))
        elif op == "swap":
            j = draw(st.integers(0, len(toks) - 1))
            toks[i], toks[j] = toks[j], toks[i]
        else:
            toks.insert(i, toks[i])
    return " ".join(toks)


@FUZZ
@given(mutated_program())
def test_mutated_programs(text: str) -> None:
    check_module(text)


# ----------------------------------------------------------------------------- depth and size


def test_5000_nested_parentheses_is_unsupported_not_a_parse_error() -> None:
    # (it is Mim; docs/diagnostics.md: E-UNSUPPORTED, as a program nested too deeply elsewhere)
    text = "let x = " + "(" * 5000 + "1" + ")" * 5000 + ";"
    limit = sys.getrecursionlimit()
    with pytest.raises(UnsupportedError) as info:
        parse_module(text, "deep.mim")
    assert "nesting too deep" in info.value.message
    assert info.value.loc is not None and info.value.loc.line == 1
    assert sys.getrecursionlimit() == limit  # restored


DEEP = {
    "parens": lambda d: "(" * d + "x" + ")" * d,
    "sigmas": lambda d: "[a: " * d + "Nat" + "]" * d,
    "arrays": lambda d: "«n; " * d + "T" + "»" * d,
    "idx": lambda d: "Idx " * d + "n",
    "cn": lambda d: "Cn " * d + "T",
    "ascriptions": lambda d: "1:" * d + "Nat",
    "lambdas": lambda d: "λ (x: Nat) = " * d + "x",
    "lambda-domains": lambda d: "λ (x: " * d + "Nat" + ") = x" * d,
    "blocks": lambda d: "{ " * d + "x" + " }" * d,
    "lets": lambda d: "{ let y = " * d + "x" + "; y }" * d,
    "wheres": lambda d: "f where con f (x: Nat) = " * d + "x" + "; end" * d,
    "patterns": lambda d: "{ let " + "(a, " * d + "b" + ")" * d + " = x; y }",
}


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_deep_nesting_is_unsupported_not_a_crash(shape: str) -> None:
    with pytest.raises(UnsupportedError) as info:
        parse_expr(DEEP[shape](5000), "deep")
    assert "nesting too deep" in info.value.message


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_nesting_below_the_limit_parses(shape: str) -> None:
    # Each shape costs at most two counted levels per repetition, so this stays within MAX_DEPTH.
    assert isinstance(parse_expr(DEEP[shape](MAX_DEPTH // 2 - 10), "deep"), ast.Expr)


def test_20000_lets_parse() -> None:
    text = "".join(f"let x{i} = f (x, {i}) #0;\n" for i in range(20_000))
    m = parse_module(text, "big.mim")
    assert len(m.decls) == 20_000
    last = m.decls[-1]
    assert isinstance(last, ast.DeclLet) and last.loc.line == 20_000


def test_long_flat_chains_do_not_recurse() -> None:
    arrows = parse_expr(" → ".join(["A"] * 20_000))
    assert isinstance(arrows, ast.Pi)
    app = parse_expr("f" + " x" * 20_000)
    assert isinstance(app, ast.App)
    rets = parse_expr("ret a = f $ x; " * 20_000 + "a")
    assert isinstance(rets, ast.Ret)
    extracts = parse_expr("t" + "#0" * 20_000)
    assert isinstance(extracts, ast.Extract)
