"""Host-side shapes of upstream's programs (issue 10, item 7), used by `strategies._HostGen`.

Coverage features (`GeneratedProgram.features_used`):

    main.fun / main.con  `fun extern main (m0, argc, argv): [M0, I32]`, or upstream's
                         `con extern main (m0, argc, argv, return: Cn [M0, I32])`
    kernel.curried       `con kernel (n: I32) (m1, …, return)` launched as `kernel v`
    kernel.curried_twice a second launch of one specialised with argc, specialised with a literal:
                         two kernels of one name (gpu.split_apply names them apart)
    c.atoi               `ccon atoi` on a program argument (`argv[j]`, numeric)
    argv.idx_unsafe      atoi's argument as `mem.lea (argv, core.idx_unsafe k)` on the vector's own
                         type `«⊤:Nat; Ptr0 «⊤:Nat; I8»»`: k a literal, or computed (argc - 1)
    c.printf             `cfun printf [M0, Ptr0 «⊤:Nat; I8», I32]: [M0, I32]` with a format
                         string stored in a slot; what it prints and returns is compared
    stream.indexed       a manual stream's handle in cell c of a two-handle array, initialised,
                         loaded and synced through index terms that are c for every argc ≥ 1
                         but differ as terms (`(argc >> 31) ^ c`, `(argc - argc) + c`, `c`)
    host.generic         `fun box {T: *} (bm, bv: T): [M0, Ptr0 T]` (a `mem.malloc` of
                         `core.trait.size T`, or of size + `core.trait.align T`, or a
                         `mem.alloc (T, 0)`, a store), called at two
                         integer types: a polymorphic function that lam_spec specialises
    host.loop            a host loop `con hloop (m0, i: I32[, acc: I32])` counting from 0 to a
                         literal (up to 20, or past the host model's bound of 256 entries for a
                         loop its path fixes: `host.loop_past_bound`), before the launches or
                         after them
    host.loop_argc       counting to argc + a literal instead (cut by the host model at 16 entries)
    host.loop_slot       its accumulator kept in a host `mem.slot` instead of a parameter
    host.loop_exit_cont  its exit a top-level continuation taking the accumulator, not one
                         nested in the loop that reads the loop's parameter
    host.loop_putchar    a C call in every iteration (`putchar`, what it prints compared)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import strategies as st

from verimim.ir.defs import Def, MutLam
from verimim.smt.kernel_eval import CONCRETE_LOOP_BOUND

# printf formats the interpreter models (verimim.plug.c_format); each takes one int
PRINTF_FORMATS = ("%d\n", "v=%u;", "[%5d]\n", "%x\n", "%-3d|%%\n")


def argv_type(b: Any) -> Def:
    w = b.w
    nat = w.nat()
    return b.ptr(w.arr(w.top(nat), b.ptr(w.arr(w.top(nat), b.I8), 0)), 0)


def main(b: Any, draw: Callable[..., Any], con_form: bool) -> tuple[MutLam, Def, Def, Def, Def]:
    """The host's `main`: (the mutable, m0, argc, argv, return)."""
    w = b.w
    argv_t = argv_type(b)
    res_t = w.cn(w.sigma([b.M0, b.I32]))
    if con_form and draw(st.booleans(), label="con-form main"):
        m = w.mut_lam(w.cn(w.sigma([b.M0, b.I32, argv_t, res_t])), "main", "con")
        m.param_names = ("m0", "argc", "argv", "return")
        v = w.var(m)
        m0, argc, argv, ret = (b.x(v, 4, i) for i in range(4))
        b.features["main.con"] += 1
    else:
        m = w.mut_lam(w.cn(w.sigma([w.sigma([b.M0, b.I32, argv_t]), res_t])), "main", "fun")
        m.param_names = ("m0", "argc", "argv")
        v = w.var(m)
        args = b.x(v, 2, 0)
        m0, argc, argv, ret = b.x(args, 3, 0), b.x(args, 3, 1), b.x(args, 3, 2), b.x(v, 2, 1)
        b.features["main.fun"] += 1
    m.external = True
    w.externals["main"] = m
    return m, m0, argc, argv, ret


