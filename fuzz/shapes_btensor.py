"""btensor programs (issue 13, item 6), used by `strategies._generate`: host programs whose work
is one or two `btensor.map_reduce` / `map_reduce_post` operations over `buffer.Buf`s, which
`gpu.lower_btensor_map_reduce` turns into kernel launches (the phase runs only in a program that
opens no GPU session itself, so these programs have no kernel of their own).

Coverage features (`GeneratedProgram.features_used`, besides the operations):

    btensor.sum      Ro = 0: one output cell, a 1-D reduction (Sr = n)
    btensor.rows     Ro = 1, Rn = 2: row sums of a 2-D buffer (subs = (0, 1))
    btensor.columns  Ro = 1, Rn = 2, the input read transposed (subs = (1, 0))
    btensor.post     map_reduce_post with an epilogue reading a second buffer at the output cell
    btensor.comb.*   the combiner: `add`, `horner` (acc·k + x: the fold order is observable),
                     `xor` (core.bit2)

Inputs are `buffer.init` (values from argc) or `buffer.lit`, one cell sometimes written with
`buffer.write`;
results are read with `buffer.read`, sometimes after a `buffer.copy`, and `buffer.shape` adds
an extent. Buffers cannot be freed (the buffer plugin has no free): the programs leak (W-LEAK).
"""
from __future__ import annotations

from math import prod
from typing import Any, Callable

from hypothesis import strategies as st

from verimim.ir.defs import Def, MutLam

HEADER = ["plugin core;", "plugin mem;", "plugin buffer;", "plugin btensor;", "plugin gpu;"]
COMBINERS = ("add", "horner", "xor")


def combiner(b: Any, draw: Callable[..., Any], name: str) -> tuple[MutLam, str]:
    """A closed `fun name (m: mem.M 0, acc: I32, x: I32): [mem.M 0, I32]` (also the epilogue's
    shape, with a second buffer's element for x)."""
    w = b.w
    kind = draw(st.sampled_from(COMBINERS), label="combiner")
    m = w.mut_lam(w.cn(w.sigma([w.sigma([b.M0, b.I32, b.I32]), w.cn(w.sigma([b.M0, b.I32]))])), name, "fun")
    m.param_names = ("m", "acc", "x")
    v = w.var(m)
    args, ret = b.x(v, 2, 0), b.x(v, 2, 1)
    mm, acc, x = (b.x(args, 3, i) for i in range(3))
    if kind == "add":
        val = b.wrap("add", 32, 0, acc, x)
    elif kind == "horner":
        k = w.lit_idx(2 ** 32, draw(st.integers(2, 10), label="horner base"))
        val = b.wrap("add", 32, 0, b.wrap("mul", 32, 0, acc, k), x)
    else:
        val = b.ap("core.bit2.xor_", w.lit_nat(2 ** 32), w.lit_nat(0), b.tup(acc, x))
    m.body = w.app(ret, b.tup(mm, val))
    b.features[f"btensor.comb.{kind}"] += 1
    return m, kind


