"""Where the zoo may write a file or folder a user named: checked before any work, in one line.

A command that writes a file the user names (`zoo translate --pipeline ... --output FILE`,
`zoo quantize ... --output FILE.keras`) calls `check_output_file` before it loads a model or
reads its input, so that a refusal costs nothing and no half-run leaves files behind:

- a symbolic link is refused (the write would land outside the folder the user chose), with
  `--force` too; so is a folder, or a path under a file;
- an existing file is refused unless `--force`, and never is it one of the command's own
  inputs (`--output` equal to the corpus would destroy it), `--force` or not;
- a folder that cannot be written (read-only, another user's, a full disk's that has no room
  for one more file) is refused before the run, not after it: a file is made there and
  removed.

A folder the user names for the zoo to fill (`zoo train --output`, `zoo export --output`,
`zoo quantize --output DIR`) follows one rule, `check_output_folder`: a symbolic link is
refused, even one to a folder (where the files land would be decided by the link, which
someone else may have planted or may move), and so is a file.

The write itself then goes through `write_atomically`, which replaces the file by renaming a
complete new one onto it: an existing file that has other hard links keeps its content under
those names, and a full disk leaves the old file (or none), never a truncated one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import uuid
from pathlib import Path
from typing import Iterable

from zoo.training.errors import UserError


def _special(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _existing_inputs(inputs: Iterable[str | os.PathLike]) -> list[Path]:
    """The local files the inputs name (a glob pattern's matches; a folder's files are
    not expanded: the output is checked against the folder itself)."""
    found = []
    for item in inputs:
        text = os.fspath(item)
        if "://" in text:
            continue
        matches = glob.glob(text) if any(ch in text for ch in "*?[") else [text]
        found.extend(Path(match) for match in matches if os.path.exists(match))
    return found


def _writable_folder(path: Path, flag: str) -> None:
    """Refuses an output whose folder (or the nearest part of it that exists, where the
    rest will be made) is a file or cannot be written."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        if folder.is_symlink():  # a dangling link: mkdir would fail after the run
            break
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: {folder} is not a folder")
    # Tried, not asked (`os.access`): root passes access(2) on a read-only folder, and /proc
    # or a read-only mount refuse only the write itself.
    probe = folder / f".zoo-write-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        raise UserError(f"{flag} {path}: cannot write in {folder} "
                        f"({error.strerror or error})") from None
    with contextlib.suppress(OSError):
        os.unlink(probe)


def check_output_file(path: str | os.PathLike, flag: str = "--output", *, force: bool = False,
                      inputs: Iterable[str | os.PathLike] = (), in_place: bool = True) -> Path:
    """Refuses, in one line naming `flag`, a file path the zoo must not write at.

    Args:
        path: the file the command will write (a local path).
        flag: the flag as the user typed it, for the message.
        force: whether an existing file may be replaced (`--force`).
        inputs: the command's inputs (files, folders or glob patterns): the output may be
            none of them, `force` or not.
        in_place: whether a pipe or device (`/dev/null`) may take the output, written in
            place; False for a file that must be a file (a picture, which is written
            whole and renamed).

    Returns:
        `path` as a `Path`.

    Raises:
        zoo.UserError: `path` is a symbolic link, a folder, one of `inputs`, an existing file
            without `force`, a pipe or device where not `in_place`, or in a folder that
            cannot be written.

    Example:
        >>> check_output_file("/no/such/folder/out.txt").name
        'out.txt'
    """
    path = Path(path)
    if path.is_symlink():
        raise UserError(f"{flag} {path} is a symbolic link; the zoo does not write through "
                        "links (remove it, or choose another path)")
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file name")
    for source in _existing_inputs(inputs):
        if path.exists() and os.path.samefile(path, source):
            raise UserError(f"{flag} {path} is the command's own input; choose another path")
        if source.is_dir() and path.resolve() == source.resolve():
            raise UserError(f"{flag} {path} is the command's own input; choose another path")
    if _special(path):  # /dev/null, a pipe: written in place, nothing is replaced
        if not in_place:
            raise UserError(f"{flag} {path} is a pipe or device, not a file; give a file name")
        return path
    if path.exists() and not force:
        raise UserError(f"{flag} {path} exists; --force replaces it")
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path} exists and is not a regular file")
    _writable_folder(path, flag)
    return path


def check_output_folder(path: str | os.PathLike, flag: str = "--output") -> Path:
    """Refuses, in one line naming `flag`, a folder path the zoo must not fill: a symbolic
    link (to a folder too: give the folder itself) or a file. A folder that does not exist
    yet is fine (the work makes it); so is a link further up the path, which the user chose.

    Returns:
        `path` as a `Path`.

    Raises:
        zoo.UserError: `path` is a symbolic link or a file.

    Example:
        >>> check_output_folder("/no/such/folder").name
        'folder'
    """
    path = Path(path)
    if path.is_symlink():
        raise UserError(f"{flag} {path} is a symbolic link; the zoo does not write through "
                        "links (give the folder it points to, or another path)")
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file, not a folder")
    return path
