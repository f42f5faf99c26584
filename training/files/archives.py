"""Extracting downloaded archives once, safely (no member may write outside the destination).

An archive is known by the sha256 of its content, not by its name or modification time: a
copy, a re-download or a `touch` does not extract it again. Without a destination it is
extracted into a cache shared by all runs,

    $ZOO_CACHE_DIR/archives/<sha256 prefix>/all                      (everything)
    $ZOO_CACHE_DIR/archives/<sha256 prefix>/first-<n>-per-class      (limit_per_class=n)

(`ZOO_CACHE_DIR` defaults to `$XDG_CACHE_HOME/attention-zoo`, i.e. `~/.cache/attention-zoo`).
Beside them, `members.json` lists the archive's files in archive order once one pass has read
it to the end; with that list a per-class limit reads the archive only as far as its last
needed member.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
import tarfile
import uuid
import zlib
from pathlib import Path, PurePosixPath

from zoo.training.errors import UserError
from zoo.training.files.disk_faults import naming
from zoo.training.files.file_store import cache_dir, file_sha256, process_alive, write_atomically

_MARKER = ".extracted.json"
_MEMBERS = "members.json"

# sha256 of archives hashed in this process: (path, size, mtime_ns) -> hex digest.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def archive_sha256(archive_path: str | os.PathLike) -> str:
    """The hex sha256 of an archive's bytes (computed once per process and file version).

    Raises:
        FileNotFoundError: the archive does not exist.
    """
    path = Path(archive_path)
    if not path.is_file():
        raise FileNotFoundError(f"archive {path} does not exist")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_sha256(path)
    return _DIGESTS[key]


def cached_archive_dir(archive_path: str | os.PathLike) -> Path:
    """The cache folder of one archive's content: `cache_dir("archives", sha256[:16])`."""
    return cache_dir("archives", archive_sha256(archive_path)[:16])


