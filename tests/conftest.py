"""Shared fixtures: where the real data lives, and backend facts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ZOO_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real datasets beside the checkout (../shared/data), or a skip."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (set ZOO_SHARED_DATA)")
    return SHARED_DATA


def modules_imported_by(code: str, backend: str = "jax", cwd: Path = REPO) -> set[str]:
    """The top-level modules a fresh Python process has imported after running `code` (with
    `KERAS_BACKEND=backend`); fails with the process's stderr if `code` fails. One helper for
    the tests that check what an import or a command does not load (TensorFlow, Keras, ...).
    """
    import subprocess
    import sys

    script = (code + "\nimport sys as _sys\n"
              "print('MODULES', ' '.join(sorted({m.split('.')[0] for m in _sys.modules})))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True,
                            text=True, timeout=300,
                            env={**os.environ, "KERAS_BACKEND": backend})
    assert result.returncode == 0, result.stderr[-2000:]
    line = [x for x in result.stdout.splitlines() if x.startswith("MODULES ")][-1]
    return set(line.split()[1:])
