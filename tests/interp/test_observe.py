"""Tests of verimim.interp.observe: the one observation-and-compare of `diff`, the fuzz oracle and
the differential specs."""
from __future__ import annotations

from verimim.frontend.loader import load_text
from verimim.interp.observe import Observation, describe, differences, observe

HEADER = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
"""


def program(body: str) -> str:
    return HEADER + body


STORE_7 = program("""    let (m1, p) = mem.malloc (I32, 0) (m0, 4);
    let m2 = mem.store (m1, p, 7I32);
    let m3 = mem.free (m2, p);
    return (m3, 0I32);
""")
STORE_8 = STORE_7.replace("7I32", "8I32")
READ_UNINIT = program("""    let (m1, p) = mem.malloc (I32, 0) (m0, 4);
    let (m2, v) = mem.load (m1, p);
    let m3 = mem.free (m2, p);
    return (m3, v);
""")


def test_a_store_only_the_heap_shows_is_a_difference_of_host_memory() -> None:
    a = observe(load_text(STORE_7)[0], ["prog"])
    b = observe(load_text(STORE_8)[0], ["prog"])
    assert a.result == b.result == ("ok", 0)
    diff = differences(a, b)
    assert diff == ["heap"]
    assert describe(diff) == " with other host memory"


def test_a_fault_is_a_result_with_its_code_and_message() -> None:
    obs = observe(load_text(READ_UNINIT)[0], ["prog"])
    assert obs.result == ("fault", "E-UNINIT") and obs.code == "E-UNINIT" and not obs.ok
    assert obs.message and obs.shown().startswith("E-UNINIT: ")
    assert obs.outcome() == ("fault", "E-UNINIT")


def test_effects_are_traced_only_when_asked_and_loads_do_not_count() -> None:
    w, _ = load_text(READ_UNINIT.replace("let (m2, v) = mem.load (m1, p);",
                                         "let m1b = mem.store (m1, p, 3I32);\n    let (m2, v) = mem.load (m1b, p);"))
    assert observe(w, ["prog"]).effects is None
    traced = dict(observe(w, ["prog"], effects=True).effects or ())
    assert traced == {"mem.malloc": 1, "mem.store": 1, "mem.free": 1}


def test_what_one_side_did_not_observe_never_differs_and_clock_output_is_not_compared() -> None:
    ref = Observation(("ok", 1), b"hello", (b"\x01",), ())
    native = Observation(("ok", 1), b"hello")  # a compiled program: no heap, no warnings observed
    assert differences(ref, native) == []
    assert differences(ref, Observation(("ok", 2), b"hello")) == ["result"]
    assert differences(ref, Observation(("ok", 1), b"bye")) == ["output"]
    clock = Observation(("ok", 1), b"12:00", (b"\x01",), (), nondeterministic="it calls `time`")
    assert differences(clock, Observation(("ok", 1), b"12:01", (b"\x01",), ())) == []
    assert differences(ref, Observation(("ok", 2), b"bye", (b"\x02",), ("W-LEAK",)),
                       ("result", "heap")) == ["result", "heap"]


def _pointer_to(target: str) -> str:
    # cells: two I32 blocks; `cell` holds a pointer to one of them (`target`)
    return program(f"""    let (m0, a) = mem.alloc (I32, 0) m0;
    let (m0, b) = mem.alloc (I32, 0) m0;
    let (m0, cell) = mem.alloc (mem.Ptr0 I32, 0) m0;
    let m0 = mem.store (m0, cell, {target});
    let m0 = mem.free (m0, a);
    let m0 = mem.free (m0, b);
    let m0 = mem.free (m0, cell);
    return (m0, 0I32);
