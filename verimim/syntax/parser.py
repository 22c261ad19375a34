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
from typing import TypeVar, cast

from verimim.diagnostics import Loc, ParseError, UnsupportedError
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

DECL_START: frozenset[str] = frozenset(
    {"let", "axm", "anx", "extern", "lam", "con", "fun", "mod", "pub", "rec", "ccon", "cfun", "rule", "norm"}
)

# Precedence of a domain's type in a declaration without parentheses (`con k m: M = …`):
# a `con`'s reaches over arrows, a `lam`'s or `fun`'s stops before `→` (upstream's Prec::Pi).
LAM_DECL_KINDS: frozenset[str] = frozenset(DECL_KINDS)

DOMAIN_OPEN: frozenset[str] = frozenset({"(", "[", "{"})

# Tokens that may begin an argument of a juxtaposition application. `ret` is left out: it
# only begins a body's final expression (or stands alone inside brackets).
ARG_START: frozenset[str] = frozenset(
    {NAME, NUM, CHAR, STR, "ff", "tt", "⊤", "⊥", "(", "[", "«", "‹", "{", "Idx", "Type", "Cn", "Fn", "ins", "Rule"}
    | BUILTINS
    | set(SIZE_KEYWORDS)
    | set(LAMBDA_KINDS)
)

T = TypeVar("T")


