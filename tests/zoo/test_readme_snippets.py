"""The README runs: every Python and shell block, as a user would paste it, from a folder
where `docs/examples/` is what the repository ships.

A block preceded by an HTML comment `<!-- needs: network -->` or `<!-- needs: server -->` is
skipped (installing, hub downloads, TFDS, a running TF Serving), and so is the test suite's own
block (`<!-- needs: the test suite ... -->`, which would run this test again). The Python
blocks run in one interpreter, in order, sharing their names as a reader's session would; the
shell blocks' `zoo` commands run in that same interpreter through `zoo.cli.main.main`, so
TensorFlow and the shipped models load once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CARDS = sorted((ROOT / "saved_models").glob("*/README.md"))
MARKER = re.compile(r"^<!--\s*needs:\s*(.+?)\s*-->$")
SKIPPED_NEEDS = ("network", "server", "the test suite")


@dataclasses.dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # of the opening fence, from 1
    needs: str | None


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, each with the `needs:` marker before it."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()),
                        "")
        marker = MARKER.match(previous)
        end = lines.index("```", i + 1)
        blocks.append(Block(fence.group(1), "\n".join(lines[i + 1:end]), i + 1,
                            marker.group(1) if marker else None))
        i = end + 1
    return blocks


def shell_commands(code: str) -> list[list[str]]:
    """A shell block's commands, continuation lines joined and comments dropped."""
    joined = code.replace("\\\n", " ")
    return [words for words in (shlex.split(line, comments=True) for line in joined.splitlines())
            if words]


def _runnable() -> list[Block]:
    return [b for b in readme_blocks(README.read_text())
            if b.language in ("python", "bash") and b.needs is None]


# ------------------------------------------------------------------ what the README may hold
def test_markers_name_only_what_is_skipped():
    needs = [b.needs for b in readme_blocks(README.read_text()) if b.needs]
    assert needs and all(n.startswith(SKIPPED_NEEDS) for n in needs), needs
    assert any(n == "network" for n in needs) and any(n == "server" for n in needs)


def test_every_shell_line_that_runs_is_a_zoo_command():
    for block in (b for b in _runnable() if b.language == "bash"):
        for words in shell_commands(block.code):
            assert words[0] == "zoo", f"README line {block.line}: {' '.join(words)}"


@pytest.mark.parametrize("path", [README, *CARDS], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_path_outside_the_repository(path):
    text = path.read_text()
    for outside in ("../shared", "/usr/share", "/work/", "~/"):
        assert outside not in text, f"{path.relative_to(ROOT)} mentions {outside}"


def test_the_first_install_line_is_the_users():
    install = next(b for b in readme_blocks(README.read_text()) if "pip install" in b.code)
    assert install.code.splitlines()[0].endswith("pip install .")


def test_every_loss_on_logits_says_so():
    for block in _runnable():
        for call in re.findall(r"loss=keras\.losses\.\w+\([^)]*\)", block.code):
            assert "from_logits=True" in call, f"README line {block.line}: {call}"
        assert "loss=..." not in block.code, f"README line {block.line}"


# ------------------------------------------------------------------ and it runs
DRIVER = """
    import json, os, shlex, sys, time
    from zoo.cli.main import main

    namespace = {"__name__": "__readme__"}
    for block in json.load(open(sys.argv[1])):
        start = time.time()
        where = f"README line {block['line']} ({block['language']})"
        if block["language"] == "python":
            exec(compile(block["code"], where, "exec"), namespace)
        else:
            for argv in block["commands"]:
                status = main(argv[1:])
                assert status == 0, f"{where}: {shlex.join(argv)} exited {status}"
        print(f"{where}: {time.time() - start:.1f} s", flush=True)
"""


@pytest.mark.slow
def test_every_python_and_shell_block_runs(tmp_path):
    blocks = [{"language": b.language, "line": b.line, "code": b.code,
               "commands": shell_commands(b.code) if b.language == "bash" else []}
              for b in _runnable()]
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    work = tmp_path / "work"
    work.mkdir()
    (work / "docs").symlink_to(ROOT / "docs")  # what a checkout's root holds
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "KERAS_BACKEND": "tensorflow", "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER),
                           str(tmp_path / "blocks.json")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("README line") == len(blocks), done.stdout
    # What the blocks say they write is there.
    assert (work / "rollout.png").stat().st_size > 0
    assert (work / "runs" / "vit-tiny" / "model.keras").exists()
    assert (work / "serving" / "vit-cifar10" / "1" / "saved_model.pb").exists()
