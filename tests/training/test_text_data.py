"""Tests of training.text_data: reading real Multi30k and Anki files, and bad files."""

from __future__ import annotations

import gzip
import zipfile

import pytest

from zoo.training.text_data import (
    read_lines,
    read_multi30k,
    read_parallel,
    read_tsv_pairs,
)

COUNTS = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}


def _first_line(path) -> str:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return file.readline().rstrip("\n")


def test_read_lines_real_gzip(shared_data):
    path = shared_data / "multi30k" / "val.de.gz"
    lines = read_lines(path)
    assert len(lines) == 1_014
    assert lines[0] == _first_line(path)
    with gzip.open(path, "rt", encoding="utf-8") as file:
        assert lines == file.read().split("\n")[:-1]


def test_read_lines_plain_gzip_and_line_endings(tmp_path):
    content = "first line\r\nsecond\u2028still second\nthird\xa0line\n".encode()
    (tmp_path / "plain.txt").write_bytes(content)
    # A gzip file is recognised by its bytes, whatever its name.
    (tmp_path / "packed.txt").write_bytes(gzip.compress(content))
    expected = ["first line", "second\u2028still second", "third\xa0line"]
    assert read_lines(tmp_path / "plain.txt") == expected
    assert read_lines(tmp_path / "packed.txt") == expected
    (tmp_path / "no_final_newline.txt").write_bytes(b"a\nb")
    assert read_lines(tmp_path / "no_final_newline.txt") == ["a", "b"]
    (tmp_path / "empty.txt").write_bytes(b"")
    assert read_lines(tmp_path / "empty.txt") == []
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    assert read_lines(tmp_path / "bom.txt") == ["hello"]


def test_read_lines_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.de.gz"):
        read_lines(tmp_path / "nowhere.de.gz")


def test_read_lines_invalid_utf8_names_path_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("one\ntwo\nZwei M\xe4nner\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt', line 3: not valid UTF-8.*0xe4"):
        read_lines(path)
    packed = tmp_path / "latin1.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(ValueError, match=r"latin1\.gz', line 3"):
        read_lines(packed)


def test_read_lines_corrupt_gzip(tmp_path):
    path = tmp_path / "broken.gz"
    path.write_bytes(gzip.compress(b"hello\n" * 100)[:30])
    with pytest.raises(ValueError, match="broken.gz.*gzip"):
        read_lines(path)


def test_read_parallel_real_and_misaligned(shared_data, tmp_path):
    folder = shared_data / "multi30k"
    pairs = read_parallel(folder / "val.en.gz", folder / "val.de.gz")
    assert len(pairs) == 1_014
    assert pairs[0] == (_first_line(folder / "val.en.gz"), _first_line(folder / "val.de.gz"))
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.en' has 3 lines but .*a\.de' has 2"):
        read_parallel(tmp_path / "a.en", tmp_path / "a.de")


@pytest.mark.parametrize("split", sorted(COUNTS))
def test_read_multi30k_real_counts(shared_data, split):
    folder = shared_data / "multi30k"
    pairs = read_multi30k(folder, split)
    assert len(pairs) == COUNTS[split]
    assert pairs[0] == (
        _first_line(folder / f"{split}.en.gz"),
        _first_line(folder / f"{split}.de.gz"),
    )
    assert all(source and target for source, target in pairs)


def test_read_multi30k_other_direction_and_plain_files(shared_data, tmp_path):
    reverse = read_multi30k(shared_data / "multi30k", "val", source_lang="de", target_lang="en")
    forward = read_multi30k(shared_data / "multi30k", "val")
    assert reverse == [(target, source) for source, target in forward]
    (tmp_path / "val.en").write_text("A dog.\nA cat.\n", encoding="utf-8")
    (tmp_path / "val.de").write_text("Ein Hund.\nEine Katze.\n", encoding="utf-8")
    assert read_multi30k(tmp_path, "val") == [("A dog.", "Ein Hund."), ("A cat.", "Eine Katze.")]


def test_read_multi30k_bad_split_and_missing_files(tmp_path):
    with pytest.raises(ValueError, match="unknown Multi30k split 'dev'.*'val'"):
        read_multi30k(tmp_path, "dev")
    (tmp_path / "val.en").write_text("A dog.\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"language 'de'.*val\.de\.gz.*val\.de'"):
        read_multi30k(tmp_path, "val")


def test_read_tsv_pairs_from_real_anki_zip(shared_data):
    path = shared_data / "anki" / "spa-eng.zip"
    pairs = read_tsv_pairs(path, member="spa-eng/spa.txt")
    assert len(pairs) == 118_964
    with zipfile.ZipFile(path) as archive:
        first = archive.read("spa-eng/spa.txt").decode("utf-8").split("\n")[0]
    assert pairs[0] == tuple(first.split("\t")[:2])
    swapped = read_tsv_pairs(path, source_column=1, target_column=0, member="spa-eng/spa.txt")
    assert swapped[0] == (pairs[0][1], pairs[0][0])
    with pytest.raises(ValueError, match=r"holds 2 files.*member="):
        read_tsv_pairs(path)
    with pytest.raises(FileNotFoundError, match="spa-eng/eng.txt.*spa-eng/spa.txt"):
        read_tsv_pairs(path, member="spa-eng/eng.txt")


def test_read_tsv_pairs_plain_files_and_bad_rows(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("Go.\tVe.\tCC-BY\n\nHi.\tHola.\n", encoding="utf-8")
    assert read_tsv_pairs(path) == [("Go.", "Ve."), ("Hi.", "Hola.")]
    single = tmp_path / "single.zip"
    with zipfile.ZipFile(single, "w") as archive:
        archive.write(path, "data/pairs.tsv")
    assert read_tsv_pairs(single) == [("Go.", "Ve."), ("Hi.", "Hola.")]
    with pytest.raises(ValueError, match="not a .zip archive"):
        read_tsv_pairs(path, member="pairs.tsv")
    with pytest.raises(ValueError, match=r"pairs\.tsv', line 3: expected at least 3 .* got 2"):
        read_tsv_pairs(path, target_column=2)
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        read_tsv_pairs(tmp_path / "missing.tsv")
