"""C calls in compiled host code: real C functions, called with the C ABI.

A jump to a C-function axiom (`ccon`/`cfun`, verimim.plug.c_lib) becomes a call: the
declaration is matched against the prototype exactly as the interpreter matches it (`c_call`:
unknown functions are `E-UNSUPPORTED`, misfits `E-TYPE`, at the declaration), memory tokens are
dropped, integers are widened to C's parameter types (and variadic ones promoted to `int`) as
the interpreter widens them, the result is truncated to the declared width, and the call's
continuation is compiled with it.

libc's functions (`atoi`, `printf`, …) are declared by their own names and resolved in the
running process when the module is JIT-compiled (verimim.runtime.hostrt). Upstream's `lit/lib.c`
helpers are defined here, in the module's own LLVM IR, on top of libc's `printf`, `malloc` and
`gettimeofday`: nothing needs a C compiler at run time.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verimim.diagnostics import Loc
from verimim.ir.defs import Axiom, Def
from verimim.plug.c_lib import CInt, CProto, CType, c_call

# libc functions the module may call besides the prototypes' own: resolved in the process
LIBC_SYMBOLS = ("atoi", "strlen", "puts", "putchar", "printf", "malloc", "free", "gettimeofday")


class CFunctions:
    """The C functions of one host module: libc's declared, lib.c's defined (once each)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.ir = ctx.ir
        self._strings: dict[bytes, Any] = {}
        self._helpers: dict[str, Any] = {}

    def lltype(self, t: CType | None) -> Any:
        if t is None:
            return self.ir.VoidType()
        if isinstance(t, CInt):
            return self.ir.IntType(t.bits)
        return self.ctx.ptr

    def function(self, proto: CProto) -> Any:
        if proto.lib == "libc":
            return self.libc(proto.name, self.lltype(proto.ret), [self.lltype(p) for p in proto.params],
                             proto.variadic)
        fn = self._helpers.get(proto.name)
        if fn is None:
            fn = self._define(proto)
        return fn

    def libc(self, name: str, ret: Any, params: list[Any], variadic: bool = False) -> Any:
        fns = self.ctx._fns
        fn = fns.get(name)
        if fn is None:
            fn = fns[name] = self.ir.Function(self.ctx.module, self.ir.FunctionType(ret, params, var_arg=variadic), name)
        return fn

    def string(self, text: bytes) -> Any:
        """A private constant NUL-terminated string."""
        g = self._strings.get(text)
        if g is None:
            ir = self.ir
            data = bytearray(text + b"\0")
            t = ir.ArrayType(self.ctx.i8, len(data))
            g = ir.GlobalVariable(self.ctx.module, t, f"verimim.cstr.{len(self._strings)}")
            g.initializer = ir.Constant(t, data)
            g.global_constant = True
            g.linkage = "private"
            self._strings[text] = g
        return g

    # ------------------------------------------------------------------ lib.c

    def printf(self, b: Any, fmt: bytes, *args: Any) -> None:
        pf = self.libc("printf", self.ctx.i32, [self.ctx.ptr], True)
        b.call(pf, [self.string(fmt), *args])

    def _define(self, proto: CProto) -> Any:
        ir, ctx = self.ir, self.ctx
        fn = ir.Function(ctx.module, ir.FunctionType(self.lltype(proto.ret), [self.lltype(p) for p in proto.params]),
                         f"verimim_c_{proto.name}")
        fn.linkage = "internal"
        self._helpers[proto.name] = fn
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        body = _LIB_C[proto.name]
        body(self, b, list(fn.args))
        return fn

    def loop(self, b: Any, n: Any, each: Callable[[Any, Any], None]) -> Any:
        """`for (int i = 0; i < n; i++) each(i)`; returns the builder after the loop."""
        ir, i32 = self.ir, self.ctx.i32
        fn = b.function
        head, body, done = (fn.append_basic_block(x) for x in ("loop", "body", "done"))
        start = b.block
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(i32)
        i.add_incoming(ir.Constant(i32, 0), start)
        b.cbranch(b.icmp_signed("<", i, n), body, done)
        b.position_at_end(body)
        each(b, i)
        i.add_incoming(b.add(i, ir.Constant(i32, 1)), b.block)
        b.branch(head)
        b.position_at_end(done)
        return b


def _print(fmt: bytes, widen: bool = False) -> Callable[[CFunctions, Any, list[Any]], None]:
    def body(cf: CFunctions, b: Any, args: list[Any]) -> None:
        vals = [b.sext(a, cf.ctx.i32) if widen else a for a in args]  # char → int (C's promotion)
        cf.printf(b, fmt, *vals)
        b.ret_void()
    return body


