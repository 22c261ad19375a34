"""Tests of verimim.syntax.lexer: token kinds, literals, positions, comments and lexical errors."""
from __future__ import annotations

import pytest

from verimim.diagnostics import ParseError
from verimim.syntax.lexer import CHAR, EOF, NAME, NUM, STR, Token, tokenize


def kinds(text: str) -> list[str]:
    return [t.kind for t in tokenize(text)][:-1]


def one(text: str) -> Token:
    toks = tokenize(text)
    assert len(toks) == 2, toks
    assert toks[1].kind == EOF
    return toks[0]


# ----------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    "text, value, bits, size",
    [
        ("42", 42, None, None),
        ("0", 0, None, None),
        ("0x1F", 31, None, None),
        ("0XfF", 255, None, None),
        ("0b101", 5, None, None),
        ("0o17", 15, None, None),
        ("1'000", 1000, None, None),
        ("1'000'000", 1_000_000, None, None),
        ("0xFF'FF", 0xFFFF, None, None),
        ("42I32", 42, 32, None),
        ("7i8", 7, 8, None),
        ("1I1", 1, 1, None),
        ("0I1", 0, 1, None),
        ("3I64", 3, 64, None),
        ("255I8", 255, 8, None),
        ("65535i16", 65535, 16, None),
        ("0x1FI32", 31, 32, None),
        ("3_4", 3, None, 4),
        ("0_2", 0, None, 2),
        ("3₄", 3, None, 4),
        ("12₁₆", 12, None, 16),
        ("1'000_1'001", 1000, None, 1001),
        # n modulo m, as upstream's lexer (World::lit_idx_mod; lit/vec/normalize.mim writes `3_3`)
        ("4_4", 0, None, 4),
        ("7_4", 3, None, 4),
        ("5₃", 2, None, 3),
        # signed literals (upstream's lexer, langref `sign dec+`): the 64-bit two's-complement
        # pattern, `strtoll` for a Nat and `strtoull` for a width
        ("-1", 2**64 - 1, None, None),
        ("+7", 7, None, None),
        ("-0", 0, None, None),
        ("-0x10", 2**64 - 16, None, None),
        ("-1I64", 2**64 - 1, 64, None),
        ("+3I32", 3, 32, None),
        ("-0I8", 0, 8, None),
        ("3I2", 3, 2, None),  # any width up to 64, as upstream's lexer (`lit_int(width, v)`)
        ("5i3", 5, 3, None),
        ("-99999999999999999999", 2**63, None, None),  # strtoll saturates at -2^63
    ],
)
def test_number_literals(text: str, value: int, bits: int | None, size: int | None) -> None:
    tok = one(text)
    assert tok.kind == NUM
    assert tok.value == (value, bits, size)
    assert tok.text == text


@pytest.mark.parametrize(
    "text, value",
    [("'a'", 97), ("'\\n'", 10), ("'\\t'", 9), ("'\\0'", 0), ("'\\\\'", 92), ("'\\''", 39), ("'\\\"'", 34), ("'\"'", 34),
     ("'''", 39)],  # (three quotes: the quote, as upstream's lexer takes any character between them)
)
def test_char_literals(text: str, value: int) -> None:
    tok = one(text)
    assert tok.kind == CHAR
    assert tok.value == value


@pytest.mark.parametrize(
    "text, value",
    [
        ('"text"', b"text"),
        ('""', b""),
        ('"a\\nb\\tc\\0d\\\\e\\"f\\\'g"', b"a\nb\tc\x00d\\e\"f'g"),
        ('"é"', "é".encode("utf-8")),
        ('"it\'s"', b"it's"),
    ],
)
def test_string_literals(text: str, value: bytes) -> None:
    tok = one(text)
    assert tok.kind == STR
    assert tok.value == value


# ----------------------------------------------------------------------------- names and keywords


def test_names_dotted_and_percent() -> None:
    toks = tokenize("m0 core.nat.add %gpu.init %foo _ a_1")
    assert [t.kind for t in toks[:-1]] == [NAME] * 6
    assert toks[0].value == ("m0",)
    assert toks[1].value == ("core", "nat", "add") and not toks[1].percent
    assert toks[2].value == ("gpu", "init") and toks[2].percent
    assert toks[3].value == ("foo",) and toks[3].percent
    assert toks[4].value == ("_",)
    assert toks[5].value == ("a_1",)


def test_dotted_name_needs_no_spaces() -> None:
    # `a . b` is three tokens; `a.` followed by a non-identifier leaves the dot alone.
    assert kinds("a . b") == [NAME, ".", NAME]
    assert kinds("a.(") == [NAME, ".", "("]
    assert kinds("a.b") == [NAME]


def test_keyword_parts_inside_dotted_names_are_names() -> None:
    tok = one("core.let.end")
    assert tok.kind == NAME and tok.value == ("core", "let", "end")


@pytest.mark.parametrize(
    "word",
    "Bool Cn Fn I1 I8 I16 I32 I64 Idx Nat Type Univ and anx as axm cn con end extern ff fn fun "
    "i1 i8 i16 i32 i64 import ins lam let mod plugin pub rec ret tt where".split(),
)
def test_keywords(word: str) -> None:
    tok = one(word)
    assert tok.kind == word
    assert f"keyword '{word}'" == tok.describe()


def test_keyword_prefix_is_a_name() -> None:
    assert one("letter").kind == NAME
    assert one("endx").kind == NAME
    assert one("Natural").kind == NAME


