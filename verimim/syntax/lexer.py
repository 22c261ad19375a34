"""The Mim lexer (spec/LANGUAGE.md, "Lexical").

`tokenize` turns source text into a list of `Token`s ending in one `EOF` token. Positions are
1-based; columns count Unicode code points. ASCII spellings are folded into their Unicode
kind here (`->` is `→`, `<<` is `«`, `lm` is `λ`, …) so the parser sees one kind per symbol;
`Token.text` keeps the source spelling for messages (and for splitting `>>` into `› ›`).
`///` documentation lines are not tokens: they are attached to the next token's `doc`.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from verimim.diagnostics import Loc, ParseError, TypeError_

# Token kinds that are not keywords or punctuation.
NAME = "name"
NUM = "num"
CHAR = "char"
STR = "str"
EOF = "eof"

KEYWORDS: frozenset[str] = frozenset(
    "Bool Cn Fn I1 I8 I16 I32 I64 Idx Nat Rule Type Univ and anx as axm ccon cfun cn con end extern "
    "ff fn fun i1 i8 i16 i32 i64 import inj ins insert lam let lm match mod module norm plugin pub "
    "rec ret rule tt when where with top bot".split()
)

# ASCII keywords that are spellings of a Unicode symbol (or of another keyword).
KEYWORD_ALIASES: dict[str, str] = {"lm": "λ", "top": "⊤", "bot": "⊥", "insert": "ins"}

# Multi-character punctuation first: the lexer takes the longest match.
PUNCT_ASCII: tuple[tuple[str, str], ...] = (
    ("->", "→"),
    ("=>", "⇒"),
    ("<<", "«"),
    (">>", "»"),
    ("<", "‹"),
    (">", "›"),
)

PUNCT_SINGLE: frozenset[str] = frozenset("()[]{}«»‹›,;:=#@$→.*□λ⊤⊥|∪⦃⦄")
_ASCII_PUNCT_START = frozenset(a[0] for a, _ in PUNCT_ASCII)  # `=` may start `=>`
_NAME_START = frozenset("_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

# Upstream's alternative spellings of the sequence delimiters.
PUNCT_ALTERNATIVES: dict[str, str] = {"⟨": "‹", "⟩": "›", "⟪": "«", "⟫": "»", "★": "*"}

# Upstream's lexer takes any width (`lit_int(width, v)`: an `Idx 2^width`), up to 64 bits.
VALID_WIDTHS: frozenset[int] = frozenset(range(1, 65))

SUBSCRIPTS = "₀₁₂₃₄₅₆₇₈₉"

ESCAPES: dict[str, int] = {
    "n": 10, "t": 9, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11,
}

# Longer literals are certainly not meant: refuse them before int() does quadratic work
# (and before Python's int-string-conversion limit raises a ValueError).
MAX_DIGITS = 1000

WHITESPACE = frozenset(" \t\r\n\f\v")
WHITESPACE_RUN = re.compile(r"[ \t\r\n\f\v]+")

# `a.b.c`: a dot continues the name only when an identifier starts right after it.
DOTTED_NAME = re.compile(r"[_a-zA-Z][_0-9a-zA-Z]*(?:\.[_a-zA-Z][_0-9a-zA-Z]*)*")


class Token(NamedTuple):
    """One token. `kind` is NAME/NUM/CHAR/STR/EOF, a keyword, or a canonical punctuation symbol.

    `value`: for NAME the tuple of dotted parts; for NUM `(value, bits, size)`; for CHAR an int;
    for STR bytes; else None. `percent` marks the `%a.b` annex spelling. (A named tuple, not a
    frozen dataclass: a program is some 2,000 tokens, and a frozen dataclass sets each field
    through `object.__setattr__`.)
    """

    kind: str
    text: str
    line: int
    col: int
    value: object = None
    percent: bool = False
    doc: str | None = None

    def loc(self, file: str) -> Loc:
        return Loc(file, self.line, self.col)

    def describe(self) -> str:
        """How an error message names this token: `found <describe()>`."""
        if self.kind == EOF:
            return "end of input"
        if self.kind == NAME:
            return f"name '{self.text}'"
        if self.kind == NUM:
            return f"number '{self.text}'"
        if self.kind == CHAR:
            return f"character literal {self.text}"
        if self.kind == STR:
            return f"string literal {_shorten(self.text)}"
        if self.text in KEYWORDS:
            return f"keyword '{self.text}'"
        return f"'{self.text}'"


def _shorten(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_ident_start(c: str) -> bool:
    return c in _NAME_START


def _is_ident_char(c: str) -> bool:
    return _is_ident_start(c) or ("0" <= c <= "9")


def _is_subscript(c: str) -> bool:
    # `"" in SUBSCRIPTS` is true, hence the length test (peek() is "" at end of input).
    return len(c) == 1 and c in SUBSCRIPTS


def _digit_value(c: str) -> int:
    if "0" <= c <= "9":
        return ord(c) - ord("0")
    if "a" <= c <= "z":
        return ord(c) - ord("a") + 10
    if "A" <= c <= "Z":
        return ord(c) - ord("A") + 10
    return 99


class Lexer:
    """A single left-to-right pass over the text; every method advances `pos` (linear time)."""

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.pos = 0
        self.line = 1
        self.col = 1
        self.tokens: list[Token] = []
        self.doc_lines: list[str] = []

    # ------------------------------------------------------------------ helpers

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else ""

    def advance(self, n: int = 1) -> None:
        """Moves over n characters, keeping line and column (columns count code points)."""
        end = self.pos + n
        newlines = self.text.count("\n", self.pos, end)
        if newlines:
            self.line += newlines
            self.col = end - self.text.rfind("\n", self.pos, end)
        else:
            self.col += n
        self.pos = end

    def error(self, message: str, line: int | None = None, col: int | None = None) -> ParseError:
        return ParseError(message, Loc(self.file, line or self.line, col or self.col))

    def emit(self, kind: str, start: int, line: int, col: int, value: object = None, percent: bool = False) -> None:
        doc = None
        if self.doc_lines:
            doc = "\n".join(self.doc_lines)
            self.doc_lines = []
        self.tokens.append(Token(kind, self.text[start : self.pos], line, col, value, percent, doc))

    # ------------------------------------------------------------------ driver

    def run(self) -> list[Token]:
        while True:
            self.skip_space_and_comments()
            if self.pos >= len(self.text):
                self.emit(EOF, self.pos, self.line, self.col)
                return self.tokens
            self.lex_token()

    def skip_space_and_comments(self) -> None:
        while self.pos < len(self.text):
            c = self.peek()
            if c in WHITESPACE:
                self.advance(WHITESPACE_RUN.match(self.text, self.pos).end() - self.pos)  # type: ignore[union-attr]
            elif c == "/" and self.peek(1) == "/":
                self.line_comment()
            elif c == "/" and self.peek(1) == "*":
                self.block_comment()
            else:
                return

    def line_comment(self) -> None:
        end = self.text.find("\n", self.pos)
        if end < 0:
            end = len(self.text)
        body = self.text[self.pos : end]
        # `///` is documentation; `////…` is an ordinary comment (a ruler line).
        if body.startswith("///") and not body.startswith("////"):
            line = body[3:]
            if line.startswith(" "):
                line = line[1:]
            self.doc_lines.append(line.rstrip("\r"))
        self.col += end - self.pos
        self.pos = end

    def block_comment(self) -> None:
        line, col = self.line, self.col
        end = self.text.find("*/", self.pos + 2)
        if end < 0:
            raise self.error("unterminated comment '/*'", line, col)
        self.advance(end + 2 - self.pos)

    def lex_token(self) -> None:
        c = self.peek()
        if c in _NAME_START:
            return self.lex_name(percent=False)
        if c in PUNCT_SINGLE and c not in _ASCII_PUNCT_START:  # the common case: one character
            return self.lex_punct(c, 1)
        if c == "%":
            return self.lex_percent_name()
        if "0" <= c <= "9" or (c in "+-" and "0" <= self.peek(1) <= "9"):
            return self.lex_number()
        if c == "'":
            return self.lex_char()
        if c == '"':
            return self.lex_string()
        for ascii_, kind in PUNCT_ASCII:
            if self.text.startswith(ascii_, self.pos):
                return self.lex_punct(kind, len(ascii_))
        if c in PUNCT_SINGLE:
            return self.lex_punct(c, 1)
        if c in PUNCT_ALTERNATIVES:
            return self.lex_punct(PUNCT_ALTERNATIVES[c], 1)
        raise self.error(f"unexpected character {c!r}")

    def lex_punct(self, kind: str, length: int) -> None:
        start, line, col = self.pos, self.line, self.col
        self.pos += length  # (punctuation holds no line break)
        self.col += length
        self.emit(kind, start, line, col)

    # ------------------------------------------------------------------ names

    def scan_dotted(self) -> tuple[str, ...]:
        """`a.b.c`: a dot continues the name only when an identifier follows it directly."""
        match = DOTTED_NAME.match(self.text, self.pos)
        assert match is not None  # the caller saw an identifier start
        self.col += match.end() - self.pos  # (a name holds no line break)
        self.pos = match.end()
        return tuple(match.group().split("."))

    def lex_name(self, percent: bool) -> None:
        start, line, col = self.pos, self.line, self.col
        parts = self.scan_dotted()
        if len(parts) == 1 and parts[0] in KEYWORDS and not percent:
            word = parts[0]
            self.emit(KEYWORD_ALIASES.get(word, word), start, line, col)
            return
        self.emit(NAME, start, line, col, parts, percent)

    def lex_percent_name(self) -> None:
        start, line, col = self.pos, self.line, self.col
        self.advance()
        if not _is_ident_start(self.peek()):
            raise self.error("expected an annex name after '%'", line, col)
        parts = self.scan_dotted()
        self.emit(NAME, start, line, col, parts, True)

    # ------------------------------------------------------------------ numbers

    def lex_number(self) -> None:
        start, line, col = self.pos, self.line, self.col
        sign = self.peek() if self.peek() in "+-" else ""
        if sign:
            self.advance()
        value = self.scan_magnitude(line, col)
        self.refuse_float(start + len(sign), line, col)
        bits, size = self.scan_suffix(line, col)
        if _is_ident_char(self.peek()) or _is_subscript(self.peek()):
            raise self.error(f"invalid character {self.peek()!r} in number literal")
        if sign and size is not None:
            raise self.error(f"a signed literal is not an index literal: `{self.text[start:self.pos]}` "
                             f"(an `Idx n` literal has no sign)", line, col)
        if sign:
            value = _signed_pattern(sign, value, bits)
            if bits is not None and value >= 1 << bits:
                raise TypeError_(f"literal `{self.text[start:self.pos]}` does not fit in I{bits}: a signed "
                                 f"literal is a 64-bit two's-complement pattern ({value}), as upstream reads "
                                 f"it; only I64 takes a negative one", Loc(self.file, line, col))
        self.check_fits(value, bits, line, col)
        if size is not None:
            # `n_m` is n modulo m, as upstream's lexer reads it (World::lit_idx_mod): `3_3` is `0_3`
            value %= size
        self.emit(NUM, start, line, col, (value, bits, size))

    def refuse_float(self, start: int, line: int, col: int) -> None:
        """`1.5`, `2e3`: upstream's lexer reads them as floating-point literals, typed by its
        `plugin math`, which verimim does not ship. Said as such, rather than as a stray `.`."""
        if not self.text[start:self.pos].isdigit():
            return  # a prefixed (0x…) or separated (1'000) number: never a decimal float here
        c, d = self.peek(), self.peek(1)
        exponent = c in ("e", "E") and ("0" <= d <= "9" or d in "+-" and "0" <= self.peek(2) <= "9")
        if (c == "." and "0" <= d <= "9") or exponent:
            end = self.pos + 1
            while end < len(self.text) and (self.text[end].isdigit() or self.text[end] in ".eE+-"):
                end += 1
            raise self.error(f"floating-point literal `{self.text[start:end]}`: verimim has no floating-point "
                             f"types (upstream's `plugin math`, which verimim does not ship)", line, col)

    def scan_magnitude(self, line: int, col: int) -> int:
        base, name = 10, "decimal"
        prefix = self.peek(1).lower() if self.peek() == "0" else ""
        if prefix in ("x", "b", "o"):
            base, name = {"x": (16, "hexadecimal"), "b": (2, "binary"), "o": (8, "octal")}[prefix]
            self.advance(2)
        digits = self.scan_digits(base)
        if not digits:
            raise self.error(f"expected a digit in {name} literal")
        # A decimal digit that the base refuses (`0b102`) is a typo, not the start of a new token.
        if "0" <= self.peek() <= "9" or (base == 16 and _digit_value(self.peek()) < 16):
            raise self.error(f"invalid digit {self.peek()!r} in {name} literal")
        if len(digits) > MAX_DIGITS:
            raise self.error("number literal too long", line, col)
        return int(digits, base)

    def scan_digits(self, base: int) -> str:
        """Digits of `base` with `'` separators, which must sit between two digits."""
        out: list[str] = []
        while True:
            c = self.peek()
            if _digit_value(c) < base:
                out.append(c)
                self.advance()
            elif c == "'" and out and _digit_value(self.peek(1)) < base:
                self.advance()
            else:
                return "".join(out)

    def scan_suffix(self, line: int, col: int) -> tuple[int | None, int | None]:
        c = self.peek()
        if c in ("I", "i") and "0" <= self.peek(1) <= "9":
            self.advance()
            width = self.scan_decimal_run(line, col)
            if width not in VALID_WIDTHS:
                raise self.error(f"invalid width {width} in index literal (expected 1 to 64 bits)", line, col)
            return width, None
        if c == "_" and "0" <= self.peek(1) <= "9":
            self.advance()
            return None, self.check_size(self.scan_decimal_run(line, col), line, col)
        if _is_subscript(c):
            digits: list[str] = []
            while _is_subscript(self.peek()):
                digits.append(str(SUBSCRIPTS.index(self.peek())))
                self.advance()
            if len(digits) > MAX_DIGITS:
                raise self.error("number literal too long", line, col)
            return None, self.check_size(int("".join(digits)), line, col)
        return None, None

    def scan_decimal_run(self, line: int, col: int) -> int:
        digits = self.scan_digits(10)
        if len(digits) > MAX_DIGITS:
            raise self.error("number literal too long", line, col)
        return int(digits)

    def check_size(self, size: int, line: int, col: int) -> int:
        if size == 0:
            raise self.error("index literal of size 0: Idx 0 has no values", line, col)
        return size

    def check_fits(self, value: int, bits: int | None, line: int, col: int) -> None:
        # Well-formed text whose value does not fit the type it states: a type error, as
        # `300:I8` is (upstream's World::lit: "index does not fit within arity").
        if bits is not None and value >= 1 << bits:
            raise TypeError_(f"literal {value} does not fit in I{bits} (Idx {1 << bits})", Loc(self.file, line, col))

    # ------------------------------------------------------------------ characters and strings

    def scan_char_item(self, quote: str, line: int, col: int, what: str) -> str:
        """One character (or escape) inside a literal; refuses end of line/input."""
        c = self.peek()
        if c == "" or c == "\n":
            raise self.error(f"unterminated {what}", line, col)
        if c != "\\":
            self.advance()
            return c
        esc_line, esc_col = self.line, self.col
        self.advance()
        e = self.peek()
        if e not in ESCAPES:
            shown = repr(e) if e else "end of input"
            raise self.error(f"invalid escape sequence '\\' followed by {shown}", esc_line, esc_col)
        self.advance()
        return chr(ESCAPES[e])

    def lex_char(self) -> None:
        start, line, col = self.pos, self.line, self.col
        self.advance()
        if self.peek() == "'" and self.peek(1) == "'":
            # three quotes are the quote itself: upstream's lexer takes any one character between quotes
            self.advance(2)
            self.emit(CHAR, start, line, col, ord("'"))
            return
        if self.peek() == "'":
            raise self.error("empty character literal", line, col)
        c = self.scan_char_item("'", line, col, "character literal")
        if self.peek() != "'":
            raise self.error("unterminated character literal (expected ' after one character)", line, col)
        self.advance()
        if ord(c) > 0x7F:
            raise self.error(f"character literal {c!r} is not ASCII (it must fit in I8)", line, col)
        self.emit(CHAR, start, line, col, ord(c))

    def lex_string(self) -> None:
        start, line, col = self.pos, self.line, self.col
        self.advance()
        chars: list[str] = []
        while self.peek() != '"':
            chars.append(self.scan_char_item('"', line, col, "string literal"))
        self.advance()
        self.emit(STR, start, line, col, "".join(chars).encode("utf-8"))


def _signed_pattern(sign: str, magnitude: int, bits: int | None) -> int:
    """A signed literal's value as upstream's lexer makes it: its two's-complement 64-bit
    pattern. `-1I64` is 2^64 - 1 (`strtoull`, saturating at 2^64 - 1); a `Nat` literal `-1` is
    2^64 - 1 too (`strtoll`, saturating at ±2^63), so `-1:I64` is the I64 -1. Where the pattern
    does not fit a narrower type (`-1I32`, `-1:I32`), that is an error, as upstream's."""
    if bits is not None:  # strtoull
        if magnitude >= 1 << 64:
            return (1 << 64) - 1
        return -magnitude % (1 << 64) if sign == "-" else magnitude
    v = -magnitude if sign == "-" else magnitude  # strtoll
    v = max(-(1 << 63), min(v, (1 << 63) - 1))
    return v % (1 << 64)


def tokenize(text: str, file: str = "<input>") -> list[Token]:
    """All tokens of `text`, ending with an EOF token; raises ParseError on malformed input."""
    return Lexer(text, file).run()
