"""One version, said everywhere: the package metadata, `zoo.__version__`, `zoo --version`,
the CHANGELOG's newest entry and the model cards (exports:
tests/zoo/serving/test_export_translator.py)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import zoo

REPO = Path(__file__).resolve().parents[2]
# pyproject.toml's [project] version (read with a pattern: tomllib is Python 3.11+ only).
PROJECT_VERSION = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(),
                            flags=re.M).group(1)


def changelog_versions() -> list[str]:
    return re.findall(r"^## (\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}\)$",
                      (REPO / "CHANGELOG.md").read_text(), flags=re.M)


def test_zoo_version_is_the_installed_distribution_and_the_project_file():
    assert zoo.__version__ == importlib.metadata.version("attention-zoo") == PROJECT_VERSION
    assert "__version__" in dir(zoo)


def test_the_command_prints_it_without_loading_keras():
    code = ("import sys; from zoo.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    code = e.code\n"
            "print('keras' in sys.modules, code)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert result.stdout.splitlines() == [f"zoo {PROJECT_VERSION}", "False 0"], result.stderr


def test_changelog_newest_entry_is_this_version():
    versions = changelog_versions()
    assert versions and versions[0] == PROJECT_VERSION
    assert len(set(versions)) == len(versions)


def test_every_model_card_names_a_released_version():
    released = set(changelog_versions())
    cards = sorted((REPO / "saved_models").glob("*/README.md"))
    assert cards
    for card in cards:
        named = re.findall(r"Made with attention-zoo (\d+\.\d+\.\d+)", card.read_text())
        assert named and named[0] in released, card
