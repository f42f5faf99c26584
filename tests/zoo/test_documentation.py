"""Where things are written: docs/ holds documentation (and the README's example inputs), the README is a guide of at most 350
lines, and timing figures live in docs/, not in the source's comments (they go stale there)."""
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for folder in ("zoo", "layers", "training") for p in (ROOT / folder).rglob("*.py"))
# A measured time, rate or speed-up: "1.7 s", "100 ms", "48-60 sentences/s", "1.48x faster".
TIMING = re.compile(r"\d(?:[\d,.]*\d)?\s?(?:ms|s|sentences/s|images/s|tokens/s)\b"
                    r"|\d(?:\.\d+)?x (?:faster|slower)", re.IGNORECASE)


def test_docs_holds_documents_only():
    # docs/examples/ holds the inputs the README's snippets read (images, sentences).
    examples = ROOT / "docs" / "examples"
    kinds = {path.suffix for path in (ROOT / "docs").rglob("*")
             if path.is_file() and examples not in path.parents}
    assert kinds <= {".md", ".png", ".svg"}, kinds


def test_the_readme_is_a_guide_of_at_most_350_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 350


def _comments(path: Path) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


@pytest.mark.parametrize("text, timed", [("# about 1.7 s on two cores", True),
                                          ("# 48-60 sentences/s with 16", True),
                                          ("# 1.48x faster once compiled", True),
                                          ("# (batch, heads, 64, 64)", False),
                                          ("# 8000 x 5000 pixels", False)])
def test_the_timing_pattern(text, timed):
    assert bool(TIMING.search(text)) == timed


def test_no_comment_carries_a_timing_figure():
    found = [f"{path.relative_to(ROOT)}:{line}: {text}" for path in SOURCES
             for line, text in _comments(path) if TIMING.search(text)]
    assert not found, "move these figures to docs/:\n" + "\n".join(found)
