"""CI cannot pass a red suite: `.ci/test` stops at the first failing step with its exit code,
and it runs the README's test commands as they are written.

The steps run against a stand-in `python` on PATH that records its arguments and fails on the
call chosen by the test, so no real suite runs here."""
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI_TEST = ROOT / ".ci" / "test"


def _steps(text: str) -> list[str]:
    """The command lines of a shell script or block: no comments, blanks or set-up lines."""
    lines = [line.strip() for line in text.splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "set ", "cd "))]


def _run_with_stand_in(tmp_path: Path, fail_on_call: int) -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    stand_in = bin_dir / "python"
    # Call n (counted from 1) exits 3; the others succeed.
    stand_in.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> "{log}"\n'
        f'[ "$(wc -l < "{log}")" -eq {fail_on_call} ] && exit 3\n'
        "exit 0\n")
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", str(CI_TEST)], env=env, capture_output=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, calls


@pytest.mark.parametrize("fail_on_call", [1, 2])
def test_a_failing_step_ends_ci_red_and_runs_nothing_after_it(tmp_path, fail_on_call):
    returncode, calls = _run_with_stand_in(tmp_path, fail_on_call)
    assert returncode == 3
    assert len(calls) == fail_on_call


def test_every_step_runs_when_all_pass(tmp_path):
    returncode, calls = _run_with_stand_in(tmp_path, fail_on_call=0)
    assert returncode == 0
    assert len(calls) == len(_steps(CI_TEST.read_text())) == 2


def test_the_steps_run_the_readmes_test_commands_as_written():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Tests \(.*?```bash\n(.*?)```", readme, re.S)
    assert block, "the README's test block is missing"
    readme_steps = _steps(block.group(1))
    ci_steps = _steps(CI_TEST.read_text())
    assert readme_steps and ci_steps[:len(readme_steps)] == readme_steps
    # No step hides a second command behind `&&`, `;` or `||`, where `set -e` would not stop.
    for step in ci_steps:
        assert not re.search(r"&&|\|\||;", step), step
    assert "bash .ci/test" in _steps((ROOT / ".ci" / "run").read_text())
