"""Folders made for a piece of work, and removed again if the work fails before filling them.

A command that creates its output folder and then fails (an export whose tracing raises, a
model file that cannot be saved) should leave nothing behind, not an empty folder that looks
like a result; a folder that existed before, or that holds something, stays as it is.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def folder_for(path: str | os.PathLike) -> Iterator[Path]:
    """Creates the folder `path` and its missing parents for the block; if the block raises,
    removes those of them it created that are empty again (deepest first), then re-raises.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> try:
        ...     with folder_for(root / "serving" / "vit") as folder:
        ...         raise ValueError("the export failed")
        ... except ValueError:
        ...     pass
        >>> sorted(p.name for p in root.iterdir())
        []
    """
    path = Path(path)
    created = []
    for folder in [path, *path.parents]:
        if folder.exists() or folder == folder.parent:
            break
        created.append(folder)
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        for folder in created:  # deepest first
            with contextlib.suppress(OSError):  # not empty, or already gone: it stays
                folder.rmdir()
        raise
