"""Archives extracted once into a cache keyed by their content; a per-class limit reads only
as far as it needs."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from zoo.training.files import archives
from zoo.training.files.archives import archive_sha256, extract_archive
from zoo.training.files.file_store import CACHE_ENV, cache_dir


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _archive(path: Path, per_class: int = 5) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for label in ("cat", "dog"):
            for i in range(per_class):
                data = f"{label}{i}".encode()
                info = tarfile.TarInfo(f"train/{label}/{i:04d}.jpg")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def test_cache_dir_follows_the_environment(private_cache, monkeypatch, tmp_path):
    assert cache_dir() == private_cache
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "attention-zoo"


def test_without_destination_the_archive_goes_to_the_cache_once(private_cache, tmp_path):
    archive = _archive(tmp_path / "small.tar.gz")
    digest = archive_sha256(archive)
    folder = extract_archive(archive)
    assert folder == private_cache / "archives" / digest[:16] / "all"
    assert len(list((folder / "train" / "dog").iterdir())) == 5
    removed = folder / "train" / "cat" / "0000.jpg"
    removed.unlink()
    assert extract_archive(archive) == folder and not removed.exists(), "extracted again"

    limited = extract_archive(archive, limit_per_class=2)
    assert limited == private_cache / "archives" / digest[:16] / "first-2-per-class"
    assert sorted(p.name for p in (limited / "train" / "cat").iterdir()) == [
        "0000.jpg", "0001.jpg"]
    assert not list(limited.parent.glob(".*partial*")), "no partial folder is left behind"


def test_the_key_is_the_content_not_the_name_or_time(tmp_path):
    archive = _archive(tmp_path / "a.tar.gz")
    folder = extract_archive(archive)
    copy = tmp_path / "elsewhere" / "b.tar.gz"
    copy.parent.mkdir()
    shutil.copy(archive, copy)
    os.utime(copy, (1, 1))
    assert extract_archive(copy) == folder

    out = extract_archive(archive, tmp_path / "out", limit_per_class=1)
    (out / "train" / "cat" / "0000.jpg").unlink()
    os.utime(archive, (2, 2))  # touched, same bytes: the marker still holds
    extract_archive(archive, tmp_path / "out", limit_per_class=1)
    assert not (out / "train" / "cat" / "0000.jpg").exists()


def test_a_limit_reads_only_as_far_as_its_last_member(tmp_path, monkeypatch):
    archive = _archive(tmp_path / "small.tar.gz")
    checked: list[str] = []
    check = archives._check_member
    monkeypatch.setattr(archives, "_check_member",
                        lambda member, path: (checked.append(member.name), check(member, path)))
    extract_archive(archive, tmp_path / "first", limit_per_class=2)
    assert len(checked) == 10, "the first pass reads everything and records the members"
    checked.clear()
    out = extract_archive(archive, tmp_path / "second", limit_per_class=2)
    assert checked == [f"train/cat/{i:04d}.jpg" for i in range(5)] + [
        "train/dog/0000.jpg", "train/dog/0001.jpg"]
    assert sorted(p.name for p in (out / "train" / "dog").iterdir()) == ["0000.jpg", "0001.jpg"]


def test_a_member_list_of_other_content_is_ignored(tmp_path):
    archive = _archive(tmp_path / "small.tar.gz")
    extract_archive(archive, tmp_path / "first")
    members = archives.cached_archive_dir(archive) / "members.json"
    members.write_text('{"sha256": "0", "files": ["train/cat/0000.jpg"]}')
    out = extract_archive(archive, tmp_path / "second", limit_per_class=3)
    assert len(list((out / "train" / "dog").iterdir())) == 3


def test_unsafe_members_are_still_refused_into_the_cache(tmp_path):
    path = tmp_path / "bad.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match="unsafe member"):
        extract_archive(path)
    with pytest.raises(ValueError, match="unsafe member"):
        extract_archive(path, limit_per_class=1)
    folder = archives.cached_archive_dir(path)
    assert not folder.exists() or not list(folder.iterdir()), "nothing half-extracted stays"


def test_an_extraction_another_process_finished_first_is_kept_not_replaced(tmp_path,
                                                                          monkeypatch):
    """Two runs (or test workers) extract the same archive at once: the one that finishes
    second keeps the first one's folder, which may already be read, and drops its own."""
    archive = _archive(tmp_path / "small.tar.gz")
    extract = archives._extract
    theirs: list[Path] = []

    def finished_elsewhere_meanwhile(archive_path, target, *args):
        destination = target.parent / "all"
        extract(archive_path, destination, *args)  # the other process's whole extraction
        marker = {"archive": archive.name, "sha256": archive_sha256(archive),
                  "limit_per_class": None}
        (destination / archives._MARKER).write_text(json.dumps(marker))
        (destination / "in-use").write_text("read by the other process")
        theirs.append(destination)
        extract(archive_path, target, *args)

    monkeypatch.setattr(archives, "_extract", finished_elsewhere_meanwhile)
    folder = extract_archive(archive)
    assert theirs == [folder]
    assert (folder / "in-use").exists(), "the other process's folder was replaced"
    assert len(list((folder / "train" / "cat").iterdir())) == 5
    assert not list(folder.parent.glob(".*partial*")), "no partial folder is left behind"
