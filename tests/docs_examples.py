"""The Python examples of the README and of the documentation site (docs/**/*.md), for the tests that run them.

An example is a fenced ```` ```python ```` block. A fence written ```` ```{.python test="skip"} ```` (an
attribute list, as the site's Markdown reads it) is shown on the site but neither run nor type-checked; a block
that only includes a file (``--8<-- "path"``) shows that file, which has tests of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

_FENCE = re.compile(r"^```(?:python|\{\.python(?P<attrs>[^\n}]*)\})\n(?P<code>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Example:
    path: Path
    line: int
    code: str
    skip: bool

    @property
    def name(self) -> str:
        """``page.md:line``, the page relative to the repository."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def run(self) -> dict[str, object]:
        """Runs the example in a namespace of its own, which it returns."""
        namespace: dict[str, object] = {"__name__": "__docs_example__"}
        # Blank lines in front, so a traceback names the line of the page.
        exec(compile("\n" * self.line + self.code, str(self.path), "exec"), namespace)
        return namespace


def examples(path: Path) -> list[Example]:
    """The Python examples of one page, in order."""
    text = path.read_text()
    found = []
    for m in _FENCE.finditer(text):
        if m["code"].lstrip().startswith("--8<--"):
            continue
        skip = 'test="skip"' in (m["attrs"] or "")
        found.append(Example(path, text.count("\n", 0, m.start("code")), m["code"], skip))
    return found


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def example(page: str, containing: str) -> Example:
    """The one example of ``page`` (relative to the repository) whose code contains ``containing``."""
    [found] = [e for e in examples(ROOT / page) if containing in e.code]
    return found
