"""What each diagnostic code means, read from docs/diagnostics.md — the one source of `verimim
explain CODE`, of SARIF's rule descriptions, and of the published documentation.

The page has one `## CODE — summary` section per code; the package carries it as
verimim/data/diagnostics.md (a symbolic link into docs/, so that an installed verimim explains
as a checkout does).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_HEADING = re.compile(r"^## (?P<code>[EW]-[A-Z0-9-]+) — (?P<summary>.+)$")
_KIND = re.compile(r"^\*(?P<severity>error|warning|note) · exit (?P<exit>\d)\*")


@dataclass(frozen=True)
class Page:
    code: str
    summary: str
    severity: str
    exit_code: int
    text: str  # the section, heading included, as Markdown

    @property
    def description(self) -> str:
        """The first paragraph, without the severity line's marker: SARIF's full description."""
        para = self.body.split("\n\n", 1)[0]
        return re.sub(r"^\*[^*]*\*( — )?", "", para).replace("\n", " ").strip() or self.summary

    @property
    def body(self) -> str:
        """The section without its heading (SARIF's help text)."""
        return self.text.split("\n", 1)[1].strip() if "\n" in self.text else ""


def _source() -> str:
    return resources.files("verimim.data").joinpath("diagnostics.md").read_text(encoding="utf-8")


def parse(markdown: str) -> dict[str, Page]:
    """Every `## CODE — summary` section of the page, in page order."""
    pages: dict[str, Page] = {}
    sections = re.split(r"(?m)^(?=## )", markdown)
    for section in sections:
        first, _, rest = section.partition("\n")
        m = _HEADING.match(first)
        if m is None:
            continue
        kind = _KIND.match(rest.strip())
        if kind is None:
            raise ValueError(f"diagnostics.md: section {m['code']} lacks its `*severity · exit N*` line")
        pages[m["code"]] = Page(m["code"], m["summary"].strip(), kind["severity"], int(kind["exit"]),
                                section.strip())
    return pages


@cache
def pages() -> dict[str, Page]:
    return parse(_source())


def lookup(code: str) -> Page | None:
    return pages().get(code.strip().upper())


def suggestions(code: str) -> list[str]:
    return difflib.get_close_matches(code.strip().upper(), list(pages()), n=3, cutoff=0.75)


def index() -> str:
    """One line per code: what `verimim explain` prints without a code."""
    width = max(len(c) for c in pages())
    return "\n".join(f"{p.code:<{width}}  {p.severity:<7}  {p.summary}" for p in pages().values())
