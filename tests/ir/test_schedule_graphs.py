"""Random continuation graphs after a host call, an `alloc_copy` and a launch (the shape whose
closures the schedule once made in the wrong activation, so that `gpu.alloc.block` ran twice
and the copy back read an uninitialised buffer): branches on argc, loops on a counter, plain
jumps, continuations declared in their one referrer's `where` that use its parameter, and one
or two continuations that copy the device buffer back. The interpreter must give the result
a direct simulation of the graph gives, at argc 1 to 4."""
from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from verimim.driver import run_with_big_stack
from verimim.frontend.loader import load_text
from verimim.interp.observe import observe

HEAD = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), p: gpu.GlobalPtr «4; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let cell = mem.lea (p, item_id);
    let (m1, v) = mem.load (m1, cell);
    let m1 = mem.store (m1, cell, core.wrap.mul 0 (v, 2I32));
    return (m1, m3, m4, m5);

fun fill (m0: mem.M 0, a: mem.Ptr0 «4; I32»): [mem.M 0, I32] =
    let m0 = mem.store (m0, a, ‹4; 7I32›);
    return (m0, 0I32);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, a) = mem.alloc («4; I32», 0) m0;
    ret (m0, junk) = fill $ (m0, a);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, a);
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    N0 (m0, m1, m4, 0I32)
    where
"""
MEMS = "m0: mem.M 0, m1: gpu.GlobalM, m4: gpu.ConstM"


@dataclass(frozen=True)
class Node:
    kind: str  # "term" (copy back, return a[1] + k), "jump", "branch" (on argc), "loop"
    to: tuple[int, ...] = ()  # jump: (target,); branch: (then, else); loop: (back, exit)
    add: tuple[int, ...] = ()  # what each way adds to k (a loop's back edge: its step)
    bound: int = 0  # branch: then when argc <u bound; loop: back while k <s bound


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    parent: dict[int, int]  # a node declared in its one referrer's `where`
    uses_parent: frozenset[int]  # nested nodes whose exits also add their parent's k


def draw(rng: random.Random) -> Graph:
    n = rng.randint(3, 9)
    terms = rng.randint(1, 2)
    nodes: list[Node] = []
    for i in range(n):
        if i >= n - terms:
            nodes.append(Node("term"))
            continue
        later = range(i + 1, n)
        r = rng.random()
        if r < 0.2:
            nodes.append(Node("loop", (rng.randint(0, i), rng.choice(later)), (rng.randint(1, 5), rng.randint(0, 9)),
                              rng.randint(5, 30)))
        elif r < 0.7:
            nodes.append(Node("branch", (rng.choice(later), rng.choice(later)), (rng.randint(0, 9), rng.randint(0, 9)),
                              rng.randint(1, 4)))
        else:
            nodes.append(Node("jump", (rng.choice(later),), (rng.randint(0, 9),)))
    referrers: dict[int, set[int]] = {j: set() for j in range(n)}
    for i, node in enumerate(nodes):
        for j in node.to:
            referrers[j].add(i)
    parent: dict[int, int] = {}
    for j in range(1, n):
        only = referrers[j] - {j}
        if len(only) == 1 and rng.random() < 0.6:
            (i,) = only
            if nodes[i].kind != "term" and i < j and all(_visible(t, j, parent | {j: i}) for t in nodes[j].to):
                parent[j] = i
    return Graph(tuple(nodes), parent, frozenset(j for j in parent if rng.random() < 0.5))


def _visible(target: int, user: int, parent: dict[int, int]) -> bool:
    """A top-level node is visible everywhere; a nested one in its parent and below it."""
    if target not in parent:
        return True
    x: int | None = user
    while x is not None:
        if x == parent[target]:
            return True
        x = parent.get(x)
    return False


def simulate(g: Graph, argc: int) -> int | None:
    at, k, ks = 0, 0, {}
    for _ in range(10_000):
        ks[at] = k
        node = g.nodes[at]
        bonus = ks[g.parent[at]] if at in g.uses_parent else 0
        if node.kind == "term":
            return 14 + k  # the kernel doubled a[1] = 7
        if node.kind == "jump":
            at, k = node.to[0], k + node.add[0] + bonus
        elif node.kind == "loop":
            at, k = (node.to[0], k + node.add[0]) if k < node.bound else (node.to[1], k + node.add[1] + bonus)
        else:
            way = 0 if argc < node.bound else 1
            at, k = node.to[way], k + node.add[way] + bonus
    return None


@dataclass(frozen=True)
class Flavour:
    """Where the graph runs: main's continuations after the launch, or a kernel's body."""

    head: str
    tail: str
    state: str  # the memory parameters every node takes
    pass_state: str  # and passes on
    subject: str  # what branches compare with their bound
    terminal: tuple[str, ...]  # a terminal's body; {k} is its counter


HOST = Flavour(HEAD, "    end;\n", MEMS, "m0, m1, m4", "argc", (
    "let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, a);",
    "let m1 = gpu.free.block (m1, d);",
    "let m0 = gpu.deinit (m0, m1, m4);",
    "let (m0, x) = mem.load (m0, mem.lea (a, 1_4));",
    "let m0 = mem.free (m0, a);",
    "return (m0, core.wrap.add 0 (x, {k}));"))


def render(g: Graph, f: Flavour = HOST) -> str:
    def plus(i: int, n: int) -> str:
        e = f"core.wrap.add 0 (k{i}, {n}I32)"
        return f"core.wrap.add 0 ({e}, k{g.parent[i]})" if i in g.uses_parent else e

    def jump(to: int, k: str) -> str:
        return f"N{to} ({f.pass_state}, {k})"

    def arm(name: str, to: int, k: str, ind: str) -> str:
        return f"{ind}        con {name} ({f.state}) = {jump(to, k)};"

    def block(i: int, ind: str) -> list[str]:
        node = g.nodes[i]
        head = f"{ind}con N{i} ({f.state}, k{i}: I32) ="
        if node.kind == "term":
            return [head, *(f"{ind}    {line.format(k=f'k{i}')}" for line in f.terminal)]
        arms: list[str] = []
        if node.kind == "jump":
            lines = [f"{head} {jump(node.to[0], plus(i, node.add[0]))}"]
        elif node.kind == "loop":
            lines = [head, f"{ind}    (x{i}, b{i})#(core.icmp.sl (k{i}, {node.bound}I32)) ({f.pass_state})"]
            arms = [arm(f"b{i}", node.to[0], f"core.wrap.add 0 (k{i}, {node.add[0]}I32)", ind),
                    arm(f"x{i}", node.to[1], plus(i, node.add[1]), ind)]
        else:
            lines = [head, f"{ind}    (e{i}, t{i})#(core.icmp.ul ({f.subject}, {node.bound}I32)) ({f.pass_state})"]
            arms = [arm(f"t{i}", node.to[0], plus(i, node.add[0]), ind),
                    arm(f"e{i}", node.to[1], plus(i, node.add[1]), ind)]
        kids = [line for j in sorted(g.parent) if g.parent[j] == i for line in block(j, ind + "        ")]
        if not arms and not kids:
            return [lines[0] + ";"]
        return [*lines, f"{ind}    where", *arms, *kids, f"{ind}    end;"]

    body = [line for i in range(len(g.nodes)) if i not in g.parent for line in block(i, "        ")]
    return f.head + "\n".join(body) + "\n" + f.tail


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 2 ** 32 - 1))
def test_every_continuation_graph_after_a_launch_copies_back_the_one_allocation(seed: int) -> None:
    g = draw(random.Random(seed))
    want = [simulate(g, argc) for argc in range(1, 5)]
    if None in want:
        return  # a loop that never leaves (the generator's bound, not the program's meaning)
    text = render(g)

    def results() -> list[object]:
        world, _ = load_text(text, "<graph>")
        return [observe(world, ["prog", *["x"] * (argc - 1)]).result for argc in range(1, 5)]

    assert run_with_big_stack(results) == [("ok", w) for w in want], text



KERNEL = Flavour("""plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), p: gpu.GlobalPtr «4; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let iv = core.bitcast I32 item_id;
    N0 (m1, 0I32)
    where
