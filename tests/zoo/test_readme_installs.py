"""Every command in the README runs after the install line its section names.

The README's install line (`pip install .`) gives the core dependencies; a section whose
commands need more names its extra (`pip install ".[jax]"`) itself, where a reader of that
section sees it. Read from README.md and pyproject.toml: each section's code blocks and inline
code are searched for what needs an optional package (`NEEDS`), and that package must come
with the core or with an extra the same section names; every extra the README names exists.
"""

from __future__ import annotations

import re

import pytest

from tests.zoo.test_dependencies import ROOT, _declared, _distributions
from tests.zoo.test_readme_snippets import readme_blocks

# What a command or snippet says -> the import it needs. `zoo export`, `zoo.load("hf://...")`
# and everything else the README runs need only the core (the README snippet tests run them).
NEEDS = {
    r"KERAS_BACKEND=jax": ("jax",),
    r"KERAS_BACKEND=torch": ("torch",),
    r"--pipeline\b": ("apache_beam",),
    r"\bzoo bench\b": ("torch", "timm", "transformers", "ctranslate2"),
    r"\bpython -m pytest\b": ("pytest", "xdist"),
    r"\bhf://": ("huggingface_hub",),
}
INSTALL = re.compile(r"pip install (?:-e )?[\"']?\.(?:\[([\w,-]+)\])?[\"']?")


def sections(text: str) -> dict[str, str]:
    """The README's `## ` sections by title (their `### ` subsections included)."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def commands(section: str) -> list[str]:
    """What a section runs: its Python and shell blocks, and its inline code."""
    blocks = [b.code for b in readme_blocks(section) if b.language in ("bash", "python")]
    prose = re.sub(r"^```.*?^```", "", section, flags=re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^\|.*$", "", prose, flags=re.MULTILINE)  # a table describes, not runs
    return blocks + re.findall(r"`([^`\n]+)`", prose)


def named_extras(section: str) -> set[str]:
    return {extra for match in INSTALL.finditer(section) if match.group(1)
            for extra in match.group(1).split(",")}


README = (ROOT / "README.md").read_text()


def test_the_install_section_installs_the_core_alone():
    install = sections(README)["Install"]
    assert re.search(r"pip install \.$", install, flags=re.MULTILINE)
    assert not named_extras(install), "a section names the extra its commands need"


def test_every_extra_the_readme_names_exists():
    _, extras = _declared()
    for title, text in sections(README).items():
        unknown = named_extras(text) - set(extras)
        assert not unknown, f"README section {title!r} names extras {unknown}; pyproject.toml " \
                            f"has {sorted(extras)}"


@pytest.mark.parametrize("title", list(sections(README)))
def test_each_command_runs_after_its_sections_install_line(title):
    core, extras = _declared()
    text = sections(README)[title]
    available = core.union(*(extras[name] for name in named_extras(text) if name in extras))
    for command in commands(text):
        for pattern, modules in NEEDS.items():
            if not re.search(pattern, command):
                continue
            for module in modules:
                assert _distributions(module) & available, (
                    f"README section {title!r} runs {command.splitlines()[0]!r}, which needs "
                    f"{module}; neither `pip install .` nor an extra the section names "
                    f"({sorted(named_extras(text))}) installs it")


def test_the_table_of_needs_is_read():
    """The patterns find what the README runs (a README rewritten past them fails here)."""
    found = {pattern for text in sections(README).values() for command in commands(text)
             for pattern in NEEDS if re.search(pattern, command)}
    assert {r"KERAS_BACKEND=jax", r"--pipeline\b", r"\bzoo bench\b",
            r"\bpython -m pytest\b"} <= found
