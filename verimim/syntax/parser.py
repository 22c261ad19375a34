"""A hand-written recursive-descent parser for Mim (spec/LANGUAGE.md).

Public API: `parse_module(text, file)` and `parse_expr(text, file)`.

Design:
- Every error is a `ParseError` "expected X, found Y" at the first token that does not fit.
- Linear time: the only lookahead is bounded (one or two tokens) or scans a run of names once
  (name groups `a b: T`); whether `{…}` is an implicit Pi is decided from brace matches that
  are computed in one pass before parsing.
- Nesting is counted explicitly (`MAX_DEPTH`) so deep input gives a ParseError, never a
  RecursionError; the Python recursion limit is raised for the duration of a parse so that
  `MAX_DEPTH` levels always fit.
- Long flat sequences never recurse: arrow chains, applications, `#` chains, `where` chains,
  declaration lists and `ret` chains in a body are loops.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import TypeVar

from verimim.diagnostics import Loc, ParseError
from verimim.syntax import ast
from verimim.syntax.lexer import CHAR, EOF, NAME, NUM, STR, Token, tokenize

MAX_DEPTH = 1000

# Python frames per nesting level (e.g. `(` → expr → arrow → app → postfix → primary + wrappers)
# is below this; the recursion limit is raised to MAX_DEPTH times it while parsing.
FRAMES_PER_LEVEL = 16

BUILTINS: frozenset[str] = frozenset({"Nat", "Bool", "I1", "I8", "I16", "I32", "I64", "Univ", "*", "□"})

# Upstream's `i8` etc. are the Nat sizes of the index types (`I8 = Idx i8`, i8 = 256).
SIZE_KEYWORDS: dict[str, int] = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}

LAMBDA_KINDS: dict[str, ast.LamKind] = {"λ": "lam", "cn": "con", "fn": "fun"}
DECL_KINDS: dict[str, ast.LamKind] = {"lam": "lam", "con": "con", "fun": "fun"}

DECL_START: frozenset[str] = frozenset({"let", "axm", "anx", "extern", "lam", "con", "fun", "mod", "pub", "rec"})

DOMAIN_OPEN: frozenset[str] = frozenset({"(", "[", "{"})

# Tokens that may begin an argument of a juxtaposition application. `ret` is left out: it
# only begins a body's final expression (or stands alone inside brackets).
ARG_START: frozenset[str] = frozenset(
    {NAME, NUM, CHAR, STR, "ff", "tt", "⊤", "⊥", "(", "[", "«", "‹", "{", "Idx", "Type", "Cn", "Fn", "ins"}
    | BUILTINS
    | set(SIZE_KEYWORDS)
    | set(LAMBDA_KINDS)
)

T = TypeVar("T")


def _nested(method: Callable[..., T]) -> Callable[..., T]:
    """Counts one nesting level around `method`; too deep input is a ParseError."""

    @wraps(method)
    def wrapper(self: Parser, *args: object) -> T:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError(f"nesting too deep (more than {MAX_DEPTH} levels)", self.loc(self.peek()))
        result = method(self, *args)
        # On an exception the parser is abandoned, so the count need not be restored then.
        self.depth -= 1
        return result

    return wrapper


@dataclass(frozen=True)
class _RetHead:
    """`ret p = f $ x;` before its body is known."""

    loc: Loc
    pattern: ast.Pattern
    callee: ast.Expr
    arg: ast.Expr


def _match_braces(tokens: list[Token]) -> dict[int, int]:
    """Index of each `{` → index of its `}` (unmatched braces are absent)."""
    matches: dict[int, int] = {}
    stack: list[int] = []
    for i, tok in enumerate(tokens):
        if tok.kind == "{":
            stack.append(i)
        elif tok.kind == "}" and stack:
            matches[stack.pop()] = i
    return matches


def _body(decls: list[ast.Decl], expr: ast.Expr) -> ast.Expr:
    """`decl* e`: e itself when there are no declarations."""
    if not decls:
        return expr
    return ast.Block(decls[0].loc, tuple(decls), expr)


class Parser:
    def __init__(self, tokens: list[Token], file: str) -> None:
        self.toks = tokens
        self.pos = 0
        self.file = file
        self.depth = 0
        self.brace_match = _match_braces(tokens)

    # ------------------------------------------------------------------ token helpers

    def peek(self, ahead: int = 0) -> Token:
        i = min(self.pos + ahead, len(self.toks) - 1)
        return self.toks[i]

    def at(self, *kinds: str) -> bool:
        return self.peek().kind in kinds

    def next(self) -> Token:
        tok = self.peek()
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def accept(self, kind: str) -> Token | None:
        return self.next() if self.at(kind) else None

    def loc(self, tok: Token) -> Loc:
        return Loc(self.file, tok.line, tok.col)

    def error(self, what: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.peek()
        return ParseError(f"expected {what}, found {tok.describe()}", self.loc(tok))

    def expect(self, kind: str, what: str | None = None) -> Token:
        if not self.at(kind):
            raise self.error(what or f"'{kind}'")
        return self.next()

    def expect_close(self, kind: str, what: str) -> None:
        """Like expect, but re-splits ASCII closers that maximal munch grouped wrongly:
        `<i: 2; <j: 2; e>>` closes two packs (`>>` = `› ›`) and `<<3; <4; e>>>` closes a pack
        and then an array (`>>>` = `› »`, where `»` is then made of two adjacent `>`)."""
        tok = self.peek()
        if tok.kind == kind:
            self.next()
            return
        if kind == "›" and tok.text == ">>":
            # Consume the first `>`; the second stays as a `›` token.
            self.toks[self.pos] = Token("›", ">", tok.line, tok.col + 1)
            return
        after = self.peek(1)
        adjacent = after.line == tok.line and after.col == tok.col + 1
        if kind == "»" and tok.text == ">" and adjacent and after.text in (">", ">>"):
            self.next()
            if after.text == ">":
                self.next()
            else:
                self.toks[self.pos] = Token("›", ">", after.line, after.col + 1)
            return
        raise self.error(what)

    def simple_name(self, what: str = "a name") -> Token:
        """A plain identifier: no dots, no `%`."""
        tok = self.peek()
        if tok.kind != NAME or tok.percent or len(tok.value) != 1:  # type: ignore[arg-type]
            raise self.error(what)
        return self.next()

    def at_simple_name(self, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == NAME and not tok.percent and len(tok.value) == 1  # type: ignore[arg-type]

    def name_run_before_colon(self) -> int:
        """Length of a run of simple names followed by `:` at the cursor (0 if there is none)."""
        n = 0
        while self.at_simple_name(n):
            n += 1
        return n if n and self.peek(n).kind == ":" else 0

    # ------------------------------------------------------------------ module

    def parse_module(self) -> ast.Module:
        imports: list[ast.Import] = []
        while self.at("plugin", "import"):
            imports.append(self.parse_import())
        decls: list[ast.Decl] = []
        while not self.at(EOF):
            if self.peek().kind not in DECL_START:
                raise self.error("a declaration")
            decls.append(self.parse_decl_stmt())
        return ast.Module(Loc(self.file, 1, 1), tuple(imports), tuple(decls))

    def parse_import(self) -> ast.Import:
        kw = self.next()
        name = self.expect(NAME, f"a {kw.kind} name")
        self.expect(";")
        kind: ast.TLiteral["plugin", "import"] = "plugin" if kw.kind == "plugin" else "import"
        return ast.Import(self.loc(kw), kind, name.text)

    # ------------------------------------------------------------------ declarations

    def parse_decl_stmt(self) -> ast.Decl:
        """A declaration with its terminator: `;`, or `}` (plus an optional `;`) for `mod`."""
        decl = self.parse_decl()
        if isinstance(decl, ast.DeclMod):
            self.accept(";")
        else:
            self.expect(";")
        return decl

    def parse_decls_until(self, end: str) -> tuple[ast.Decl, ...]:
        decls: list[ast.Decl] = []
        while not self.at(end):
            if self.peek().kind not in DECL_START:
                raise self.error(f"a declaration or '{end}'")
            decls.append(self.parse_decl_stmt())
        return tuple(decls)

    @_nested
    def parse_decl(self) -> ast.Decl:
        """A declaration without its terminating `;` (so `rec … and …;` can share one)."""
        tok = self.peek()
        kind = tok.kind
        if kind == "axm":
            return self.parse_axm(tok)
        if kind == "let":
            return self.parse_let(tok, anx=False)
        if kind == "anx":
            return self.parse_anx(tok)
        if kind in ("extern", "lam", "con", "fun"):
            return self.parse_lam_decl(tok, anx=False)
        if kind in ("mod", "pub"):
            return self.parse_mod(tok)
        if kind == "rec":
            return self.parse_rec(tok)
        raise self.error("a declaration")

    def parse_axm(self, start: Token) -> ast.DeclAxm:
        self.next()
        name = self.expect(NAME, "an axiom name")
        tags = self.parse_tags() if self.at("(") else None
        self.expect(":")
        type_ = self.parse_expr()
        parts: tuple[str, ...] = name.value  # type: ignore[assignment]
        return ast.DeclAxm(self.loc(start), start.doc, parts, tags, type_, name.percent)

    def parse_tags(self) -> tuple[str, ...]:
        self.next()
        tags = [self.simple_name("a tag name").text]
        while self.accept(","):
            tags.append(self.simple_name("a tag name").text)
        self.expect(")", "',' or ')'")
        return tuple(tags)

    def parse_anx(self, start: Token) -> ast.Decl:
        self.next()
        if self.at("let"):
            return self.parse_let(start, anx=True)
        if self.at("extern", "lam", "con", "fun"):
            return self.parse_lam_decl(start, anx=True)
        raise self.error("'let', 'lam', 'con' or 'fun' after 'anx'")

    def parse_let(self, start: Token, anx: bool) -> ast.DeclLet:
        self.next()
        percent_name: tuple[str, ...] | None = None
        tok = self.peek()
        if tok.kind == NAME and tok.percent:
            # Upstream's `let %p.n = e;`: an annex; the pattern binds the last part locally.
            self.next()
            percent_name = tok.value  # type: ignore[assignment]
            type_ = self.parse_arrow() if self.accept(":") else None
            pattern: ast.Pattern = ast.PVar(self.loc(tok), percent_name[-1], type_)
            anx = True
        else:
            pattern = self.parse_pattern()
            if anx and not isinstance(pattern, ast.PVar):
                raise ParseError("expected a name after 'anx let', found a pattern", pattern.loc)
        self.expect("=")
        value = self.parse_expr()
        return ast.DeclLet(self.loc(start), start.doc, pattern, value, anx, percent_name)

    def parse_lam_decl(self, start: Token, anx: bool) -> ast.DeclLam:
        extern = self.accept("extern") is not None
        kw = self.peek()
        if kw.kind not in DECL_KINDS:
            raise self.error("'lam', 'con' or 'fun'")
        self.next()
        extern = self.accept("extern") is not None or extern
        name_tok = self.expect(NAME, f"the name of the {kw.text}")
        parts: tuple[str, ...] = name_tok.value  # type: ignore[assignment]
        percent_name = parts if name_tok.percent else None
        if percent_name is None and len(parts) != 1:
            raise self.error(f"a plain name (write '%{name_tok.text}' for an annex)", name_tok)
        domains = self.parse_domains()
        codom = self.parse_expr() if self.accept(":") else None
        body = self.parse_body() if self.accept("=") else None
        return ast.DeclLam(
            self.loc(start), start.doc, DECL_KINDS[kw.kind], parts[-1], domains, codom, body,
            anx or percent_name is not None, extern, percent_name,
        )

    def parse_mod(self, start: Token) -> ast.DeclMod:
        pub = self.accept("pub") is not None
        self.expect("mod", "'mod' after 'pub'")
        name = self.simple_name("a module name")
        self.expect("{")
        decls = self.parse_decls_until("}")
        self.next()
        return ast.DeclMod(self.loc(start), start.doc, name.text, decls, pub)

    def parse_rec(self, start: Token) -> ast.DeclRec:
        self.next()
        members = [self.parse_decl()]
        while True:
            if self.accept("and"):
                members.append(self.parse_decl())
            elif self.at(";") and self.peek(1).kind == "and":
                # Tolerate `d; and d;` — a stray terminator before `and`.
                self.next()
            else:
                return ast.DeclRec(self.loc(start), start.doc, tuple(members))

    # ------------------------------------------------------------------ bodies

    def parse_body(self) -> ast.Expr:
        """`decl* e`, where e may be `ret p = f $ x; body` — a loop, so long ret chains are flat."""
        segments: list[tuple[list[ast.Decl], _RetHead]] = []
        while True:
            decls: list[ast.Decl] = []
            while self.peek().kind in DECL_START:
                decls.append(self.parse_decl_stmt())
            if not self.at("ret"):
                break
            segments.append((decls, self.parse_ret_head()))
        result = _body(decls, self.parse_expr())
        for seg_decls, head in reversed(segments):
            ret = ast.Ret(head.loc, head.pattern, head.callee, head.arg, result)
            result = _body(seg_decls, ret)
        return result

    def parse_ret_head(self) -> _RetHead:
        start = self.next()
        pattern = self.parse_pattern()
        self.expect("=")
        callee = self.parse_expr()
        self.expect("$", "'$'")
        arg = self.parse_expr()
        self.expect(";")
        return _RetHead(self.loc(start), pattern, callee, arg)

    # ------------------------------------------------------------------ expressions by precedence

    def parse_expr(self) -> ast.Expr:
        """The loosest level: `e where decl* end` (repeatable)."""
        expr = self.parse_arrow()
        while self.accept("where"):
            decls = self.parse_decls_until("end")
            self.next()
            expr = ast.Where(expr.loc, expr, decls)
        return expr

    def parse_arrow(self) -> ast.Expr:
        """`a → b → c` (right associative), built from a flat list."""
        operands = [self.parse_app()]
        while self.accept("→"):
            operands.append(self.parse_app())
        result = operands[-1]
        for dom in reversed(operands[:-1]):
            result = ast.Pi(dom.loc, dom, result)
        return result

    def parse_app(self) -> ast.Expr:
        """Juxtaposition and `@`, left associative."""
        expr = self.parse_postfix()
        while True:
            if self.accept("@"):
                expr = ast.App(expr.loc, expr, self.parse_postfix(), explicit=True)
            elif self.peek().kind in ARG_START:
                expr = ast.App(expr.loc, expr, self.parse_postfix())
            else:
                return expr

    def parse_postfix(self) -> ast.Expr:
        """`e # i # j`; each index is a primary."""
        expr = self.parse_primary()
        while self.accept("#"):
            expr = ast.Extract(expr.loc, expr, self.parse_primary())
        return expr

    # ------------------------------------------------------------------ primaries

    @_nested
    def parse_primary(self) -> ast.Expr:
        tok = self.peek()
        kind = tok.kind
        loc = self.loc(tok)
        simple = self.parse_simple_atom(tok, loc)
        if simple is not None:
            return simple
        parser = self.PRIMARY.get(kind)
        if parser is None:
            raise self.error("an expression")
        return parser(self, tok, loc)

    def parse_simple_atom(self, tok: Token, loc: Loc) -> ast.Expr | None:
        """One-token atoms (and literals with their `:T` ascription); None if tok starts none."""
        kind = tok.kind
        if kind == NAME:
            self.next()
            return ast.Name(loc, tok.value, tok.percent)  # type: ignore[arg-type]
        if kind == NUM:
            self.next()
            value, bits, size = tok.value  # type: ignore[misc]
            return ast.NumLit(loc, value, bits, size, self.parse_ascription())
        if kind in ("⊤", "⊥"):
            self.next()
            return ast.TopBot(loc, kind == "⊤", self.parse_ascription())
        if kind in ("ff", "tt"):
            self.next()
            return ast.BoolLit(loc, kind == "tt")
        if kind == CHAR:
            self.next()
            return ast.CharLit(loc, tok.value)  # type: ignore[arg-type]
        if kind == STR:
            self.next()
            return ast.StrLit(loc, tok.value)  # type: ignore[arg-type]
        if kind in BUILTINS:
            self.next()
            return ast.Builtin(loc, kind)
        if kind in SIZE_KEYWORDS:
            self.next()
            return ast.NumLit(loc, 1 << SIZE_KEYWORDS[kind])
        return None

    def parse_ascription(self) -> ast.Expr | None:
        """`42:T` / `⊤:T`: T is a primary (so `⊤:Nat; I8` stops at `;`)."""
        if not self.accept(":"):
            return None
        return self.parse_primary()

    def p_idx(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        return ast.IdxType(loc, self.parse_postfix())  # `Idx s#i` is `Idx (s#i)`: `#` binds tighter

    def p_type(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        return ast.TypeUniverse(loc, self.parse_primary())

    def p_cn(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        return ast.Cn(loc, self.parse_postfix())

    def p_fn(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        dom = self.parse_postfix()
        self.expect("→", "'→' after the domain of 'Fn'")
        return ast.Fn(loc, dom, self.parse_arrow())

    def p_ins(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        self.expect("(", "'(' after 'ins'")
        tuple_ = self.parse_expr()
        self.expect(",")
        index = self.parse_expr()
        self.expect(",")
        value = self.parse_expr()
        self.expect(")")
        return ast.Insert(loc, tuple_, index, value)

    def p_paren(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        if self.accept(")"):
            return ast.Tuple(loc, ())
        elems = [self.parse_expr()]
        trailing = False
        while self.accept(","):
            if self.at(")"):
                trailing = True
                break
            elems.append(self.parse_expr())
        self.expect(")", "',' or ')'")
        if len(elems) == 1 and not trailing:
            return elems[0]
        return ast.Tuple(loc, tuple(elems))

    def p_sigma(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        elems = self.parse_sigma_elems("]")
        self.expect("]", "',' or ']'")
        return ast.Sigma(loc, elems)

    def parse_sigma_elems(self, close: str) -> tuple[ast.SigmaElem, ...]:
        """`names+ : T` groups and bare types, comma separated, up to (not including) `close`."""
        elems: list[ast.SigmaElem] = []
        while not self.at(close):
            elems.extend(self.parse_sigma_elem())
            if not self.accept(","):
                break
        return tuple(elems)

    def parse_sigma_elem(self) -> list[ast.SigmaElem]:
        run = self.name_run_before_colon()
        if not run:
            type_ = self.parse_expr()
            return [ast.SigmaElem(type_.loc, None, type_)]
        names = [self.next() for _ in range(run)]
        self.next()  # ':'
        type_ = self.parse_expr()
        # One element per name, all sharing the one type expression object.
        return [ast.SigmaElem(self.loc(n), n.text, type_) for n in names]

    def p_arr(self, tok: Token, loc: Loc) -> ast.Expr:
        return self.parse_arr_or_pack(tok, loc, "»", ast.Arr)

    def p_pack(self, tok: Token, loc: Loc) -> ast.Expr:
        return self.parse_arr_or_pack(tok, loc, "›", ast.Pack)

    def parse_arr_or_pack(
        self, tok: Token, loc: Loc, close: str, node: type[ast.Arr] | type[ast.Pack]
    ) -> ast.Expr:
        """`«i: n, m; T»` = `«i: n; «m; T»»`; the same for packs."""
        self.next()
        shapes: list[tuple[Loc, str | None, ast.Expr]] = []
        while True:
            shape_loc = self.loc(self.peek())
            index: str | None = None
            if self.at_simple_name() and self.peek(1).kind == ":":
                index = self.next().text
                self.next()
            shapes.append((shape_loc, index, self.parse_expr()))
            if not self.accept(","):
                break
        self.expect(";", "',' or ';'")
        body = self.parse_expr()
        self.expect_close(close, f"'{close}'")
        result = body
        for i in range(len(shapes) - 1, -1, -1):
            shape_loc, index, shape = shapes[i]
            result = node(loc if i == 0 else shape_loc, index, shape, result)
        return result

    def p_brace(self, tok: Token, loc: Loc) -> ast.Expr:
        """`{ binders } → e` (implicit Pi) if the matching `}` is followed by `→`, else a block."""
        close = self.brace_match.get(self.pos)
        if close is not None and self.toks[close + 1].kind == "→":
            return self.parse_implicit_pi(loc)
        self.next()
        body = self.parse_body()
        self.expect("}", "'}'")
        if isinstance(body, ast.Block) and not body.braces:
            return ast.Block(loc, body.decls, body.expr, braces=True)
        return ast.Block(loc, (), body, braces=True)

    def parse_implicit_pi(self, loc: Loc) -> ast.Expr:
        self.next()
        elems = self.parse_sigma_elems("}")
        self.expect("}", "',' or '}'")
        self.expect("→")
        return ast.Pi(loc, ast.Sigma(loc, elems), self.parse_arrow(), implicit=True)

    def p_lambda(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        domains = self.parse_domains()
        codom = self.parse_expr() if self.accept(":") else None
        self.expect("=", "':' or '='" if codom is None else "'='")
        return ast.Lambda(loc, LAMBDA_KINDS[tok.kind], domains, codom, self.parse_body())

    def p_ret(self, tok: Token, loc: Loc) -> ast.Expr:
        head = self.parse_ret_head()
        return ast.Ret(head.loc, head.pattern, head.callee, head.arg, self.parse_body())

    PRIMARY: dict[str, Callable[[Parser, Token, Loc], ast.Expr]] = {
        "Idx": p_idx,
        "Type": p_type,
        "Cn": p_cn,
        "Fn": p_fn,
        "ins": p_ins,
        "(": p_paren,
        "[": p_sigma,
        "«": p_arr,
        "‹": p_pack,
        "{": p_brace,
        "λ": p_lambda,
        "cn": p_lambda,
        "fn": p_lambda,
        "ret": p_ret,
    }

    # ------------------------------------------------------------------ patterns

    def parse_domains(self) -> tuple[ast.Pattern, ...]:
        if not self.at(*DOMAIN_OPEN):
            raise self.error("a domain '(', '[' or '{'")
        domains: list[ast.Pattern] = []
        while self.at(*DOMAIN_OPEN):
            domains.append(self.parse_domain())
        return tuple(domains)

    def parse_domain(self) -> ast.Pattern:
        # Not counted: any nesting below a domain passes through parse_pattern or parse_primary.
        if self.at("{"):
            return self.parse_pattern_list("}", implicit=True)
        return self.parse_pattern_atom()

    @_nested
    def parse_pattern(self) -> ast.Pattern:
        pattern = self.parse_pattern_atom()
        while self.accept("as"):
            name = self.simple_name("a name after 'as'")
            pattern = ast.PAs(pattern.loc, pattern, name.text)
        return pattern

    def parse_pattern_atom(self) -> ast.Pattern:
        tok = self.peek()
        if tok.kind == "(":
            return self.parse_pattern_list(")")
        if tok.kind == "[":
            return self.parse_pattern_list("]", brackets=True)
        if tok.kind != NAME:
            raise self.error("a pattern")
        name = self.simple_name("a variable name")
        type_ = self.parse_arrow() if self.accept(":") else None
        return ast.PVar(self.loc(name), name.text, type_)

    def parse_pattern_list(self, close: str, implicit: bool = False, brackets: bool = False) -> ast.Pattern:
        """`( p, a b: T, … )`: groups split into one PVar per name sharing the type.
        `(p)` is p itself (like `(e)`); `[p]` and `{p}` keep their PTuple for the flag."""
        open_ = self.next()
        elems: list[ast.Pattern] = []
        trailing = False
        while not self.at(close):
            elems.extend(self.parse_pattern_elem())
            if not self.accept(","):
                break
            trailing = self.at(close)
        self.expect(close, f"',' or '{close}'")
        if close == ")" and len(elems) == 1 and not trailing:
            return elems[0]
        return ast.PTuple(self.loc(open_), tuple(elems), implicit, brackets)

    def parse_pattern_elem(self) -> list[ast.Pattern]:
        run = self.name_run_before_colon()
        if run < 2:
            return [self.parse_pattern()]
        names = [self.next() for _ in range(run)]
        self.next()  # ':'
        type_ = self.parse_arrow()
        return [ast.PVar(self.loc(n), n.text, type_) for n in names]


def _with_recursion_room(run: Callable[[], T]) -> T:
    """Runs a parse with a recursion limit that fits MAX_DEPTH levels, restoring it afterwards."""
    old = sys.getrecursionlimit()
    # Added to the old limit, which already covers the caller's own stack.
    sys.setrecursionlimit(old + MAX_DEPTH * FRAMES_PER_LEVEL)
    try:
        return run()
    finally:
        sys.setrecursionlimit(old)


def parse_module(text: str, file: str) -> ast.Module:
    """Parses a whole `.mim` file; raises ParseError at the first bad token."""
    parser = Parser(tokenize(text, file), file)
    return _with_recursion_room(parser.parse_module)


def parse_expr(text: str, file: str = "<expr>") -> ast.Expr:
    """Parses one expression (a body: `decl* e` is accepted) that must span all of `text`."""
    parser = Parser(tokenize(text, file), file)

    def run() -> ast.Expr:
        expr = parser.parse_body()
        parser.expect(EOF, "end of input")
        return expr

    return _with_recursion_room(run)
