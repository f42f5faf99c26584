"""One run at a time in a run folder: a lock held for the whole run.

Two `zoo train` runs into one `--output` would write each other's checkpoints and delete each
other's temporary folders. A run therefore holds an exclusive `flock(2)` on `LOCK_FILE`
inside its folder from before it reads or writes anything there until it ends:

    with run_folder_lock("runs/vit"):
        ...  # the run

A second run into the folder is refused at once, in one line that names the folder and the
process that holds it. The operating system releases the lock when the holder's process ends
however it ends (a kill, a crash, a lost machine), so a dead run never leaves a stale lock
behind; a lock file without a lock on it is free. A run that ends normally removes the file.
The file is hidden, so `prepare_run_folder` ignores it as it ignores temporary files. A lock
file that is a symbolic link is refused in one line, never opened: the run would write its
process id into whatever file the link points to. So is one that is not a lock file the zoo
made: a file with other hard links (`O_NOFOLLOW` stops symbolic links only; truncating a hard
link would empty the user's file under its other name), not a regular file, or holding
anything but a process id.

Where `fcntl` does not exist (Windows), runs are not locked.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator

from zoo.training.errors import UserError
from zoo.training.files.file_store import open_no_follow, refuse_link

LOCK_FILE = ".run.lock"


class RunFolderInUse(UserError):
    """Another process runs in the run folder (it holds the folder's lock)."""


def lock_owner(folder: str | os.PathLike) -> int | None:
    """The process id the folder's lock file records (its last holder, which may have ended);
    None when there is no readable record."""
    try:
        with open(Path(folder) / LOCK_FILE, "rb", opener=open_no_follow) as file:
            text = file.read(64).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _open_lock_file(path: Path) -> int:
    """A descriptor of the lock file, created new where absent; an existing one is opened
    only if it is what a run leaves there (a regular file, no other hard links, a process id
    or nothing), since the run truncates it to write its own id.

    Raises:
        zoo.UserError: `path` is a link, or a file the zoo did not make.
    """
    refuse_link(path)
    try:
        return open_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        fd = open_no_follow(path, os.O_RDWR)
    try:
        status = os.fstat(fd)
        record = os.pread(fd, 65, 0).strip()
        ours = (stat.S_ISREG(status.st_mode) and status.st_nlink == 1
                and len(record) <= 64 and (record.isdigit() or not record))
    except BaseException:
        os.close(fd)
        raise
    if not ours:
        os.close(fd)
        raise UserError(f"{path} is not a lock file the zoo made (it has other hard links, "
                        "or holds something else); the zoo does not overwrite it: move it "
                        "away, or choose another --output")
    return fd


def _try_lock(path: Path) -> int | None:
    """A descriptor of `path` holding its exclusive lock, or None where another holds it."""
    import fcntl

    while True:
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        # A run that ended removed the file after this process opened it: the lock is on a
        # file no one else will open. Lock the file that is there now instead.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def run_folder_lock(folder: str | os.PathLike) -> Iterator[Path]:
    """Holds the exclusive lock of the run folder `folder` (which must exist) for the block.

    Args:
        folder: the run's output folder.

    Yields:
        The lock file's path; it records this process's id.

    Raises:
        RunFolderInUse: another process holds the lock; one line naming the folder and,
            where recorded, that process's id.
    """
    try:
        import fcntl  # noqa: F401
    except ImportError:  # no flock(2): the run goes unlocked
        yield Path(folder) / LOCK_FILE
        return
    path = Path(folder) / LOCK_FILE
    fd = _try_lock(path)
    if fd is None:
        owner = lock_owner(folder)
        by = f" (process {owner})" if owner is not None else ""
        raise RunFolderInUse(
            f"{folder} is in use by another run{by}; wait until it ends, or choose another "
            "--output")
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still locked: the next run creates and locks a new file
        os.close(fd)