@pytest.mark.parametrize(
    "ascii_, uni",
    [("->", "→"), ("lm", "λ"), ("<<", "«"), (">>", "»"), ("<", "‹"), (">", "›"), ("bot", "⊥"), ("top", "⊤")],
)
def test_ascii_spellings_give_the_unicode_kind(ascii_: str, uni: str) -> None:
    a, u = one(ascii_), one(uni)
    assert a.kind == u.kind == uni
    assert a.text == ascii_ and u.text == uni


def test_punctuation() -> None:
    text = "( ) [ ] { } « » ‹ › , ; : = # @ $ → . * □ λ ⊤ ⊥"
    assert kinds(text) == text.split()


def test_longest_match_for_angle_brackets() -> None:
    assert kinds("<<<") == ["«", "‹"]
    assert kinds(">>>") == ["»", "›"]
    assert kinds("-> >") == ["→", "›"]


# ----------------------------------------------------------------------------- positions


def test_positions_are_one_based_and_count_code_points() -> None:
    toks = tokenize("«n; T»\n  λ x → y")
    got = [(t.kind, t.line, t.col) for t in toks]
    assert got == [
        ("«", 1, 1), (NAME, 1, 2), (";", 1, 3), (NAME, 1, 5), ("»", 1, 6),
        ("λ", 2, 3), (NAME, 2, 5), ("→", 2, 7), (NAME, 2, 9), (EOF, 2, 10),
    ]


def test_positions_after_multiline_comment() -> None:
    toks = tokenize("a /* x\n yy */ b")
    assert (toks[1].line, toks[1].col) == (2, 8)


# ----------------------------------------------------------------------------- comments


def test_comments_are_skipped() -> None:
    assert kinds("a // b c\n d /* e\n f */ g") == [NAME, NAME, NAME]
    assert kinds("/**/x/* /* */y") == [NAME, NAME]  # not nested: the first */ ends it


def test_doc_comments_attach_to_the_next_token() -> None:
    toks = tokenize("/// First line.\n///Second\n///\nlet x = 1;\n/// other\naxm")
    assert toks[0].kind == "let"
    assert toks[0].doc == "First line.\nSecond\n"
    assert toks[1].doc is None
    assert toks[5].kind == "axm" and toks[5].doc == "other"


def test_four_slashes_are_not_documentation() -> None:
    toks = tokenize("//// ruler\nlet")
    assert toks[0].doc is None


def test_doc_keeps_more_than_one_space() -> None:
    assert tokenize("///   indented\nx")[0].doc == "  indented"


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, line, col, fragment",
    [
        ("a\n  /* open", 2, 3, "unterminated comment"),
        ('x "abc', 1, 3, "unterminated string"),
        ('"ab\ncd"', 1, 1, "unterminated string"),
        ("'a", 1, 1, "unterminated character"),
        ("'ab'", 1, 1, "unterminated character"),
        ("''", 1, 1, "empty character"),
        ("'é'", 1, 1, "not ASCII"),
        ('"a\\q"', 1, 3, "invalid escape"),
        ("x € y", 1, 3, "unexpected character"),
        ("λλ ~", 1, 4, "unexpected character"),
        ("42I0", 1, 1, "invalid width 0"),
        ("42I65", 1, 1, "invalid width 65"),
        ("42I128", 1, 1, "invalid width 128"),
        ("3_0", 1, 1, "size 0"),
        ("3₀", 1, 1, "size 0"),
        ("0b102", 1, 5, "invalid digit '2'"),
        ("(1.0:%math.F64, 0)", 1, 2, "floating-point literal `1.0`"),  # upstream's lit/annex.mim
        ("x 2e3", 1, 3, "floating-point literal `2e3`"),
        ("2E-3", 1, 1, "floating-point literal `2E-3`"),
        ("0o18", 1, 4, "invalid digit '8'"),
        ("0x", 1, 3, "expected a digit"),
        ("42abc", 1, 3, "invalid character 'a'"),
        ("42I", 1, 3, "invalid character 'I'"),
        ("3_x", 1, 2, "invalid character '_'"),
        ("12₃a", 1, 4, "invalid character 'a'"),
        ("% x", 1, 1, "annex name after '%'"),
        ("1" * 1001, 1, 1, "too long"),
        ("-3_4", 1, 1, "a signed literal is not an index literal"),
        ("-3₄", 1, 1, "a signed literal is not an index literal"),
        ("- 3", 1, 1, "unexpected character '-'"),
    ],
)
def test_lexical_errors(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        tokenize(text, "f.mim")
    err = info.value
    assert err.code == "E-PARSE"
    assert fragment in err.message
    assert (err.loc.file, err.loc.line, err.loc.col) == ("f.mim", line, col)


def test_eof_token_is_last_and_unique() -> None:
    toks = tokenize("")
    assert [t.kind for t in toks] == [EOF]
    assert toks[0].describe() == "end of input"


@pytest.mark.parametrize("text, col, fragment", [
    ("256I8", 1, "does not fit in I8"), ("2I1", 1, "does not fit"), ("x -1I32", 3, "only I64 takes a negative one"),
])
def test_a_literal_that_does_not_fit_its_stated_type_is_a_type_error(text: str, col: int, fragment: str) -> None:
    """Well-formed text (upstream's lexer reads it) whose value does not fit: E-TYPE, as `300:I8`."""
    from verimim.diagnostics import VerimimError

    with pytest.raises(VerimimError) as info:
        tokenize(text, "f.mim")
    assert info.value.code == "E-TYPE" and fragment in info.value.message
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, col)
