"""Every example program of docs/*.md runs as a test: a ```mim block with the annotations of
tests/programs (`// EXPECT-ERROR:`, `// EXPECT:`, `// EXPECT-WARNING:`, `// FUEL:`, `// ARGS:`)
must give exactly what they say, so the documentation cannot drift from verimim."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, annotations
from tests.test_cli import verimim

_BLOCK = re.compile(r"(?ms)^```mim\n(.*?)^```")


def _examples() -> list[tuple[str, str]]:
    out = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for i, m in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            out.append((f"{page.relative_to(ROOT)}#{i}", m.group(1)))
    return out


EXAMPLES = _examples()


def test_the_docs_have_examples() -> None:
    assert len(EXAMPLES) >= 15


@pytest.mark.parametrize(("where", "text"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_doc_example(where: str, text: str, tmp_path: Path) -> None:
    prog = tmp_path / "example.mim"
    prog.write_text(text, encoding="utf-8")
    ann = annotations(prog)
    assert "EXPECT" in ann or "EXPECT-ERROR" in ann, f"{where}: an example says what it gives"
    args = ann.get("ARGS", "").split()
    fuel = ["--fuel", ann["FUEL"]] if "FUEL" in ann else []
    check = json.loads(verimim("check", str(prog), "--json").stdout)
    check_codes = {d["code"] for d in check["diagnostics"]}
    if "EXPECT-ERROR" in ann and ann["EXPECT-ERROR"] in check_codes:
        return
    assert check["ok"], f"{where}: check rejects it: {check['diagnostics']}"
    run = json.loads(verimim("run", str(prog), *args, *fuel, "--target", "interp", "--json").stdout)
    codes = [d["code"] for d in run["diagnostics"]]
    if "EXPECT-ERROR" in ann:
        assert ann["EXPECT-ERROR"] in codes, f"{where}: {run['diagnostics']}"
        return
    assert run["ok"] and run["result"] == int(ann["EXPECT"]), f"{where}: {run}"
    if "EXPECT-WARNING" in ann:
        assert ann["EXPECT-WARNING"] in codes


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    # mkdocs.yml sets strict: a broken link or anchor, or a page left out of the nav, fails.
    mkdocs = pytest.importorskip("mkdocs.commands.build")
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"))
    mkdocs.build(config)
    assert (tmp_path / "site" / "diagnostics" / "index.html").is_file()
    assert (tmp_path / "site" / "schemas" / "check.schema.json").is_file()


def test_docs_pages_are_all_in_the_nav() -> None:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    listed = {page for entry in nav for page in entry.values()}
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}
