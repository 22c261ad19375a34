"""Shared helpers of the runtime tests: which corpus programs launch kernels."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "examples"
EXAMPLES = ["simple_kernel", "two_arg_kernel", "dyn_smem_kernel", "shared_sync_kernel", "row_sums"]


def kernel_programs() -> list[Path]:
    """tests/programs/valid/*.mim that launch a kernel, the fuzz-found ones with an expected
    result (well-defined programs), and the UB-free shared examples."""
    progs = ROOT / "tests" / "programs"
    out = [p for p in sorted((progs / "valid").glob("*.mim")) if "gpu.launch" in p.read_text()]
    out += [p for p in sorted((progs / "fuzz_found").glob("*.mim"))
            if "gpu.launch" in p.read_text() and expected_result(p) is not None]
    out += [SHARED / f"{n}.mim" for n in EXAMPLES if (SHARED / f"{n}.mim").exists()]
    return out


def expected_result(path: Path, args: list[str] | None = None) -> int | None:
    """`// EXPECT:` of a corpus program (or the EXPECTED.tsv entry of a shared example)."""
    for line in path.read_text().splitlines():
        if line.startswith("// EXPECT:"):
            return int(line.split(":", 1)[1])
    tsv = path.parent / "EXPECTED.tsv"
    if tsv.exists():
        for row in tsv.read_text().splitlines():
            cols = row.split("\t")
            if len(cols) == 4 and cols[0] == path.name and cols[1] == "run" and cols[2] == " ".join(args or []):
                try:
                    return int(cols[3])
                except ValueError:
                    return None
    return None


def program_args(path: Path) -> list[str]:
    for line in path.read_text().splitlines():
        if line.startswith("// ARGS:"):
            return line.split(":", 1)[1].split()
    return []
