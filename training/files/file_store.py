"""Where the zoo keeps files, and how it writes them: whole or not at all.

One cache folder (`cache_dir`) holds downloads, extracted archives and converted hub models.
Every file a user keeps (a run's final model and metrics, a converted hub model, a download, a
TF Serving `models.config`) goes through `write_atomically`, so a crash or a kill at any
point leaves the old content or the complete new one, at worst with a hidden temporary file
that the next save into the same folder removes once its process is gone.

Nothing is written through a symbolic link: a link planted where the zoo writes (a run
folder's `metrics.json` or `.run.lock` pointing at a file elsewhere) would otherwise have the
zoo overwrite a file outside the folder it owns. `refuse_link` says so in one line, and the
files the zoo opens itself are opened with `O_NOFOLLOW` (`open_no_follow`).
No Keras here: the registry and the archive cache use it without loading TensorFlow.
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import Any, Callable

from zoo.training.errors import UserError
from zoo.training.files.disk_faults import naming

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


def refuse_link(path: str | os.PathLike) -> None:
    """Raises `UserError` where `path` is a symbolic link: the zoo writes no file, lock or
    folder through a link (it would write outside the folder the command owns).

    Example:
        >>> refuse_link("/no/such/file")  # absent: fine, it will be created as a file
    """
    if os.path.islink(path):
        raise UserError(f"{os.fspath(path)} is a symbolic link; the zoo does not write "
                        "through links (remove it, or choose another path)")


def open_no_follow(path: str | os.PathLike, flags: int) -> int:
    """An `opener` for `open(path, mode, opener=open_no_follow)`: as `open` opens, but never
    through a symbolic link at `path` (ELOOP; call `refuse_link` first for the one line)."""
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o644)


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's live process counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


def remove_dead_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Removes the hidden temporary files `.NAME.tmp-PID-*` in `folder` that
    `write_atomically` calls of processes now gone left behind (a save that was killed);
    returns what it removed. Those of live processes (a save under way) stay."""
    removed = []
    try:
        candidates = sorted(Path(folder).glob(".*.tmp-*-*"))
    except OSError:
        return removed
    for path in candidates:
        pid = path.name.rpartition(".tmp-")[2].split("-")[0]
        if not pid.isdigit() or process_alive(int(pid)) or not path.is_file() \
                or path.is_symlink():
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


def _special_file(path: Path) -> bool:
    """Whether `path` is (or links to) a device or a pipe, written in place."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def write_atomically(path: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Writes a file so that `path` holds either its old content or the complete new one.

    `write(temporary)` writes a temporary file beside `path` (same folder, hence the same
    file system; same suffix, as `model.save` wants `.keras`); if it returns without raising,
    the file is flushed to disk and renamed onto `path`. If it raises (a failed hash check,
    say), the temporary file is deleted and `path` is untouched. The folder is created if
    missing. A full or read-only disk raises an OSError that names `path` (see
    `zoo.training.files.disk_faults`), and leaves `path` untouched too. A `path` that is a
    device or a pipe (`/dev/null`, `/dev/stdout`) is written in place: renaming a file onto it would
    replace the device. A `path` that is any other symbolic link is refused (`refuse_link`);
    the temporary file is created new with `O_NOFOLLOW | O_EXCL` and named after this
    process (`.NAME.tmp-PID-*`), so that the next save into the folder removes it if a kill
    left it (`remove_dead_temporaries`).

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
    if _special_file(path):
        with naming(path):
            write(path)
        return path
    refuse_link(path)
    if path.is_dir():  # os.replace would fail on it only after the whole write
        raise IsADirectoryError(f"{path} is a folder; give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temporaries(path.parent)
    temporary = path.with_name(
        f".{path.stem}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}{path.suffix}")
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
