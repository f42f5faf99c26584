"""Several processes extract one archive into one folder at once, as every process of a
multi-process training job does with its `--data` archive: real OS processes (spawned), let
go together, each end with the same complete folder, no error, no partial file, and nothing
private left beside the folder."""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from zoo.training.files import archives
from zoo.training.files.archives import extract_archive
from zoo.training.files.file_store import CACHE_ENV

PROCESSES = 4
PER_CLASS = 60


def _archive(path: Path) -> dict[str, str]:
    """A .tar.gz of three class folders of files of different sizes; returns
    `{member: sha256}`."""
    contents = {}
    with tarfile.open(path, "w:gz") as tar:
        for label in ("cat", "dog", "ship"):
            for i in range(PER_CLASS):
                data = os.urandom(2_000 + 97 * i)
                name = f"train/{label}/{i:04d}.jpg"
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                contents[name] = hashlib.sha256(data).hexdigest()
    return contents


def _listing(folder: Path) -> dict[str, str]:
    """`{relative path: sha256}` of every file under `folder` but the marker."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*") if p.is_file() and p.name != archives._MARKER}


def _extract_in_child(archive: str, destination: str | None, cache: str, start,
                      results) -> None:
    """One process: waits for the others, extracts, and reports what it got at once."""
    os.environ[CACHE_ENV] = cache
    start.wait()
    try:
        folder = extract_archive(archive, destination)
    except BaseException as error:  # reported, not raised: the parent names it
        results.put(("error", f"{type(error).__name__}: {error}"))
        return
    results.put((str(folder), _listing(folder)))


def _extract_together(archive: Path, destination: Path | None, cache: Path) -> list[tuple]:
    # Plain processes with a barrier and a queue given at their start (no manager process:
    # its proxies do not pickle inside pytest-xdist's workers).
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(PROCESSES), context.Queue()
    children = [context.Process(target=_extract_in_child, args=(
        str(archive), None if destination is None else str(destination), str(cache), start,
        results)) for _ in range(PROCESSES)]
    for child in children:
        child.start()
    found = [results.get(timeout=300) for _ in children]
    for child in children:
        child.join(timeout=60)
    return found


@pytest.mark.parametrize("where", ["chosen folder", "chosen folder with an earlier extraction",
                                   "cache"])
def test_processes_extracting_one_archive_at_once_each_get_the_whole_folder(tmp_path,
                                                                            where):
    contents = _archive(tmp_path / "images.tar.gz")
    destination = None if where == "cache" else tmp_path / "run" / "data"
    if where == "chosen folder with an earlier extraction":
        # An earlier run with a per-class limit, one file changed by hand since: each file
        # the archive holds replaces its namesake (the changed one too), the rest are added.
        extract_archive(tmp_path / "images.tar.gz", destination, limit_per_class=3)
        (destination / "train" / "cat" / "0000.jpg").write_bytes(b"changed by hand")
    results = _extract_together(tmp_path / "images.tar.gz", destination, tmp_path / "cache")
    errors = [r[1] for r in results if r[0] == "error"]
    assert errors == []
    folders = {r[0] for r in results}
    assert len(folders) == 1
    folder = Path(folders.pop())
    for _, listing in results:  # what each process saw as it returned
        assert listing == contents
    assert _listing(folder) == contents
    assert archives._holds(folder, {"archive": "images.tar.gz",
                                    "sha256": archives.archive_sha256(tmp_path /
                                                                      "images.tar.gz"),
                                    "limit_per_class": None})
    assert [p.name for p in folder.parent.iterdir() if ".partial-" in p.name] == []


def test_a_killed_extractions_private_folder_is_removed_by_the_next_one(tmp_path):
    _archive(tmp_path / "images.tar.gz")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / "run" / f".data.partial-{dead.pid}-0123456789ab" / "train"
    left.mkdir(parents=True)
    live = tmp_path / "run" / f".data.partial-{os.getppid()}-0123456789ab"
    live.mkdir()
    extract_archive(tmp_path / "images.tar.gz", tmp_path / "run" / "data")
    assert {p.name for p in (tmp_path / "run").iterdir()} == {"data", live.name}
