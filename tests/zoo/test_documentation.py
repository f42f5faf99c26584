"""Where things are written: docs/ holds documentation (and the README's example inputs), the
README is a guide of at most 350 lines, and timing figures live in docs/, not in the source's
comments or docstrings (they go stale there; the source says the decision and points to the
entry in docs/benchmarks.md or docs/performance-log.md)."""
import ast
import doctest
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for folder in ("zoo", "layers", "training") for p in (ROOT / folder).rglob("*.py"))
NUMBER = r"\d(?:[\d,.]*\d)?"
# A measured time, rate or speed-up: "1.7 s", "100 ms", "305 -> 123 thread-ms", "48-60
# sentences/s", "1.48x faster". A bare "s" needs its space: "1990s" and "float32s" are no times.
TIMING = re.compile(rf"{NUMBER}\s?(?:ms|µs|us|ns|thread-ms)\b"
                    rf"|{NUMBER}\s(?:s|sec|seconds?|min|minutes?|hours?)\b|\d\.\d+s\b"
                    rf"|{NUMBER}\s?[a-z]+/s\b"
                    rf"|{NUMBER}x (?:faster|slower)|{NUMBER} times (?:faster|slower)",
                    re.IGNORECASE)


def test_docs_holds_documents_only():
    # docs/examples/ holds the inputs the README's snippets read (images, sentences).
    examples = ROOT / "docs" / "examples"
    kinds = {path.suffix for path in (ROOT / "docs").rglob("*")
             if path.is_file() and examples not in path.parents}
    assert kinds <= {".md", ".png", ".svg"}, kinds


def test_the_contributors_guide_names_only_paths_of_the_repository():
    text = (ROOT / ".github" / "CONTRIBUTING.md").read_text()
    assert not re.search(r"(?<![\w.])(?:/[a-z]+/|\.\./|~/)", text), "a path outside the checkout"
    paths = re.findall(r"`([\w.-]+/[\w./-]*)(?:::\w+)?`", text)
    # A sub-package (`text/`) is named in its package's list.
    missing = [p for p in paths if not any((ROOT / folder / p).exists()
                                           for folder in ("", "zoo", "training"))]
    assert paths and missing == []


def test_the_readme_is_a_guide_of_at_most_350_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 350


def _comments(path: Path) -> list[tuple[int, str]]:
    """Each run of comments on consecutive lines, as one line of text (a figure may wrap)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    runs: list[list[tokenize.TokenInfo]] = []
    for token in (t for t in tokens if t.type == tokenize.COMMENT):
        if runs and runs[-1][-1].start[0] == token.start[0] - 1:
            runs[-1].append(token)
        else:
            runs.append([token])
    return [(run[0].start[0], " ".join(t.string.lstrip("#") for t in run)) for run in runs]


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """Each docstring's prose: its doctest examples (code and the output it prints) left out."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                parts = doctest.DocTestParser().parse(docstring)
                found.append((node.body[0].lineno,
                              " ".join(p for p in parts if isinstance(p, str))))
    return found


def timing_figures(path: Path) -> list[str]:
    """`line: figure` for each timing figure in the comments and docstrings of `path`."""
    return [f"{line}: {match.group(0)}" for line, text in _comments(path) + _docstrings(path)
            for match in TIMING.finditer(" ".join(text.split()))]


@pytest.mark.parametrize("text, timed", [("# about 1.7 s on two cores", True),
                                          ("# 48-60 sentences/s with 16", True),
                                          ("# 1.48x faster once compiled", True),
                                          ("# 305 -> 123 thread-ms a step", True),
                                          ("# 0.46 against 1.64 ms", True),
                                          ("# a 35-60 s compile", True),
                                          ("# 1.3s more", True),
                                          ("# (batch, heads, 64, 64)", False),
                                          ("# 8000 x 5000 pixels", False),
                                          ("# a 4x4 grid of 16 patches", False),
                                          ("# float32s and the 1990s", False),
                                          ("# at most 16 MiB, 2.0 of it", False)])
def test_the_timing_pattern(text, timed):
    assert bool(TIMING.search(text)) == timed


def test_a_figure_that_wraps_is_found_and_a_doctest_output_is_not(tmp_path):
    caught = tmp_path / "caught.py"
    caught.write_text('def f():\n    """Trains at 36.5 and 38.4\n    images/s with oneDNN."""\n'
                      "# the step took 1.3\n# s more\n")
    passes = tmp_path / "passes.py"
    passes.write_text('def f():\n    """A rate and its unit (docs/benchmarks.md).\n\n'
                      "    >>> f()\n    '310 tokens/s'\n    \"\"\"\n")
    assert timing_figures(caught) == ["4: 1.3 s", "2: 38.4 images/s"]
    assert timing_figures(passes) == []


def test_no_comment_or_docstring_carries_a_timing_figure():
    found = [f"{path.relative_to(ROOT)}:{figure}" for path in SOURCES
             for figure in timing_figures(path)]
    assert not found, ("move these figures to docs/benchmarks.md or docs/performance-log.md "
                       "and point there:\n" + "\n".join(found))


@pytest.mark.parametrize("card", sorted((ROOT / "saved_models").glob("*/README.md")),
                         ids=lambda p: p.parent.name)
def test_every_model_card_says_its_licence_intended_use_and_limitations(card):
    text = card.read_text()
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL))
    for title in ("Licence", "Intended use", "Limitations"):
        assert len(sections.get(title, "").split()) >= 10, f"{card}: no '## {title}' section"
    assert "Apache-2.0" in sections["Licence"]