def curried_kernel(b: Any, draw: Callable[..., Any], name: str, inner_t: Def) -> tuple[MutLam, int | None, tuple[int, int]]:
    """The outer `lam kernel (n: I32): Cn [...]` of a curried kernel, the value its launches
    pass (a literal, or None for argc) and that value's bounds."""
    w = b.w
    outer = w.mut_lam(w.pi(b.I32, w.shift(inner_t, 1)), name, "lam")
    outer.param_names = ("n",)
    b.features["kernel.curried"] += 1
    if draw(st.booleans(), label="kernel specialised with argc"):
        return outer, None, (1, 8)
    v = draw(st.integers(0, 40), label="kernel specialisation")
    return outer, v, (v, v)


def _declare(b: Any, name: str, t: Def) -> Def:
    w = b.w
    ax = w.axiom("c." + name, t)
    w.c_functions[name] = ax
    return ax


def _cstr_t(b: Any) -> Def:
    w = b.w
    return b.ptr(w.arr(w.top(w.nat()), b.I8), 0)


def puts_call(host: Any, p: Def, t: Def) -> Def:
    """`cfun puts [M0, Ptr0 «⊤:Nat; I8»]: [M0, I32]` on the host buffer p (of type t) viewed as a
    C string. Ends the current block, continues in puts's return continuation; returns puts's
    result."""
    b, w = host.b, host.b.w
    cstr = _cstr_t(b)
    ax = _declare(b, "puts", w.cn(w.sigma([w.sigma([b.M0, cstr]), w.cn(w.sigma([b.M0, b.I32]))])))
    k, (m0, n) = b.con("after_puts", [("m0", b.M0), ("n", b.I32)])
    host.cur.body = w.app(ax, b.tup(b.tup(host.s["m0"], b.bitcast(b.ptr(t, 0), cstr, p)), k))
    host.cur, host.s["m0"] = k, m0
    b.features["c.cfun"] += 1
    b.features["c.puts"] += 1
    return n


def atoi_call(host: Any, n_args: int) -> Def:
    """`ccon atoi [M0, Ptr0 «⊤:Nat; I8», Cn [M0, I32]]` on `argv[j]` (1 ≤ j ≤ n_args): the
    argument vector is viewed as `Ptr0 «n_args + 1; Ptr0 «⊤:Nat; I8»»`. Ends the current block,
    continues in atoi's return continuation; returns the parsed value."""
    b, w, draw = host.b, host.b.w, host.draw
    cstr = _cstr_t(b)
    ax = _declare(b, "atoi", w.cn(w.sigma([b.M0, cstr, w.cn(w.sigma([b.M0, b.I32]))])))
    if host.f["argv_unsafe"] and draw(st.booleans(), label="atoi argument by core.idx_unsafe"):
        entry = _argv_entry(host, cstr, n_args)
    else:
        n = n_args + 1
        vec = b.bitcast(argv_type(b), b.ptr(b.arr(n, cstr), 0), host.argv)
        j = draw(st.integers(1, n_args), label="atoi argument")
        entry = b.lea(n, cstr, 0, vec, w.lit_idx(n, j))
    host.s["m0"], s = b.load(cstr, 0, host.s["m0"], entry)
    k, (m0, v) = b.con("after_atoi", [("m0", b.M0), ("v", b.I32)])
    host.cur.body = w.app(ax, b.tup(host.s["m0"], s, k))
    host.cur, host.s["m0"] = k, m0
    b.features["c.ccon"] += 1
    b.features["c.atoi"] += 1
    return v