""", """    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, a) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, a, ‹4; 0I32›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, a);
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, a);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    let (m0, v) = mem.load (m0, a);
    let m0 = mem.free (m0, a);
    return (m0, core.wrap.add 0 (core.wrap.add 0 (v#0_4, core.wrap.mul 0 (v#1_4, 1000I32)),
                                 core.wrap.add 0 (core.wrap.mul 0 (v#2_4, 1000000I32), v#3_4)));
""", "m1: gpu.GlobalM", "m1", "iv", (
    "let m1 = mem.store (m1, mem.lea (p, item_id), core.wrap.add 0 ({k}, 14I32));",
    "return (m1, m3, m4, m5);"))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(0, 2 ** 32 - 1))
def test_every_continuation_graph_in_a_kernel_runs_and_verifies(seed: int) -> None:
    # The same graphs as a kernel's body, branching on item_id (diverging, so no barrier): the
    # interpreter gives each work-item the simulated value, and `check` (every phase with its
    # specification, the kernel verifier) reports no error.
    from verimim import driver

    g = draw(random.Random(seed))
    values = [simulate(g, item) for item in range(4)]
    if any(v is None or v > 999 for v in values):
        return  # a loop that never leaves, or a value the result's digits cannot hold
    v0, v1, v2, v3 = (int(v or 0) for v in values)
    text = render(g, KERNEL)

    def result() -> object:
        world, _ = load_text(text, "<kernel-graph>")
        return observe(world, ["prog"]).result

    assert run_with_big_stack(result) == ("ok", v0 + 1000 * v1 + 1_000_000 * v2 + v3), text
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "graph.mim"
        path.write_text(text)
        report = run_with_big_stack(lambda: driver.check(str(path), []))
    assert [x.code for x in report.diagnostics if x.severity == "error"] == [], text
