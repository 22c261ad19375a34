"""`verimim dump` of programs that declare C functions: the declarations are printed (as
`ccon`, whichever form declared them), calls name the function as declared, and the dump parses
back to the same text and runs the same way."""
from __future__ import annotations

from pathlib import Path

from verimim import driver

SRC = """plugin core;

ccon atoi [%mem.M 0, %mem.Ptr («⊤:Nat; I8», 0), Cn [%mem.M 0, I32]];
cfun println_i32 [%mem.M 0, I32]: %mem.M 0;
cfun never_called [%mem.M 0]: %mem.M 0;

con extern main (mem: %mem.M 0, argc: I32, argv: %mem.Ptr («⊤:Nat; %mem.Ptr («⊤:Nat; I8», 0)», 0),
                 return: Cn [%mem.M 0, I32]) =
    let (mem, s) = %mem.load (mem, %mem.lea (argv, 1I32));
    atoi (mem, s, k)
    where
        con k (mem: %mem.M 0, v: I32) =
            ret mem = println_i32 $ (mem, v);
            return (mem, v);
    end;
"""


def test_dump_prints_c_declarations_and_round_trips(tmp_path: Path) -> None:
    f = tmp_path / "c.mim"
    f.write_text(SRC)
    first = driver.dump(str(f), [])
    assert first.ok, [d.render() for d in first.diagnostics]
    text = first.text or ""
    assert "ccon atoi [" in text and "ccon println_i32 [" in text
    assert "never_called" not in text  # only what the program calls
    assert "c.atoi" not in text and "atoi (" in text
    g = tmp_path / "c_dumped.mim"
    g.write_text(text)
    again = driver.dump(str(g), [])
    assert again.ok and again.text == text
    for path in (f, g):
        rep = driver.run(str(path), [], ["-12"], target="interp")
        assert (rep.data["result"], rep.data["stdout"]) == (-12, "-12\n")
