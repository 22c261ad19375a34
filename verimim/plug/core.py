"""Normalizers of the `core` plugin: constant folding of `core.*` axioms on literals, then the
algebraic identities and reassociation of verimim.plug.core_rules for the other operands.

Each normalizer receives the fully applied axiom (`App`, with `app.args()` its curried
arguments, implicit ones included) and returns the folded node, or None to leave it. Folding
never invents a value for undefined behaviour: an overflow that a wrap mode forbids, a shift by
the width or more, a division by zero and a bitcast of a value that does not fit stay
unfolded, so that the interpreter reports them.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.ir.defs import App, Def, IdxT, Lit, NatT, Pack, Tuple
from verimim.ir.world import World
from verimim.layout import NVPTX64, layout_of
from verimim.plug import core_ops as ops
from verimim.plug import core_rules as rules

MODE_NSW = 1  # core.mode.uS: no signed wrap-around
MODE_NUW = 2  # core.mode.Us: no unsigned wrap-around


def lit_pair(d: Def) -> tuple[int, int] | None:
    """The two literal values of a `«2; T»` argument, if both are literals."""
    if isinstance(d, Tuple) and len(d.ops) == 2 and all(isinstance(x, Lit) for x in d.ops):
        a, b = d.ops
        assert isinstance(a, Lit) and isinstance(b, Lit)
        return a.value, b.value
    if isinstance(d, Pack) and isinstance(d.body, Lit):
        return d.body.value, d.body.value
    return None


def size_of(d: Def) -> int | None:
    """The literal modulus `s` of an `Idx s`, from the implicit argument."""
    return d.value if isinstance(d, Lit) else None


signed = ops.signed


def _nat(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        pair = lit_pair(app.arg)
        return w.lit_nat(ops.nat(name, *pair)) if pair else rules.nat_rules(w, app, name)
    return norm


def _ncmp(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        pair = lit_pair(app.arg)
        if pair:
            return w.lit_bool(bool(ops.ncmp(name, *pair)))
        return rules.compare_rules(w, app, rules.NCMP, name)
    return norm


def _icmp(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, pair_def = app.args()
        s, pair = size_of(s_def), lit_pair(pair_def)
        if s is None or pair is None:
            return rules.compare_rules(w, app, rules.ICMP, name)
        return w.lit_bool(bool(ops.icmp(name, s, *pair)))
    return norm


def _wrap(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, mode_def, pair_def = app.args()
        s, pair = size_of(s_def), lit_pair(pair_def)
        mode_lit = mode_def.value if isinstance(mode_def, Lit) else None
        if s is None or pair is None or mode_lit is None:
            return rules.wrap_rules(w, app, name, s, mode_lit)
        a, b = pair
        if name == "shl" and b >= ops.width(s):
            return None  # a shift by the width or more is poison
        mode = mode_lit
        if mode & MODE_NUW and ops.wrap_unsigned_overflow(name, s, a, b):
            return None
        if mode & MODE_NSW and ops.wrap_signed_overflow(name, s, a, b):
            return None
        return w.lit(w.idx(s_def), ops.wrap(name, s, a, b))
    return norm


def _extrema(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, pair_def = app.args()
        s, pair = size_of(s_def), lit_pair(pair_def)
        if s is None or pair is None:
            return rules.extrema_rules(w, app)
        return w.lit(w.idx(s_def), ops.extrema(name, s, *pair))
    return norm


def _shr(arith: bool) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, pair_def = app.args()
        s, pair = size_of(s_def), lit_pair(pair_def)
        if s is None or pair is None:
            return rules.shr_rules(w, app, s)
        a, b = pair
        if b >= ops.width(s):
            return None
        return w.lit(w.idx(s_def), ops.shr(arith, s, a, b))
    return norm


# bit2 tags in upstream's truth-table order: tag i computes the function whose truth table is i.
BIT2_TAGS = ["f", "nor", "nciff", "nfst", "niff", "nsnd", "xor_", "nand",
              "and_", "nxor", "snd", "iff", "fst", "ciff", "or_", "t"]


def _bit2(table: int) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, _mode, pair_def = app.args()
        s, pair = size_of(s_def), lit_pair(pair_def)
        if s is None or pair is None or s & (s - 1):
            return rules.bit2_rules(w, app, BIT2_TAGS, BIT2_TAGS[table], s)
        a, b = pair
        bits = s.bit_length() - 1
        out = 0
        for k in range(bits):
            x, y = (a >> k) & 1, (b >> k) & 1
            out |= ((table >> (x << 1 | y)) & 1) << k  # truth-table bit for (x, y)
        return w.lit(w.idx(s_def), out)
    return norm


def _bit1(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, _mode, x = app.args()
        s = size_of(s_def)
        if s is None or not isinstance(x, Lit):
            return rules.bit1_rules(w, app, name, s)
        v = {"f": 0, "t": s - 1, "id": x.value, "neg": (s - 1) ^ x.value if not s & (s - 1) else None}[name]
        return None if v is None else w.lit(w.idx(s_def), v)
    return norm


def _int_type_size(t: Def) -> int | None:
    """None for Nat (unbounded), the modulus for a literal Idx; -1 for anything else."""
    if isinstance(t, NatT):
        return None
    if isinstance(t, IdxT) and isinstance(t.size, Lit):
        return t.size.value
    return -1


def norm_bitcast(w: World, app: App) -> Def | None:
    src_t, dst_t, x = app.args()
    if src_t is dst_t:
        return x
    if not isinstance(x, Lit):
        return rules.bitcast_rules(w, app)
    src_n, dst_n = _int_type_size(src_t), _int_type_size(dst_t)
    if src_n == -1 or dst_n == -1:
        return None
    if dst_n is not None and x.value >= dst_n:
        return None  # does not fit: E-OOB at run time
    return w.lit(dst_t, x.value)


def _conv(sign: bool) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        ss_def, ds_def, x = app.args()
        ss, ds = size_of(ss_def), size_of(ds_def)
        if ss is None or ds is None or not isinstance(x, Lit) or ds == 0:
            return rules.conv_rules(w, app, sign, ss, ds)
        return w.lit(w.idx(ds_def), ops.conv(sign, ss, ds, x.value))
    return norm


def _trait(which: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        lay = layout_of(app.arg, NVPTX64)
        if lay is None:
            return None
        return w.lit_nat(lay.size if which == "size" else lay.align)
    return norm


def norm_idx(w: World, app: App) -> Def | None:
    """A literal l below s is `l_s`; above it, upstream's normalize_idx wraps it in mode 0 (and
    makes ⊥ otherwise: left here for the interpreter to report)."""
    s_def, mode, l_def = app.args()
    s = size_of(s_def)
    if s is None or not isinstance(l_def, Lit):
        return None
    if l_def.value < s:
        return w.lit(w.idx(s_def), l_def.value)
    if isinstance(mode, Lit) and mode.value == 0 and s > 0:
        return w.lit(w.idx(s_def), l_def.value % s)
    return None


def norm_idx_unsafe(w: World, app: App) -> Def | None:
    (l_def,) = app.args()
    if not isinstance(l_def, Lit):
        return None
    return w.lit(w.idx(w.top(w.nat())), l_def.value)


def _div(name: str) -> Callable[[World, App], Def | None]:
    def norm(w: World, app: App) -> Def | None:
        s_def, arg = app.args()
        s = size_of(s_def)
        if s is None or not isinstance(arg, Tuple) or len(arg.ops) != 2:
            return None
        mem, pair_def = arg.ops
        pair = lit_pair(pair_def)
        if pair is None:
            return rules.div_rules(w, app, name, s)
        if not ops.div_defined(name, s, *pair):
            return None  # division by zero, INT_MIN / -1: undefined, left for the interpreter
        return w.tuple([mem, w.lit(w.idx(s_def), ops.div(name, s, *pair))])
    return norm


def register(world: World) -> None:
    r = world.register_normalizer
    for name in ("add", "sub", "mul"):
        r(f"core.nat.{name}", 1, _nat(name))
    for name in ("e", "ne", "l", "le", "g", "ge"):
        r(f"core.ncmp.{name}", 1, _ncmp(name))
    for name in ("e", "ne", "ul", "ule", "ug", "uge", "sl", "sle", "sg", "sge"):
        r(f"core.icmp.{name}", 2, _icmp(name))
    for name in ("add", "sub", "mul", "shl"):
        r(f"core.wrap.{name}", 3, _wrap(name))
    for name in ("umin", "umax", "smin", "smax"):
        r(f"core.extrema.{name}", 2, _extrema(name))
    r("core.shr.a", 2, _shr(True))
    r("core.shr.l", 2, _shr(False))
    for i, tag in enumerate(BIT2_TAGS):
        r(f"core.bit2.{tag}", 3, _bit2(i))
    for tag in ("f", "neg", "id", "t"):
        r(f"core.bit1.{tag}", 3, _bit1(tag))
    r("core.bitcast", 3, norm_bitcast)
    r("core.conv.s", 3, _conv(True))
    r("core.conv.u", 3, _conv(False))
    r("core.trait.size", 1, _trait("size"))
    r("core.trait.align", 1, _trait("align"))
    r("core.idx", 3, norm_idx)
    r("core.idx_unsafe", 1, norm_idx_unsafe)
    for name in ("sdiv", "udiv", "srem", "urem"):
        r(f"core.div.{name}", 2, _div(name))

