"""`import zoo` then `zoo.load(...)` is as quiet as the `zoo` command: TensorFlow's start-up
logs (the absl preamble, CUDA and CPU-feature notices, "failed call to cuInit" on a machine
without a GPU) stay off stderr, while the program's own logging comes through;
`zoo.verbose()` or `ZOO_LOG=debug` shows them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
    import logging, sys
    logging.basicConfig(format="mine: %(message)s")
    import zoo
    {before}
    model = zoo.load("vit-cifar10")
    logging.getLogger("program").warning("my own warning")
    print("my own line", file=sys.stderr)
"""
# What TensorFlow 2.21 writes on every start (zoo/cli/quiet.py lists it).
START_UP = "All log messages before absl::InitializeLog() is called"


def _stderr(before: str = "", **environ: str) -> str:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ZOO_LOG", "TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM.format(before=before))], cwd=ROOT,
        capture_output=True, text=True, timeout=240, env={**env, **environ})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def test_loading_a_model_says_nothing_but_the_programs_own_lines():
    assert _stderr().splitlines() == ["mine: my own warning", "my own line"]


def test_verbose_shows_tensorflows_start_up():
    # (`ZOO_LOG=debug` goes through the same switch: tests/zoo/cli/test_startup.py.)
    err = _stderr(before="zoo.verbose()")
    assert START_UP in err
    assert err.splitlines()[-2:] == ["mine: my own warning", "my own line"]