def _argv_entry(host: Any, cstr: Def, n_args: int) -> Def:
    """`mem.lea (argv, core.idx_unsafe k)` on the vector as main takes it (`«⊤:Nat; …»`), as
    upstream's programs index it: k a literal j (1 ≤ j ≤ n_args: it folds to the literal `j_⊤`),
    or computed at run time, argc - 1 (the last argument, a string for every argc ≥ 1), so that
    `core.idx_unsafe` stays an operation."""
    b, w = host.b, host.b.w
    top = w.top(w.nat())
    if host.draw(st.booleans(), label="argv index computed"):
        k = b.bitcast(b.I32, w.nat(), b.wrap("sub", 32, 0, host.argc, w.lit_idx(2**32, 1)))
        index = b.ap("core.idx_unsafe", k)
    else:  # not counted as the operation: the World holds the literal it folds to
        index = w.apps(b.a["core.idx_unsafe"], w.lit_nat(host.draw(st.integers(1, n_args), label="atoi argument")))
    b.features["argv.idx_unsafe"] += 1
    return b.ap("mem.lea", b.tup(top, w.pack(top, cstr), w.lit_nat(0)), b.tup(host.argv, index))


def printf_call(host: Any, value: Def) -> Def:
    """`cfun printf [M0, Ptr0 «⊤:Nat; I8», I32]: [M0, I32]` printing `value` with a format
    drawn from PRINTF_FORMATS, stored NUL-terminated in a host slot. Returns printf's result
    (the number of bytes printed)."""
    b, w, draw = host.b, host.b.w, host.draw
    cstr = _cstr_t(b)
    ret_t = w.sigma([b.M0, b.I32])
    ax = _declare(b, "printf", w.cn(w.sigma([w.sigma([b.M0, cstr, b.I32]), w.cn(ret_t)])))
    fmt = draw(st.sampled_from(PRINTF_FORMATS), label="printf format").encode() + b"\0"
    t = b.arr(len(fmt), b.I8)
    host.s["m0"], p = b.slot(t, 0, host.s["m0"], 0)
    host.s["m0"] = b.store(t, 0, host.s["m0"], p, w.tuple([w.lit_idx(2 ** 8, c) for c in fmt]))
    k, (m0, n) = b.con("after_printf", [("m0", b.M0), ("n", b.I32)])
    host.cur.body = w.app(ax, b.tup(b.tup(host.s["m0"], b.bitcast(b.ptr(t, 0), cstr, p), value), k))
    host.cur, host.s["m0"] = k, m0
    b.features["c.cfun"] += 1
    b.features["c.printf"] += 1
    return n


def recursive_call(host: Any, value: Def) -> Def:
    """A genuinely recursive host `fun depth (m0: M0, n: I32): [M0, I32]` called with a literal
    n: each level keeps `n·c + k` in its own `mem.slot` across the (non-tail) recursive
    call and adds it to the call's result once it returns; n = 0 returns a literal. A slot
    lives until its function returns (one block per activation: the interpreter's activations
    end it at the jump to its return continuation, never earlier). Ends the current block, continues in
    the call's return continuation; returns `value` plus the call's result. (`depth` captures
    nothing: a top-level function, as upstream's are.)"""
    b, w, draw = host.b, host.b.w, host.draw
    I32, M0 = b.I32, b.M0

    def lit(v: int) -> Def:
        return w.lit_idx(2 ** 32, v)

    ret_t = w.cn(w.sigma([M0, I32]))
    f = w.mut_lam(w.cn(w.sigma([w.sigma([M0, I32]), ret_t])), "depth", "fun")
    f.param_names = ("dm", "dn")  # not main's `m0`: printed first, it would rename that
    v = w.var(f)
    args, ret = b.x(v, 2, 0), b.x(v, 2, 1)
    m0, n = b.x(args, 2, 0), b.x(args, 2, 1)
    c, k = draw(st.integers(1, 9), label="depth factor"), draw(st.integers(0, 9), label="depth offset")
    m0, keep = b.slot(I32, 0, m0, 0)
    m0 = b.store(I32, 0, m0, keep, b.wrap("add", 32, 0, b.wrap("mul", 32, 0, n, lit(c)), lit(k)))
    base, (bm0,) = b.con("depth_base", [("dm", M0)])
    deeper, (dm0,) = b.con("depth_recurse", [("dm", M0)])
    after, (am0, r) = b.con("depth_after", [("dm", M0), ("r", I32)])
    f.body = b.branch(b.icmp("e", 32, n, lit(0)), deeper, base, m0)
    base.body = w.app(ret, b.tup(bm0, lit(draw(st.integers(0, 99), label="depth base"))))
    deeper.body = w.app(f, b.tup(b.tup(dm0, b.wrap("sub", 32, 0, n, lit(1))), after))
    am0, kept = b.load(I32, 0, am0, keep)
    after.body = w.app(ret, b.tup(am0, b.wrap("add", 32, 0, r, kept)))

    # a literal depth: with argc in it, the host stream model (which explores main's paths with
    # argc symbolic) took every depth up to its loop bound, doubling the kernel stage's time
    n0 = lit(draw(st.integers(1, 6), label="depth"))
    k_main, (m0, res) = b.con("after_depth", [("m0", M0), ("r", I32)])
    host.cur.body = w.app(f, b.tup(b.tup(host.s["m0"], n0), k_main))
    host.cur, host.s["m0"] = k_main, m0
    b.features["fun.recursive"] += 1
    return b.wrap("add", 32, 0, value, res)