class BtensorHost:
    """Builds main's straight-line body: buffers, map-reduce operations, reads into a result."""

    def __init__(self, b: Any, draw: Callable[..., Any], m0: Def, argc: Def) -> None:
        self.b, self.draw, self.m0, self.argc = b, draw, m0, argc
        self.result = argc
        self.n_funs = 0

    # ------------------------------------------------------------------ buffers

    def rst(self, shape: tuple[int, ...]) -> Def:
        """`(r, s, T)` of an I32 buffer (a rank-1 shape is a Nat, rank 0 the unit)."""
        w = self.b.w
        return self.b.tup(w.lit_nat(len(shape)), self.shape(shape), self.b.I32)

    def shape(self, shape: tuple[int, ...]) -> Def:
        w = self.b.w
        return w.lit_nat(shape[0]) if len(shape) == 1 else w.tuple([w.lit_nat(n) for n in shape])

    def index(self, shape: tuple[int, ...], cell: tuple[int, ...]) -> Def:
        w = self.b.w
        if not shape:
            return w.tuple([])
        parts = [w.lit_idx(n, c) for n, c in zip(shape, cell)]
        return parts[0] if len(parts) == 1 else w.tuple(parts)

    def cell(self, shape: tuple[int, ...], label: str) -> tuple[int, ...]:
        return tuple(self.draw(st.integers(0, n - 1), label=label) for n in shape)

    def input(self, shape: tuple[int, ...]) -> Def:
        """A buffer of that shape: `buffer.init` with values from argc, or `buffer.lit`; then
        perhaps one cell written with `buffer.write`."""
        b, w, draw = self.b, self.b.w, self.draw
        if draw(st.integers(0, 3), label="buffer.lit") == 0:
            fill = b.wrap("add", 32, 0, self.argc, w.lit_idx(2 ** 32, draw(st.integers(0, 9), label="fill")))
            r = b.ap("buffer.lit", self.rst(shape), b.tup(self.m0, fill))
        else:
            k = draw(st.integers(0, 9), label="init offset")
            flat = [b.wrap("add", 32, 0, w.lit_idx(2 ** 32, j + k), self.argc) for j in range(prod(shape))]
            r = b.ap("buffer.init", self.rst(shape), b.tup(self.m0, _nest(w, shape, flat)))
        self.m0, buf = b.x(r, 2, 0), b.x(r, 2, 1)
        if draw(st.booleans(), label="buffer.write"):
            val = b.wrap("mul", 32, 0, self.argc, w.lit_idx(2 ** 32, draw(st.integers(2, 100), label="written")))
            r = b.ap("buffer.write", self.rst(shape), b.tup(self.m0, buf, self.index(shape, self.cell(shape, "write")), val))
            self.m0, buf = b.x(r, 2, 0), b.x(r, 2, 1)
        return buf

    def read_into_result(self, buf: Def, shape: tuple[int, ...]) -> None:
        """One cell of buf (perhaps of a `buffer.copy` of it) added to the result; perhaps also
        an extent from `buffer.shape`."""
        b, w, draw = self.b, self.b.w, self.draw
        if draw(st.integers(0, 2), label="buffer.copy") == 0:
            r = b.ap("buffer.alloc", self.rst(shape), self.m0)
            self.m0, dst = b.x(r, 2, 0), b.x(r, 2, 1)
            self.m0 = b.ap("buffer.copy", self.rst(shape), b.tup(self.m0, dst, buf))
            buf = dst
        for _ in range(draw(st.integers(1, 2), label="reads")):
            r = b.ap("buffer.read", self.rst(shape), b.tup(self.m0, buf, self.index(shape, self.cell(shape, "read"))))
            self.m0 = b.x(r, 2, 0)
            self.result = b.wrap("add", 32, 0, self.result, b.x(r, 2, 1))
        if shape and draw(st.integers(0, 3), label="buffer.shape") == 0:
            dim = draw(st.integers(0, len(shape) - 1), label="shape dimension")
            ext = b.ap("buffer.shape", self.rst(shape), b.tup(buf, w.lit_idx(len(shape), dim)))
            self.result = b.wrap("add", 32, 0, self.result, b.bitcast(w.nat(), b.I32, ext))

    # ------------------------------------------------------------------ operations

    def fun(self) -> Def:
        self.n_funs += 1
        return combiner(self.b, self.draw, f"comb{self.n_funs}")[0]

    def operation(self) -> None:
        b, w, draw = self.b, self.b.w, self.draw
        kind = draw(st.sampled_from(["sum", "rows", "columns", "post"]), label="map-reduce")
        b.features[f"btensor.{kind}"] += 1
        init = w.lit_idx(2 ** 32, draw(st.integers(0, 5), label="init"))
        if kind == "sum":
            n = draw(st.integers(1, 8), label="extent")
            inp = self.input((n,))
            out = b.ap("btensor.map_reduce", w.lit_nat(1), b.tup(b.I32, w.lit_nat(0), w.lit_nat(1)),
                       b.tup(w.tuple([]), w.lit_nat(n)), b.tup(b.I32, w.lit_nat(1), w.lit_nat(n)),
                       b.tup(self.fun(), init), w.lit_nat(0), b.tup(self.m0, inp))
            self.m0 = b.x(out, 2, 0)
            self.read_into_result(b.x(out, 2, 1), ())
            return
        rows = draw(st.integers(1, 4), label="rows")
        cols = draw(st.integers(1, 5), label="columns")
        inp = self.input((rows, cols))
        # rows: out[r] = fold over c of a[r][c] (Sr = (R, C)); columns: out[c] over r (Sr = (C, R))
        o, k = (rows, cols) if kind != "columns" else (cols, rows)
        subs = b.tup(w.lit_nat(0), w.lit_nat(1)) if kind != "columns" else b.tup(w.lit_nat(1), w.lit_nat(0))
        sr = b.tup(w.lit_nat(o), w.lit_nat(k))
        sis = b.tup(w.lit_nat(rows), w.lit_nat(cols))
        if kind != "post":
            out = b.ap("btensor.map_reduce", w.lit_nat(1), b.tup(b.I32, w.lit_nat(1), w.lit_nat(2)),
                       b.tup(w.lit_nat(o), sr), b.tup(b.I32, w.lit_nat(2), sis),
                       b.tup(self.fun(), init), subs, b.tup(self.m0, inp))
        else:
            bias = self.input((o,))
            out = b.ap("btensor.map_reduce_post", b.tup(w.lit_nat(1), w.lit_nat(1)),
                       b.tup(b.I32, b.I32, w.lit_nat(1), w.lit_nat(2)), b.tup(w.lit_nat(o), sr),
                       b.tup(b.I32, w.lit_nat(2), sis, b.I32, w.lit_nat(1), w.lit_nat(o)),
                       b.tup(self.fun(), init, self.fun()), b.tup(subs, w.lit_nat(0)),
                       b.tup(self.m0, inp, bias))
        self.m0 = b.x(out, 2, 0)
        self.read_into_result(b.x(out, 2, 1), (o,))


def build(b: Any, draw: Callable[..., Any], main: Callable[..., Any], con_form: bool) -> None:
    """main with one or two map-reduce operations, returning argc plus what it read."""
    m, m0, argc, _argv, ret = main(b, draw, con_form)
    host = BtensorHost(b, draw, m0, argc)
    for _ in range(draw(st.integers(1, 2), label="map-reduce operations")):
        host.operation()
    m.body = b.w.app(ret, b.tup(host.m0, host.result))


def _nest(w: Any, shape: tuple[int, ...], flat: list[Def]) -> Def:
    """The row-major array value of that shape holding `flat` (`«1; T»` is T)."""
    if len(shape) == 1:
        return flat[0] if shape[0] == 1 else w.tuple(flat)
    step = prod(shape[1:])
    rows = [_nest(w, shape[1:], flat[i * step:(i + 1) * step]) for i in range(shape[0])]
    return rows[0] if shape[0] == 1 else w.tuple(rows)