def extract_archive(
    archive_path: str | os.PathLike,
    destination: str | os.PathLike | None = None,
    limit_per_class: int | None = None,
) -> Path:
    """Extracts a .tar, .tar.gz or .tgz archive once, refusing members that escape it.

    A marker file (`.extracted.json`) written after a complete extraction records the archive's
    sha256 and `limit_per_class`; a later call with the same content and limit returns at once.
    The archive is extracted into a private folder beside the destination and then moved in
    (`_publish`), so that several processes may extract the same archive into one folder at
    once (every process of a multi-process training job does): each returns the same complete
    folder, and none ever sees a partial file. An interrupted extraction leaves no marker and
    is redone; its private folder is removed by the next call once its process is gone.

    Args:
        archive_path: the archive, e.g. `cifar10-train-jpg.tar.gz`.
        destination: folder to extract into (created when missing); `None` extracts into the
            shared cache (`cached_archive_dir`), where every run finds it.
        limit_per_class: extract at most this many files from each folder of the archive (the
            first ones in archive order), e.g. 20 images per class for a quick test. `None`
            extracts everything. Once the archive's member list is known (after one complete
            pass, kept in the cache), reading stops after the last member needed.

    Returns:
        The extraction folder as a `Path`.

    Raises:
        FileNotFoundError: the archive does not exist.
        ValueError: the archive is not a readable tar file, or a member is an absolute path,
            climbs out with `..`, or is a link or device file.
    """
    from zoo.layers.validation import positive_int  # here: zoo.layers' package loads Keras

    archive_path = Path(archive_path)
    limit_per_class = positive_int(limit_per_class, "limit_per_class", error=UserError,
                                   optional=True)
    digest = archive_sha256(archive_path)
    if destination is None:
        name = "all" if limit_per_class is None else f"first-{limit_per_class}-per-class"
        destination = cached_archive_dir(archive_path) / name
    destination = Path(destination)
    record = {"archive": archive_path.name, "sha256": digest, "limit_per_class": limit_per_class}
    if _holds(destination, record):
        return destination
    with contextlib.suppress(OSError):  # another extraction's, or unreadable: extract again
        (destination / _MARKER).unlink()
    # Extracted into a private folder beside the destination, then moved in: a process that
    # reads the destination (another run, another process of a job extracting the same
    # archive at once) never sees half a file or a marker before the files.
    _remove_dead_partials(destination)
    target = destination.with_name(
        f".{destination.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    try:
        target.mkdir(parents=True)
        _extract(archive_path, target, limit_per_class, _known_members(archive_path),
                 destination)
        with naming(target / _MARKER):
            (target / _MARKER).write_text(json.dumps(record))
        _publish(target, destination, record)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    return destination


def _publish(target: Path, destination: Path, record: dict) -> None:
    """Moves the complete extraction `target` to `destination`, safely when other processes
    publish the same extraction at once.

    A missing (or empty) destination is replaced in one rename, which only one process wins;
    the others find the winner's marker and keep its folder, which may be in use. A
    destination that holds other files (an extraction with another limit or of another
    archive, files put there by hand) keeps them: the files are moved in one by one, each
    replace atomic and of equal content whichever process makes it, the marker last.
    """
    try:
        os.rename(target, destination)
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if _holds(destination, record):
        return
    _merge(target, destination, skip=_MARKER)
    os.replace(target / _MARKER, destination / _MARKER)


def _merge(source: Path, destination: Path, skip: str | None = None) -> None:
    """Moves `source`'s tree into the existing folder `destination`: a folder the destination
    lacks in one rename, a file over its namesake."""
    for entry in os.scandir(source):
        there = destination / entry.name
        if entry.name == skip:
            continue
        if entry.is_dir(follow_symlinks=False):
            try:
                os.rename(entry.path, there)
                continue
            except OSError as error:  # there already (another process's, or earlier files)
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            _merge(Path(entry.path), there)
        else:
            os.replace(entry.path, there)


def _remove_dead_partials(destination: Path) -> None:
    """Removes the private folders `.NAME.partial-PID-*` beside `destination` that killed
    extractions of this machine left; those of live processes (extracting now) stay."""
    with contextlib.suppress(OSError):
        for path in destination.parent.glob(f".{glob.escape(destination.name)}.partial-*-*"):
            pid = path.name.rpartition(".partial-")[2].split("-")[0]
            if pid.isdigit() and not process_alive(int(pid)):
                shutil.rmtree(path, ignore_errors=True)


def _holds(folder: Path, record: dict) -> bool:
    """Whether `folder` is a finished extraction of `record` (its marker says so)."""
    try:
        return json.loads((folder / _MARKER).read_text()) == record
    except (OSError, ValueError):
        return False


def _extract(archive_path: Path, destination: Path, limit_per_class: int | None,
             members: list[str] | None, shown: Path | None = None) -> None:
    """Streams the archive into `destination`, checking every member it reads; an error
    names a member's file in `shown` (the folder the files are bound for), if given."""
    needed = None
    if limit_per_class is not None and members is not None:
        needed = set(_first_per_folder(members, limit_per_class))
    counts: dict[str, int] = {}
    seen: list[str] = []
    complete = True
    try:
        with tarfile.open(archive_path, "r:*") as archive:
            for member in archive:  # Streaming: members are read in archive order.
                _check_member(member, archive_path)
                if member.isfile():
                    seen.append(member.name)
                    if limit_per_class is not None:
                        folder = str(PurePosixPath(member.name).parent)
                        if counts.get(folder, 0) >= limit_per_class:
                            continue
                        counts[folder] = counts.get(folder, 0) + 1
                # filter="data" repeats the safety checks inside tarfile and drops odd modes;
                # a full disk names the member's file.
                with naming((shown or destination) / member.name):
                    archive.extract(member, destination, filter="data")
                if needed is not None and member.isfile():
                    needed.discard(member.name)
                    if not needed:  # every member the limit asks for is out: stop reading
                        complete = False
                        break
    except (tarfile.TarError, EOFError, zlib.error) as error:  # damaged or truncated
        raise UserError(f"cannot read archive {archive_path}: {error}") from error
    if complete and members is None:
        _remember_members(archive_path, seen)


def _first_per_folder(members: list[str], limit: int) -> list[str]:
    """The first `limit` files of each folder, in archive order."""
    counts: dict[str, int] = {}
    chosen = []
    for name in members:
        folder = str(PurePosixPath(name).parent)
        if counts.get(folder, 0) < limit:
            counts[folder] = counts.get(folder, 0) + 1
            chosen.append(name)
    return chosen


def _known_members(archive_path: Path) -> list[str] | None:
    """The archive's files in archive order, as recorded by an earlier complete pass."""
    try:
        path = cached_archive_dir(archive_path) / _MEMBERS
        data = json.loads(path.read_text())
        if data.get("sha256") == archive_sha256(archive_path):
            return list(data["files"])
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        pass
    return None


def _remember_members(archive_path: Path, files: list[str]) -> None:
    """Records the archive's file list in the cache (best effort: a read-only cache is fine)."""
    try:
        record = json.dumps({"sha256": archive_sha256(archive_path), "files": files})
        write_atomically(cached_archive_dir(archive_path) / _MEMBERS,
                         lambda path: path.write_text(record))
    except (OSError, RuntimeError):
        pass


def _check_member(member: tarfile.TarInfo, archive_path: Path) -> None:
    """Raises ValueError for a member that could write outside the destination."""
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or member.name.startswith(("/", "\\")):
        raise UserError(
            f"archive {archive_path} holds an unsafe member {member.name!r} "
            "(absolute path or '..'); refusing to extract it"
        )
    if not (member.isfile() or member.isdir()):
        raise UserError(
            f"archive {archive_path} holds {member.name!r}, which is a link or special file; "
            "only regular files and folders are extracted"
        )