@dataclass(frozen=True)
class StreamCell:
    """Where a manual stream's handle is kept: the block (of type t) to free, and the pointers
    `stream_init` writes through, the launch's load reads through and (None: the launch's
    handle) the sync's load reads through."""

    t: Def
    block: Def
    init_at: Def
    load_at: Def
    sync_at: Def | None


def stream_cell(host: Any) -> StreamCell:
    """A slot of its own half the time; else (`stream.indexed`) cell c of «2; gpu.Stream», each
    access through an index term of its own that is c for every argc ≥ 1. The verifier's host
    model must see one stream there: only Z3 with main's argc ≥ 1, not the terms, says so (two
    false E-RACEs came from such programs)."""
    b, draw = host.b, host.draw
    if not host.f["indexed_streams"] or not draw(st.booleans(), label="indexed stream"):
        host.s["m0"], sp = b.alloc(b.stream_t, 0, host.s["m0"])
        return StreamCell(b.stream_t, sp, sp, sp, None)
    b.features["stream.indexed"] += 1
    t = b.arr(2, b.stream_t)
    host.s["m0"], sa = b.alloc(t, 0, host.s["m0"])
    c = draw(st.integers(0, 1), label="stream cell")

    def at() -> Def:
        return b.lea(2, b.stream_t, 0, sa, _index_equal_to(host, c))

    return StreamCell(t, sa, at(), at(), at())


def _index_equal_to(host: Any, c: int) -> Def:
    """An index of «2; T» that is c for every argc ≥ 1, as a term of the generator's choice."""
    b, w = host.b, host.b.w
    kind = host.draw(st.sampled_from(["literal", "sign", "difference"]), label="stream index")
    if kind == "literal":
        return w.lit_idx(2, c)
    lit = w.lit_idx(2 ** 32, c)
    if kind == "sign":  # argc >> 31 is 0: argc ≥ 1
        v = b.ap("core.bit2.xor_", w.lit_nat(2 ** 32), w.lit_nat(0),
                 b.tup(b.ap("core.shr.l", w.lit_nat(2 ** 32), b.tup(host.argc, w.lit_idx(2 ** 32, 31))), lit))
    else:
        v = b.wrap("add", 32, 0, b.wrap("sub", 32, 0, host.argc, host.argc), lit)
    return b.bitcast(b.I32, w.idx_n(2), v)


GENERIC_WIDTHS = (8, 16, 32, 64)


