"""Where the zoo keeps files, and how it writes them: whole or not at all.

One cache folder (`cache_dir`) holds downloads, extracted archives and converted hub models.
Every file a user keeps (a run's final model and metrics, a converted hub model, a download, a
TF Serving `models.config`) goes through `write_atomically`, so a crash or a kill at any
point leaves the old content or the complete new one, at worst with a hidden temporary file.
No Keras here: the registry and the archive cache use it without loading TensorFlow.
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import Any, Callable

from .disk_faults import naming

CACHE_ENV = "ZOO_CACHE_DIR"


def cache_dir(*parts: str) -> Path:
    """The zoo's cache folder, or a folder inside it: `$ZOO_CACHE_DIR`, else
    `$XDG_CACHE_HOME/attention-zoo`, else `~/.cache/attention-zoo` (not created here).

    Example (`~/.cache/attention-zoo/hub` where no variable is set):
        >>> cache_dir("hub") == cache_dir() / "hub"
        True
    """
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV]).expanduser()
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
        root = root / "attention-zoo"
    return root.joinpath(*parts)


def fsync(path: str | os.PathLike) -> None:
    """Flushes a file (or a folder's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Writes a file so that `path` holds either its old content or the complete new one.

    `write(temporary)` writes a temporary file beside `path` (same folder, hence the same
    file system; same suffix, as `model.save` wants `.keras`); if it returns without raising,
    the file is flushed to disk and renamed onto `path`. If it raises (a failed hash check,
    say), the temporary file is deleted and `path` is untouched. The folder is created if
    missing. A full or read-only disk raises an OSError that names `path` (see
    `zoo.training.disk_faults`), and leaves `path` untouched too. A `path` that is a device or
    a pipe (`/dev/null`, `/dev/stdout`) is written in place: renaming a file onto it would
    replace the device.

    Returns:
        `path`, as a `Path`.

    Example (a model file: `write_atomically("run/model.keras", model.save)`):
        >>> import tempfile
        >>> folder = tempfile.TemporaryDirectory()  # deleted with the object
        >>> path = write_atomically(Path(folder.name) / "run" / "metrics.json",
        ...                         lambda p: p.write_text('{"bleu": 27.3}'))
        >>> path.read_text(), [p.name for p in path.parent.iterdir()]
        ('{"bleu": 27.3}', ['metrics.json'])
    """
    path = Path(path)
    if path.exists() and not stat.S_ISREG(path.stat().st_mode) and not path.is_dir():
        with naming(path):
            write(path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.stem}.tmp-{uuid.uuid4().hex[:12]}{path.suffix}")
    try:
        with naming(path, temporary):
            write(temporary)
            fsync(temporary)
            os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()
    with naming(path):
        fsync(path.parent)
    return path


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB pieces (the one file hash of the zoo:
    shipped models' manifests, downloads, archive caches)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