def _nested(method: Callable[..., T]) -> Callable[..., T]:
    """Counts one nesting level around `method`; input nested deeper than verimim processes is
    E-UNSUPPORTED (docs/diagnostics.md: it is Mim, not a parse error)."""

    @wraps(method)
    def wrapper(self: Parser, *args: object) -> T:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise UnsupportedError(f"nesting too deep for verimim (more than {MAX_DEPTH} nested expressions "
                                   f"and declarations, the enclosing ones counted)", self.loc(self.peek()))
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

    # (asked a dozen times per token: each written out rather than built on `peek`; the token
    # list ends with EOF, which `pos` never passes)
    def peek(self, ahead: int = 0) -> Token:
        toks = self.toks
        i = self.pos + ahead
        return toks[i] if i < len(toks) else toks[-1]

    def at(self, *kinds: str) -> bool:
        return self.toks[self.pos].kind in kinds

    def next(self) -> Token:
        tok = self.toks[self.pos]
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def accept(self, kind: str) -> Token | None:
        tok = self.toks[self.pos]
        if tok.kind != kind:
            return None
        if kind != EOF:
            self.pos += 1
        return tok

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
        while True:
            self.skip_semicolons()
            if self.at(EOF):
                break
            if self.peek().kind not in DECL_START:
                raise self.error("a declaration")
            decls.append(self.parse_decl_stmt())
        return ast.Module(Loc(self.file, 1, 1), tuple(imports), tuple(decls))

    def skip_semicolons(self) -> None:
        """Upstream eats stray `;` between declarations (`;;`, a `;` after `end` or `}`)."""
        while self.accept(";"):
            pass

    def parse_import(self) -> ast.Import:
        kw = self.next()
        name = self.expect(NAME, f"a {kw.kind} name")
        self.expect(";")
        kind: ast.TLiteral["plugin", "import"] = "plugin" if kw.kind == "plugin" else "import"
        # `import foo.mim;` is `import foo;` (langref: a name without extension gets `.mim`)
        text = name.text.removesuffix(".mim") if kind == "import" and name.text != ".mim" else name.text
        return ast.Import(self.loc(kw), kind, text)

    # ------------------------------------------------------------------ declarations

    def parse_decl_stmt(self) -> ast.Decl:
        """A declaration and the `;`s after it. As upstream, the `;` is optional: a declaration
        ends where its last expression does (`let x = f a let y = …` is two declarations)."""
        decl = self.parse_decl()
        self.skip_semicolons()
        return decl

    def parse_decls_until(self, end: str) -> tuple[ast.Decl, ...]:
        decls: list[ast.Decl] = []
        self.skip_semicolons()
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
            return self.and_group(tok, self.parse_lam_decl(tok, anx=False))
        if kind in ("mod", "pub"):
            return self.parse_mod(tok)
        if kind == "rec":
            return self.parse_rec(tok)
        if kind in ("ccon", "cfun"):
            return self.parse_c_decl(tok)
        if kind in ("rule", "norm"):
            return self.parse_rule(tok)
        raise self.error("a declaration")

    def parse_axm(self, start: Token) -> ast.DeclAxm:
        """`axm N (tag (= alias)*, …)? : T (, normalizer)? (, curry (, trip)?)?`."""
        self.next()
        name = self.expect(NAME, "an axiom name")
        tags: tuple[str, ...] | None = None
        aliases: tuple[tuple[str, ...], ...] = ()
        if self.at("("):
            tags, aliases = self.parse_tags()
        self.expect(":")
        type_ = self.parse_expr()
        normalizer: str | None = None
        curry: int | None = None
        trip: int | None = None
        if self.at(",") and self.at_simple_name(1):
            self.next()
            normalizer = self.next().text
        if self.accept(","):
            curry = self.parse_count("a curry count")
            if self.accept(","):
                trip = self.parse_count("a trip count")
        parts: tuple[str, ...] = name.value  # type: ignore[assignment]
        return ast.DeclAxm(self.loc(start), start.doc, parts, tags, type_, name.percent,
                           aliases, normalizer, curry, trip, self.loc(name))

    def parse_count(self, what: str) -> int:
        tok = self.expect(NUM, what)
        value, bits, size = tok.value  # type: ignore[misc]
        if bits is not None or size is not None:
            raise self.error(what, tok)
        return value

    def parse_tags(self) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        self.next()
        tags: list[str] = []
        aliases: list[tuple[str, ...]] = []
        while True:
            tags.append(self.simple_name("a tag name").text)
            names: list[str] = []
            while self.accept("="):
                names.append(self.simple_name("an alias of the tag").text)
            aliases.append(tuple(names))
            if not self.accept(",") or self.at(")"):
                break
        self.expect(")", "',' or ')'")
        return tuple(tags), tuple(aliases) if any(aliases) else ()

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
            percent_name = cast(tuple[str, ...], tok.value)  # NAME: the dotted parts
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
        kind = DECL_KINDS[kw.kind]
        domains, filters = self.parse_domains(kind)
        codom = self.parse_arrow() if self.accept(":") else None
        body = self.parse_body() if self.accept("=") else None
        return ast.DeclLam(
            self.loc(start), start.doc, kind, parts[-1], domains, codom, body,
            anx or percent_name is not None, extern, percent_name, filters,
        )

    def and_group(self, start: Token, first: ast.Decl) -> ast.Decl:
        """`d and d and …`: a mutually recursive group (after `rec`, or after a `lam`/`con`/`fun`
        declaration as upstream allows). A member is a declaration or `N (: T)? = e`."""
        if not self.at_and():
            return first
        members = [first]
        while self.at_and():
            self.skip_semicolons()
            and_tok = self.next()
            members.append(self.parse_group_member(and_tok))
        return ast.DeclRec(self.loc(start), start.doc, tuple(members))

    def at_and(self) -> bool:
        """`and`, possibly after a stray `;` (`d; and d`)."""
        n = 0
        while self.peek(n).kind == ";":
            n += 1
        return self.peek(n).kind == "and"

    def parse_group_member(self, start: Token) -> ast.Decl:
        tok = self.peek()
        if tok.kind in ("extern", "lam", "con", "fun"):
            return self.parse_lam_decl(tok, anx=False)
        if tok.kind == "anx":
            return self.parse_anx(tok)
        if tok.kind == "rec":
            raise self.error("a member of the recursive group ('rec' does not nest)")
        if tok.kind in DECL_START:
            return self.parse_decl()
        return self.parse_rec_val(start)

    def parse_rec_val(self, start: Token) -> ast.DeclRecVal:
        name = self.expect(NAME, "a name, or 'lam', 'con' or 'fun'")
        parts: tuple[str, ...] = name.value  # type: ignore[assignment]
        percent_name = parts if name.percent else None
        if percent_name is None and len(parts) != 1:
            raise self.error(f"a plain name (write '%{name.text}' for an annex)", name)
        type_ = self.parse_expr() if self.accept(":") else None
        self.expect("=", "'=' in a recursive declaration" if type_ is None else "'='")
        value = self.parse_expr()
        return ast.DeclRecVal(self.loc(start), start.doc, parts[-1], percent_name, type_, value)

    def parse_c_decl(self, start: Token) -> ast.DeclC:
        """`ccon N [D]` / `cfun N [D]: R`: D is a bracket-style domain (or an application)."""
        self.next()
        name = self.simple_name(f"the name of the C function after '{start.kind}'")
        dom = self.p_sigma(self.peek(), self.loc(self.peek())) if self.at("[") else self.parse_app()
        codom: ast.Expr | None = None
        if start.kind == "cfun":
            self.expect(":", "':' and the return type of the 'cfun'")
            codom = self.parse_arrow()
        kind: ast.TLiteral["ccon", "cfun"] = "ccon" if start.kind == "ccon" else "cfun"
        return ast.DeclC(self.loc(start), start.doc, kind, name.text, dom, codom)

    def parse_rule(self, start: Token) -> ast.DeclRule:
        """`rule N p : lhs (when guard)? => rhs` (`norm` likewise)."""
        self.next()
        name = self.expect(NAME, "the name of the rule")
        pattern = self.parse_pattern()
        self.expect(":", "':' before the rule's left-hand side")
        lhs = self.parse_arrow()
        guard = self.parse_arrow() if self.accept("when") else None
        self.expect("⇒", "'=>' before the rule's right-hand side")
        rhs = self.parse_expr()
        return ast.DeclRule(self.loc(start), start.doc, name.text, start.kind == "norm", pattern, lhs, guard, rhs)

    def parse_mod(self, start: Token) -> ast.DeclMod:
        pub = self.accept("pub") is not None
        self.expect("mod", "'mod' after 'pub'")
        name = self.simple_name("a module name")
        self.expect("{")
        decls = self.parse_decls_until("}")
        self.next()
        return ast.DeclMod(self.loc(start), start.doc, name.text, decls, pub)

    def parse_rec(self, start: Token) -> ast.Decl:
        rec_tok = self.next()
        first = self.parse_group_member(rec_tok)
        group = self.and_group(start, first)
        if isinstance(group, ast.DeclRec):
            return group
        return ast.DeclRec(self.loc(start), start.doc, (first,))

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
        operands = [self.parse_inj()]
        while self.accept("→"):
            operands.append(self.parse_inj())
        result = operands[-1]
        for dom in reversed(operands[:-1]):
            result = ast.Pi(dom.loc, dom, result)
        return result

    def parse_inj(self) -> ast.Expr:
        """`e inj T inj U` (right associative, between `→` and application), from a flat list."""
        operands = [self.parse_app()]
        while self.accept("inj"):
            operands.append(self.parse_app())
        result = operands[-1]
        for value in reversed(operands[:-1]):
            result = ast.Inj(value.loc, value, result)
        return result

    def parse_app(self) -> ast.Expr:
        """Juxtaposition and `@`, left associative; operands are unions (which bind tighter)."""
        expr = self.parse_union()
        while True:
            if self.accept("@"):
                expr = ast.App(expr.loc, expr, self.parse_union(), explicit=True)
            elif self.peek().kind in ARG_START:
                expr = ast.App(expr.loc, expr, self.parse_union())
            else:
                return expr

    def parse_union(self) -> ast.Expr:
        """`A ∪ B ∪ C`: one flat union of extract-level operands."""
        first = self.parse_postfix()
        if not self.at("∪"):
            return first
        types = [first]
        while self.accept("∪"):
            types.append(self.parse_postfix())
        return ast.Union_(first.loc, tuple(types))

    def parse_postfix(self) -> ast.Expr:
        """`e # i # j`; each index is a primary."""
        expr = self.parse_primary()
        while self.accept("#"):
            by_name = self.at_simple_name()  # `e#(x)` is parenthesized: the variable, never a field
            expr = ast.Extract(expr.loc, expr, self.parse_primary(), by_name)
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
            return ast.CharLit(loc, tok.value, self.parse_ascription())  # type: ignore[arg-type]
        if kind == STR:
            self.next()
            return ast.StrLit(loc, tok.value, self.parse_ascription())  # type: ignore[arg-type]
        if kind in BUILTINS:
            self.next()
            return ast.Builtin(loc, kind)
        if kind in SIZE_KEYWORDS:
            self.next()
            return ast.NumLit(loc, 1 << SIZE_KEYWORDS[kind])
        return None

    def parse_ascription(self) -> ast.Expr | None:
        """`42:T` / `⊤:T`: T is a primary (so `⊤:Nat; I8` stops at `;`). The ascription binds
        tightest (upstream's Prec::Lit): `5:Idx 8` is `(5:Idx) 8`, as upstream reads it, so
        `Idx` there is the function, without its operand."""
        if not self.accept(":"):
            return None
        tok = self.peek()
        if tok.kind == "Idx":
            self.next()
            return ast.Builtin(self.loc(tok), "Idx")
        return self.parse_primary()

    def p_idx(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        if self.peek().kind not in ARG_START:
            return ast.Builtin(loc, "Idx")  # no operand: `Idx` the function (`let F = Idx;`)
        return ast.IdxType(loc, self.parse_postfix())  # `Idx s#i` is `Idx (s#i)`: `#` binds tighter

    def p_type(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        return ast.TypeUniverse(loc, self.parse_primary())

    def p_cn(self, tok: Token, loc: Loc) -> ast.Expr:
        """`Cn [D]`, or `Cn e` where e reaches as far as an expression can (`Cn %mem.M 0`)."""
        self.next()
        if self.at("["):
            return ast.Cn(loc, self.p_sigma(self.peek(), self.loc(self.peek()), domain_only=True))
        return ast.Cn(loc, self.parse_arrow())

    def p_fn(self, tok: Token, loc: Loc) -> ast.Expr:
        """`Fn [D] → R`, or `Fn e → R` with e an application (`Fn %mem.M 0 → …`)."""
        self.next()
        if self.at("["):
            dom = self.p_sigma(self.peek(), self.loc(self.peek()), domain_only=True)
        else:
            dom = self.parse_inj()
        self.expect("→", "'→' after the domain of 'Fn'")
        return ast.Fn(loc, dom, self.parse_arrow())

    def p_rule_type(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        return ast.RuleType(loc, self.parse_union())

    def p_match(self, tok: Token, loc: Loc) -> ast.Expr:
        """`match e with |? p => e (| p => e)*`."""
        self.next()
        scrutinee = self.parse_expr()
        self.expect("with", "'with' after the matched expression")
        self.accept("|")
        arms: list[ast.MatchArm] = []
        while True:
            arm_loc = self.loc(self.peek())
            pattern = self.parse_pattern()
            self.expect("⇒", "'=>' after the pattern of a match arm")
            arms.append(ast.MatchArm(arm_loc, pattern, self.parse_expr()))
            if not self.accept("|"):
                return ast.Match(loc, scrutinee, tuple(arms))

    def p_decl_expr(self, tok: Token, loc: Loc) -> ast.Expr:
        """A declaration expression `decl* e` in expression position (`let x = let y = 1; y;`)."""
        return self.parse_body()

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

    def p_sigma(self, tok: Token, loc: Loc, domain_only: bool = False) -> ast.Expr:
        """`[b, …]`, or a dependent function type `[b, …] as x → e` (with `domain_only`, as the
        domain of `Cn`/`Fn`, the alias is left to the caller: none is taken)."""
        self.next()
        elems = self.parse_sigma_elems("]")
        self.expect("]", "',' or ']'")
        sigma = ast.Sigma(loc, elems)
        if domain_only or not self.at("as"):
            return sigma
        self.next()
        alias = self.simple_name("a name after 'as'")
        self.expect("→", "'→' after the aliased domain")
        return ast.Pi(loc, sigma, self.parse_arrow(), alias=alias.text)

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
        if close is not None and self.toks[close + 1].kind in ("→", "as"):
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
        alias = self.simple_name("a name after 'as'").text if self.accept("as") else None
        self.expect("→")
        return ast.Pi(loc, ast.Sigma(loc, elems), self.parse_arrow(), implicit=True, alias=alias)

    def p_lambda(self, tok: Token, loc: Loc) -> ast.Expr:
        self.next()
        self.accept("extern")  # upstream allows `λ extern …`; an anonymous lambda has no symbol
        kind = LAMBDA_KINDS[tok.kind]
        domains, filters = self.parse_domains(kind)
        codom = self.parse_arrow() if self.accept(":") else None
        self.expect("=", "':' or '='" if codom is None else "'='")
        return ast.Lambda(loc, kind, domains, codom, self.parse_body(), filters)

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
        "Rule": p_rule_type,
        "match": p_match,
        "let": p_decl_expr,
        "lam": p_decl_expr,
        "con": p_decl_expr,
        "fun": p_decl_expr,
        "rec": p_decl_expr,
        "axm": p_decl_expr,
        "ccon": p_decl_expr,
        "cfun": p_decl_expr,
        "rule": p_decl_expr,
        "norm": p_decl_expr,
    }

    # ------------------------------------------------------------------ patterns

    def parse_domains(self, kind: ast.LamKind) -> tuple[tuple[ast.Pattern, ...], tuple[ast.Expr | None, ...]]:
        """The domains of a lam/con/fun, each optionally followed by a filter `@e`. The first
        may be a bare binder (`con k m: M = …`, `λ y: Nat = y`); further ones are bracketed."""
        if not self.at(*DOMAIN_OPEN) and not self.at_simple_name():
            raise self.error("a domain '(', '[', '{' or a parameter name")
        domains: list[ast.Pattern] = []
        filters: list[ast.Expr | None] = []
        while True:
            domains.append(self.parse_domain(kind))
            filters.append(self.parse_arrow() if self.accept("@") else None)
            if not self.at(*DOMAIN_OPEN):
                break
        return tuple(domains), tuple(filters) if any(f is not None for f in filters) else ()

    def parse_domain(self, kind: ast.LamKind) -> ast.Pattern:
        # Not counted: any nesting below a domain passes through parse_pattern or parse_primary.
        if self.at("{"):
            pattern = self.parse_pattern_list("}", implicit=True)
        elif self.at_simple_name():
            name = self.next()
            type_: ast.Expr | None = None
            if self.accept(":"):
                # Upstream's precedence for a bare domain's type: a `con`'s may contain arrows.
                type_ = self.parse_arrow() if kind == "con" else self.parse_inj()
            pattern = ast.PVar(self.loc(name), name.text, type_)
        else:
            pattern = self.parse_pattern_atom()
        while self.accept("as"):
            alias = self.simple_name("a name after 'as'")
            pattern = ast.PAs(pattern.loc, pattern, alias.text)
        return pattern

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
            elems.extend(self.parse_bracket_elem() if brackets else self.parse_pattern_elem())
            if not self.accept(","):
                break
            trailing = self.at(close)
        self.expect(close, f"',' or '{close}'")
        if close == ")" and len(elems) == 1 and not trailing:
            return elems[0]
        return ast.PTuple(self.loc(open_), tuple(elems), implicit, brackets)

    def parse_bracket_elem(self) -> list[ast.Pattern]:
        """An element of a `[…]` pattern: as in `( … )`, except that an element that is not a
        binder (`x: T`, `a b: T`) nor a nested `[…]` pattern is a type alone, an anonymous binder
        (upstream's `b → e`: `Cn [mem: %mem.M 0, I32]`, `con f [mem: %mem.M 0, I32]`). A bare
        name is a type there too, as upstream parses it. A nested `[…]` followed by `→` is the
        domain of a function type: `[…, [Nat, Nat] → Nat, …]`."""
        if self.name_run_before_colon():
            return self.parse_pattern_elem()
        start = self.pos
        if self.at("["):
            nested = self.parse_pattern()
            if not self.at("→"):
                return [nested]
            self.pos = start  # a function type whose domain is a sigma: parse it as a type
        first = self.peek()
        return [ast.PVar(self.loc(first), "_", self.parse_arrow())]

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
