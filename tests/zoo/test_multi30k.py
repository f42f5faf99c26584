"""Tests of zoo.multi30k: the loader and the TFDS builder, offline.

Downloads are exercised against a local HTTP server that serves the real raw files, so the
whole download path (fetching, SHA-256 checks, reading) runs without a network.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import shutil
import socket
import threading
from pathlib import Path

import pytest

import zoo.multi30k as multi30k
from tests.conftest import modules_imported_by

REPO = Path(__file__).resolve().parents[2]
COUNTS = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}


def _first_line(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return file.readline().rstrip("\n")


@pytest.fixture
def raw_files(shared_data) -> Path:
    return shared_data / "multi30k"


@pytest.fixture
def serve(monkeypatch):
    """Serves a folder on localhost and points zoo.multi30k.RAW_URL at it."""
    servers = []

    def start(folder: Path) -> None:
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(Quiet, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        port = server.server_address[1]
        monkeypatch.setattr(multi30k, "RAW_URL", f"http://127.0.0.1:{port}/{{split}}.{{lang}}.gz")

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_load_multi30k_from_folder(raw_files):
    for split, count in COUNTS.items():
        pairs = multi30k.load_multi30k(split, data_dir=raw_files)
        assert len(pairs) == count
        assert pairs[0] == (
            _first_line(raw_files / f"{split}.en.gz"),
            _first_line(raw_files / f"{split}.de.gz"),
        )


def test_load_multi30k_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown Multi30k split 'test'"):
        multi30k.load_multi30k("test", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="absent.*not a folder"):
        multi30k.load_multi30k("val", data_dir=tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match=r"val\.en\.gz"):
        multi30k.load_multi30k("val", data_dir=tmp_path)


def test_load_multi30k_downloads_and_checks_hashes(raw_files, serve, tmp_path):
    serve(raw_files)
    pairs = multi30k.load_multi30k("val", cache_dir=tmp_path / "cache")
    assert len(pairs) == 1_014
    assert pairs == multi30k.load_multi30k("val", data_dir=raw_files)
    cached = tmp_path / "cache" / "multi30k" / "train.de.gz"
    assert cached.read_bytes() == (raw_files / "train.de.gz").read_bytes()


def test_download_rejects_a_changed_file(raw_files, serve, tmp_path):
    tampered = tmp_path / "served"
    shutil.copytree(raw_files, tampered)
    (tampered / "val.de.gz").chmod(0o644)
    (tampered / "val.de.gz").write_bytes(gzip.compress(b"Ein Hund.\n"))
    serve(tampered)
    with pytest.raises(ValueError, match="val.de.gz .* is corrupt"):
        multi30k.download_multi30k(cache_dir=tmp_path / "cache")


def test_download_failure_says_what_to_do(monkeypatch, tmp_path):
    # A port that was free a moment ago: the connection is refused at once.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(multi30k, "RAW_URL", f"http://127.0.0.1:{port}/{{split}}.{{lang}}.gz")
    expected = rf"train\.en\.gz from http://127\.0\.0\.1:{port}/.*data_dir="
    with pytest.raises(ConnectionError, match=expected):
        multi30k.download_multi30k(cache_dir=tmp_path)


def _build(builder, manual_dir=None):
    tfds = pytest.importorskip("tensorflow_datasets")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir)
    )
    return {name: split.num_examples for name, split in builder.info.splits.items()}


def _first_example(builder, split):
    example = next(iter(builder.as_dataset(split=split, as_supervised=True)))
    return tuple(value.numpy().decode("utf-8") for value in example)


def test_tfds_builder_from_manual_dir(raw_files, tmp_path):
    builder = multi30k.Multi30k(data_dir=tmp_path / "tfds")
    assert _build(builder, manual_dir=raw_files) == COUNTS
    for split in COUNTS:
        assert _first_example(builder, split) == (
            _first_line(raw_files / f"{split}.en.gz"),
            _first_line(raw_files / f"{split}.de.gz"),
        )
    # Prepared data is reused: a fresh builder reads it without any raw files.
    again = multi30k.Multi30k(data_dir=tmp_path / "tfds")
    assert again.info.splits["val"].num_examples == 1_014


def test_tfds_builder_from_raw_dir_of_plain_files(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, size in [("train", 3), ("val", 2), ("test_2016_flickr", 1)]:
        (raw / f"{split}.en").write_text(
            "".join(f"{split} sentence {i}\n" for i in range(size)), encoding="utf-8"
        )
        (raw / f"{split}.de").write_text(
            "".join(f"{split} Satz {i}\n" for i in range(size)), encoding="utf-8"
        )
    builder = multi30k.Multi30k(raw_dir=raw, data_dir=tmp_path / "tfds")
    assert _build(builder) == {"train": 3, "val": 2, "test_2016_flickr": 1}
    examples = list(builder.as_dataset(split="train", as_supervised=True))
    assert [(s.numpy().decode(), t.numpy().decode()) for s, t in examples] == [
        (f"train sentence {i}", f"train Satz {i}") for i in range(3)
    ]
    # A config can name the folder and turn the direction round.
    config = multi30k.Multi30kConfig(
        name="de-en-local", source_lang="de", target_lang="en", raw_dir=str(raw)
    )
    reverse = multi30k.Multi30k(config=config, data_dir=tmp_path / "tfds")
    assert _build(reverse) == {"train": 3, "val": 2, "test_2016_flickr": 1}
    assert _first_example(reverse, "val") == ("val Satz 0", "val sentence 0")


def test_tfds_builder_downloads_when_no_folder(raw_files, serve, tmp_path):
    serve(raw_files)
    builder = multi30k.Multi30k(data_dir=tmp_path / "tfds")
    assert _build(builder) == COUNTS
    assert _first_example(builder, "test_2016_flickr")[1] == _first_line(
        raw_files / "test_2016_flickr.de.gz"
    )


def test_tfds_builder_missing_raw_dir(tmp_path):
    builder = multi30k.Multi30k(raw_dir=tmp_path / "absent", data_dir=tmp_path / "tfds")
    with pytest.raises(FileNotFoundError, match="absent.*not a folder"):
        _build(builder)


def test_import_needs_no_tensorflow(raw_files):
    loaded = modules_imported_by(
        "import zoo.multi30k as m\n"
        f"assert len(m.load_multi30k('val', data_dir={str(raw_files)!r})) == 1014")
    assert not loaded & {"tensorflow", "tensorflow_datasets"}