def generic_box(host: Any, value: Def) -> Def:
    """`fun box {T: *} (bm: mem.M 0, bv: T): [mem.M 0, mem.Ptr0 T]`: a fresh heap cell of type T
    holding bv (a malloc of `core.trait.size T` or of size + `core.trait.align T`, which stay
    operations until lam_spec gives T, or an alloc), called at two integer types drawn apart
    (`box @I16 ((m0, v), k)`); both cells are read back, freed, and their sum (truncated to
    I32) is the new value."""
    b, w, draw = host.b, host.b.w, host.draw
    star = w.star()
    t = w.param(star, "T")
    codom = w.cn(w.sigma([w.sigma([b.M0, t]), w.cn(w.sigma([b.M0, b.ptr(t, 0)]))]))
    outer = w.mut_lam(w.pi(star, w.abstract(codom, t), implicit=True, names=("T",)), "box", "lam")
    outer.param_names = ("T",)
    elem = w.var(outer)
    inner = w.mut_lam(w.cn(w.sigma([w.sigma([b.M0, elem]), w.cn(w.sigma([b.M0, b.ptr(elem, 0)]))])), "box", "fun")
    inner.param_names = ("bm", "bv")
    outer.body = inner
    args, ret = b.x(w.var(inner), 2, 0), b.x(w.var(inner), 2, 1)
    # a malloc of core.trait.size T (or of size + alignment, room to align the cell, as
    # allocators ask for), or an alloc: each leaves its type argument `(T, 0)` open
    how = draw(st.sampled_from(["malloc", "malloc padded", "alloc"]), label="box allocation")
    if how == "alloc":
        m0, cell = b.alloc(elem, 0, b.x(args, 2, 0))
    else:
        padded = b.nat("add", b.size_of(elem), b.ap("core.trait.align", elem)) if how == "malloc padded" else None
        m0, cell = b.malloc(elem, 0, b.x(args, 2, 0), padded)
    inner.body = w.app(ret, b.tup(b.store(elem, 0, m0, cell, b.x(args, 2, 1)), cell))

    def call(bits: int) -> Def:
        ty = b.I(bits)
        k, (m0k, cell) = b.con("boxed", [("m0", b.M0), ("p", b.ptr(ty, 0))])
        host.cur.body = w.app(w.app(outer, ty), b.tup(b.tup(host.s["m0"], b.conv(32, bits, value)), k))
        host.cur, host.s["m0"] = k, m0k
        return cell

    widths = [draw(st.sampled_from(GENERIC_WIDTHS), label=f"box type {i}") for i in range(2)]
    cells = [call(bits) for bits in widths]
    total: Def | None = None
    for bits, cell in zip(widths, cells):
        host.s["m0"], x = b.load(b.I(bits), 0, host.s["m0"], cell)
        host.s["m0"] = b.free(b.I(bits), 0, host.s["m0"], cell)
        x32 = b.conv(bits, 32, x)
        total = x32 if total is None else b.wrap("add", 32, 0, total, x32)
        b.features[f"core.I{bits}"] += 1
    b.features["host.generic"] += 1
    assert total is not None
    return total


HOST_LOOP_MAX = 20  # iterations of a host loop (one in sixteen: past the host model's bound)