""")


def test_a_stored_pointer_is_compared_by_what_it_points_to() -> None:
    # Each run numbers its blocks anew (the raw bytes of a pointer differ run to run): two runs
    # of one program show the same heap, and pointers to different blocks still differ.
    w, _ = load_text(_pointer_to("a"), "<ptr>")
    one, two = observe(w, ["p"]), observe(w, ["p"])
    assert one.heap == two.heap and differences(one, two) == []
    w_b, _ = load_text(_pointer_to("b"), "<ptr>")
    assert differences(one, observe(w_b, ["p"]), ("heap",)) == ["heap"]


def test_an_integer_with_a_pointers_bits_is_a_number_and_the_shadow_follows_copies() -> None:
    # Only words a pointer was stored into are named (the block's pointer shadow): an I64 whose
    # high bits happen to be a live block's id stayed raw in one run and was renamed in another
    # (a false E-DIFF on `0x10000000005I64` in a heap block). Copies carry the shadow; an
    # overwrite, even of one byte, ends it.
    from verimim.interp.machine import Machine
    from verimim.interp.memory import ADDR_SHIFT, Ptr
    from verimim.interp.observe import _with_pointers_named

    w, _ = load_text(program("    return (m0, 0I32);\n"), "<shadow>")
    m = Machine(w)
    mem = m.memory
    target = mem.alloc(0, 4, "heap", None, "target")
    cell = mem.alloc(0, 16, "heap", None, "cell")
    look_alike = ((target.id << ADDR_SHIFT) | 2).to_bytes(8, "little")
    mem.write_bytes(Ptr(cell, 0), look_alike, None)  # a number
    ptr_t = w.app(w.annexes["mem.Ptr"], w.tuple([w.idx_n(2 ** 32), w.lit_nat(0)]))
    data, marks = mem.encode_marked(ptr_t, Ptr(target, 2), None)
    assert data == look_alike and marks == (0,)
    mem.write_bytes(Ptr(cell, 8), data, None, marks)  # a pointer, with the same bytes
    named = _with_pointers_named(m, cell, {})
    assert named[:8] == look_alike and named[8:] != look_alike
    copy = mem.alloc(0, 16, "heap", None, "copy")
    mem.copy(Ptr(copy, 0), Ptr(cell, 0), 16, None)
    assert copy.pointers == {8}
    mem.write_bytes(Ptr(copy, 12), b"\x00", None)
    assert not copy.pointers


FUNCTION_IN_A_HEAP_BLOCK = """
plugin core;
plugin mem;

fun g (m: mem.M 0, x: I32): [mem.M 0, I32] = return (m, core.wrap.add 0 (x, 1I32));

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m0, q) = mem.malloc (I32, 0) (m0, 4);
    let (m0, p) = mem.malloc (Fn [mem.M 0, I32] → [mem.M 0, I32], 0) (m0, 8);
    let m0 = mem.store (m0, p, g);
    let (m0, h) = mem.load (m0, p);
    ret (m0, r) = h $ (m0, argc);
    let m0 = mem.free (m0, q);
    return (m0, r);
"""


def test_a_function_stored_in_a_heap_block_is_the_same_whatever_blocks_came_before() -> None:
    """A function value is stored as an address into the code block; the heap compared the raw
    word, whose block id depends on how many blocks the run made before (a phase that makes
    another one, or none: `diff` said E-DIFF, "with other host memory", on upstream's clos/malloc)."""
    a = observe(load_text(FUNCTION_IN_A_HEAP_BLOCK)[0], ["prog"])
    later = FUNCTION_IN_A_HEAP_BLOCK.replace("    let (m0, q) = mem.malloc (I32, 0) (m0, 4);\n", "").replace(
        "    let (m0, h) = mem.load", "    let (m0, q) = mem.malloc (I32, 0) (m0, 4);\n    let (m0, h) = mem.load")
    b = observe(load_text(later)[0], ["prog"])
    assert a.result == b.result == ("ok", 2)
    assert differences(a, b) == []


def _address_stored(extra: str) -> str:
    # `h[0]` holds q's address as an I64 (ptrtoint), `h[1]` that address plus one (a number);
    # `extra` makes a block before them that is not a heap block (other block ids, same ranks)
    return program(f"""{extra}    let (m0, q) = mem.alloc (I32, 0) m0;
    let (m0, h) = mem.alloc («2; I64», 0) m0;
    let a = core.bitcast I64 q;
    let m0 = mem.store (m0, mem.lea (h, 0_2), a);
    let m0 = mem.store (m0, mem.lea (h, 1_2), core.wrap.add 0 (a, 1I64));
    let m0 = mem.free (m0, q);
    let m0 = mem.free (m0, h);
    return (m0, 0I32);
""")


def test_a_pointers_address_stored_as_an_integer_is_named_like_a_pointer() -> None:
    # The address is the run's own block id: a phase that makes one more block (here a stack
    # slot) gave the stored address other bits, and `diff` a false E-DIFF "with other host
    # memory" on a valid program (valid/local_slot_address_is_the_same_in_every_work_item.mim;
    # probe). The address stored unchanged is marked like a stored pointer; arithmetic on it
    # gives a number.
    plain = observe(load_text(_address_stored(""), "<addr>")[0], ["p"])
    slot = "    let (m0, s) = mem.slot (I32, 0) (m0, 0);\n    let m0 = mem.store (m0, s, 1I32);\n"
    shifted = observe(load_text(_address_stored(slot), "<addr>")[0], ["p"])
    assert plain.result == shifted.result == ("ok", 0)
    assert plain.heap is not None and shifted.heap is not None
    block = [b for b in plain.heap if len(b) == 16]
    other = [b for b in shifted.heap if len(b) == 16]
    assert block[0][:8] == other[0][:8]  # named: the same in both runs
    assert block[0][8:] != other[0][8:]  # the address plus one: a number, the run's own bits