def _print_int_vector(cf: CFunctions, b: Any, args: list[Any]) -> None:
    n, v = args
    i32 = cf.ctx.i32

    def each(b: Any, i: Any) -> None:
        x = b.load(b.gep(v, [b.sext(i, cf.ctx.i64)], source_etype=i32), typ=i32)
        cf.printf(b, b"%d, ", x)
    cf.loop(b, n, each)
    cf.printf(b, b"\n")
    b.ret_void()


def _print_int_matrix(cf: CFunctions, b: Any, args: list[Any]) -> None:
    n, m, v = args
    vec = cf.function(_proto("print_int_vector"))

    def each(b: Any, i: Any) -> None:
        row = b.gep(v, [b.sext(b.mul(i, m), cf.ctx.i64)], source_etype=cf.ctx.i32)
        b.call(vec, [m, row])
    cf.loop(b, n, each)
    b.ret_void()


def _time(cf: CFunctions, b: Any, args: list[Any]) -> None:
    ctx = cf.ctx
    p = b.call(cf.libc("malloc", ctx.ptr, [ctx.i64]), [cf.ir.Constant(ctx.i64, 16)])  # struct timeval
    b.call(cf.libc("gettimeofday", ctx.i32, [ctx.ptr, ctx.ptr]), [p, cf.ir.Constant(ctx.ptr, None)])
    b.ret(p)


def _print_time_diff(cf: CFunctions, b: Any, args: list[Any]) -> None:
    ir, ctx = cf.ir, cf.ctx
    f64 = ir.DoubleType()

    def field(p: Any, k: int) -> Any:
        return b.load(b.gep(p, [ir.Constant(ctx.i64, k)], source_etype=ctx.i64), typ=ctx.i64)
    t1, t2 = args
    secs = b.sitofp(b.sub(field(t2, 0), field(t1, 0)), f64)
    usecs = b.sitofp(b.sub(field(t2, 1), field(t1, 1)), f64)
    d = b.fadd(secs, b.fmul(ir.Constant(f64, 1e-6), usecs))
    d = b.fpext(b.fptrunc(d, ir.FloatType()), f64)  # lib.c's tdiff returns a float
    cf.printf(b, b"real\t%0.6f \n", d)
    b.ret_void()


def _proto(name: str) -> CProto:
    from verimim.plug.c_lib import PROTOS

    return PROTOS[name]


_LIB_C: dict[str, Callable[[CFunctions, Any, list[Any]], None]] = {
    "print_char": _print(b"%c", widen=True),
    "println_char": _print(b"%c\n", widen=True),
    "print_str": _print(b"%s"),
    "println_str": _print(b"%s\n"),
    "print_i32": _print(b"%d"),
    "println_i32": _print(b"%d\n"),
    "newline": _print(b"\n"),
    "print_integer": _print(b"%d, "),
    "print_int_newline": _print(b"%d\n"),
    "print_newline": _print(b"\n"),
    "print_int_vector": _print_int_vector,
    "print_int_matrix": _print_int_matrix,
    "time": _time,
    "print_time_diff": _print_time_diff,
}


# ----------------------------------------------------------------------------- the call


def emit_call(comp: Any, ax: Axiom, arg: Def, loc: Loc | None) -> None:
    """Compile the jump `ax arg` of host compiler `comp` (verimim.runtime.host) as a C call and
    continue at its continuation."""
    decl = c_call(ax, loc)
    cfs: CFunctions = comp.c_functions
    ctx, ir = comp.hctx, comp.ir
    comp._compute(arg)
    av = comp._val(arg)
    if decl.arg_types:
        *parts, k = av
    else:
        parts, k = [], av
    leaves: list[Any] = []
    for t, v in zip(decl.arg_types, parts):
        ctx.flatten(t, v, leaves, loc)
    b = comp.builder
    args: list[Any] = []
    for j, (leaf, v) in enumerate(zip(decl.arg_leaves, leaves)):
        if leaf.kind == "int":
            v = comp.fit_int(v, leaf.bits)  # (an `Idx ⊤:Nat` value passed for an I32: cut)
        want = decl.proto.params[j] if j < len(decl.proto.params) else None
        if want is None and leaf.kind == "int" and leaf.bits < 32:
            want = CInt(32, True)  # a variadic argument: C's default promotion to int
        if isinstance(want, CInt) and leaf.bits < want.bits:
            ty = ir.IntType(want.bits)
            v = b.sext(v, ty) if leaf.bits >= 8 else b.zext(v, ty)  # as c_lib.widen
        args.append(v)
    r = b.call(cfs.function(decl.proto), args)
    result: list[Any] = []
    if decl.ret_leaf is not None:
        if decl.ret_leaf.kind == "int" and decl.ret_leaf.bits < r.type.width:
            r = b.trunc(r, ir.IntType(decl.ret_leaf.bits))
        result.append(r)
    value = ctx.build(decl.ret_type, iter(result))
    comp._goto(k, value, loc)