def host_loop(host: Any, value: Def) -> Def:
    """A counted host loop, as upstream's host programs iterate:

        con hloop (m0: M0, i: I32, acc: I32) = (done, step)#(i <u n) m0
            where con step (m0: M0) = hloop (m0, i + 1, acc · c + i)   (or acc ^ (i + c))
                  con done (m0: M0) = …the rest of main…
            end

    n a literal (0 ≤ n ≤ HOST_LOOP_MAX, or just past the host model's bound for a loop its path
    fixes, CONCRETE_LOOP_BOUND, where the launches after it are not seen), or argc + n (every
    iteration decides on argc: the model cuts it at 16 entries). The accumulator is hloop's
    parameter or lives in a host `mem.slot` (loaded and stored in every iteration); `done` is
    nested in hloop (the rest of main reads the loop's parameter) or jumps to a top-level
    `hloop_exit (m0, acc)`; at times every iteration prints through `putchar` (the output is
    compared on every target). Ends the current block, continues after the loop; returns value
    plus the accumulator."""
    b, w, draw = host.b, host.b.w, host.draw
    I32, M0 = b.I32, b.M0

    def lit(v: int) -> Def:
        return w.lit_idx(2 ** 32, v)

    n = draw(st.integers(0, HOST_LOOP_MAX), label="host loop count")
    kind = draw(st.integers(0, 15), label="host loop past the bound")
    if kind == 0:
        n = CONCRETE_LOOP_BOUND + draw(st.integers(0, 4), label="host loop count past the bound")
    # kind 1: to argc + n, as upstream's loops over the arguments count: every iteration decides
    # on argc (unknown to the host model, which cuts such a loop at 16 entries)
    by_argc = kind == 1
    c = draw(st.integers(1, 9), label="host loop factor")
    init = draw(st.integers(0, 99), label="host loop initial value")
    in_slot = draw(st.booleans(), label="host loop accumulator in a slot")
    exit_cont = draw(st.booleans(), label="host loop exit continuation")
    putchar = host.f["c_calls"] and draw(st.integers(0, 2), label="host loop putchar") == 0
    xor = draw(st.booleans(), label="host loop update by xor")

    m0 = host.s["m0"]
    cell: Def | None = None  # the accumulator's slot, where it is not hloop's parameter
    if in_slot:
        m0, cell = b.slot(I32, 0, m0, 0)
        m0 = b.store(I32, 0, m0, cell, lit(init))
    params = [("m0", M0), ("i", I32)] + ([] if cell is not None else [("acc", I32)])
    loop, lps = b.con("hloop", params)
    lm0, i = lps[0], lps[1]
    step, (sm0,) = b.con("hloop_step", [("m0", M0)])
    done, (dm0,) = b.con("hloop_done", [("m0", M0)])
    count = b.wrap("add", 32, 0, host.argc, lit(n)) if by_argc else lit(n)
    loop.body = b.branch(b.icmp("ul", 32, i, count), done, step, lm0)
    host.cur.body = w.app(loop, b.tup(m0, lit(0)) if cell is not None else b.tup(m0, lit(0), lit(init)))

    if cell is not None:
        sm0, acc = b.load(I32, 0, sm0, cell)
    else:
        acc = lps[2]
    new = (b.ap("core.bit2.xor_", w.lit_nat(2 ** 32), w.lit_nat(0), b.tup(acc, b.wrap("add", 32, 0, i, lit(c))))
           if xor else b.wrap("add", 32, 0, b.wrap("mul", 32, 0, acc, lit(c)), i))
    if cell is not None:
        sm0 = b.store(I32, 0, sm0, cell, new)

    def again(m: Def) -> Def:
        nxt = b.wrap("add", 32, 0, i, lit(1))
        return w.app(loop, b.tup(m, nxt) if cell is not None else b.tup(m, nxt, new))

    if putchar:
        ax = _declare(b, "putchar", w.cn(w.sigma([w.sigma([M0, I32]), w.cn(w.sigma([M0, I32]))])))
        digit = b.wrap("add", 32, 0, b.ap("core.bit2.and_", w.lit_nat(2 ** 32), w.lit_nat(0), b.tup(new, lit(7))), lit(48))
        after, (am0, _) = b.con("hloop_printed", [("m0", M0), ("r", I32)])
        step.body = w.app(ax, b.tup(b.tup(sm0, digit), after))
        after.body = again(am0)
        b.features["c.cfun"] += 1
        b.features["host.loop_putchar"] += 1
    else:
        step.body = again(sm0)

    if cell is not None:
        dm0, res = b.load(I32, 0, dm0, cell)
    else:
        res = lps[2]
    if exit_cont:
        out, (om0, out_acc) = b.con("hloop_exit", [("m0", M0), ("acc", I32)])
        done.body = w.app(out, b.tup(dm0, res))
        host.cur, host.s["m0"], res = out, om0, out_acc
        b.features["host.loop_exit_cont"] += 1
    else:
        host.cur, host.s["m0"] = done, dm0
    if cell is not None:
        b.features["host.loop_slot"] += 1
    if by_argc:
        b.features["host.loop_argc"] += 1
    if by_argc or n + 1 > CONCRETE_LOOP_BOUND:  # hloop entered n + 1 times on the one path its literal fixes
        b.features["host.loop_past_bound"] += 1
    b.features["host.loop"] += 1
    return b.wrap("add", 32, 0, value, res)
