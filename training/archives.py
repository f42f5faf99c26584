"""Extracting downloaded archives once, safely (no member may write outside the destination)."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path, PurePosixPath

_MARKER = ".extracted.json"


def extract_archive(
    archive_path: str | os.PathLike,
    destination: str | os.PathLike,
    limit_per_class: int | None = None,
) -> Path:
    """Extracts a .tar, .tar.gz or .tgz archive once, refusing members that escape it.

    A marker file (`.extracted.json`) written after a complete extraction records the archive's
    name, size and modification time and `limit_per_class`; a later call with the same archive
    and limit returns at once. An interrupted extraction leaves no marker and is redone.

    Args:
        archive_path: the archive, e.g. `cifar10-train-jpg.tar.gz`.
        destination: folder to extract into (created when missing).
        limit_per_class: extract at most this many files from each folder of the archive (the
            first ones in archive order), e.g. 20 images per class for a quick test. `None`
            extracts everything.

    Returns:
        `destination` as a `Path`.

    Raises:
        FileNotFoundError: the archive does not exist.
        ValueError: the archive is not a readable tar file, or a member is an absolute path,
            climbs out with `..`, or is a link or device file.
    """
    archive_path = Path(archive_path)
    destination = Path(destination)
    if limit_per_class is not None:
        if (
            not isinstance(limit_per_class, int)
            or isinstance(limit_per_class, bool)
            or limit_per_class < 1
        ):
            raise ValueError(
                f"limit_per_class must be a positive integer or None; received {limit_per_class!r}"
            )
    if not archive_path.is_file():
        raise FileNotFoundError(f"archive {archive_path} does not exist")
    stat = archive_path.stat()
    record = {
        "archive": archive_path.name,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "limit_per_class": limit_per_class,
    }
    marker = destination / _MARKER
    if marker.is_file():
        try:
            if json.loads(marker.read_text()) == record:
                return destination
        except (OSError, ValueError):
            pass  # An unreadable marker means: extract again.
        marker.unlink()

    destination.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    try:
        with tarfile.open(archive_path, "r:*") as archive:
            for member in archive:  # Streaming: members are read in archive order.
                _check_member(member, archive_path)
                if member.isfile() and limit_per_class is not None:
                    folder = str(PurePosixPath(member.name).parent)
                    if counts.get(folder, 0) >= limit_per_class:
                        continue
                    counts[folder] = counts.get(folder, 0) + 1
                # filter="data" repeats the safety checks inside tarfile and drops odd modes.
                archive.extract(member, destination, filter="data")
    except tarfile.TarError as error:
        raise ValueError(f"cannot read archive {archive_path}: {error}") from error
    marker.write_text(json.dumps(record))
    return destination


def _check_member(member: tarfile.TarInfo, archive_path: Path) -> None:
    """Raises ValueError for a member that could write outside the destination."""
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or member.name.startswith(("/", "\\")):
        raise ValueError(
            f"archive {archive_path} holds an unsafe member {member.name!r} "
            "(absolute path or '..'); refusing to extract it"
        )
    if not (member.isfile() or member.isdir()):
        raise ValueError(
            f"archive {archive_path} holds {member.name!r}, which is a link or special file; "
            "only regular files and folders are extracted"
        )

