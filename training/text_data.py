"""Parallel text for sequence-to-sequence training: reading corpora into sentence pairs.

`read_lines`, `read_parallel`, `read_tsv_pairs` and `read_multi30k` return Python strings;
no TensorFlow is needed. Turning token ids into teacher-forcing batches is
`zoo.training.text_batches`'s.
"""

from __future__ import annotations

import gzip
import os
import zipfile
from pathlib import Path

from zoo.training.errors import UserError

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")

Pairs = list[tuple[str, str]]


# --- reading text -------------------------------------------------------------------------


def read_lines(path: str | os.PathLike) -> list[str]:
    """Reads a UTF-8 text file, plain or gzip-compressed, into one string per line.

    Lines are split on "\\n" only (a trailing "\\r" is dropped), never on the other Unicode
    line breaks, so line i of two aligned files stays the same sentence pair.

    Args:
        path: a text file; gzip is recognised by its magic bytes, not by its name.

    Returns:
        The lines without their line endings; an empty file gives [].

    Raises:
        FileNotFoundError: `path` does not exist.
        ValueError: the file is not valid UTF-8 (the message gives the line) or is a
            corrupt gzip file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"text file {str(path)!r} does not exist")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise UserError(f"{str(path)!r} is not a readable gzip file: {error}") from None
    return _split_lines(data, str(path))


def _split_lines(data: bytes, name: str) -> list[str]:
    """Decodes UTF-8 bytes and splits them into lines; `name` is used in error messages."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_number = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise UserError(
            f"{name!r}, line {line_number}: not valid UTF-8 (byte "
            f"{data[error.start]:#04x} at byte column {column}: {error.reason})"
        ) from None
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel(source_path: str | os.PathLike, target_path: str | os.PathLike) -> Pairs:
    """Reads two line-aligned files into (source, target) pairs.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: the files have different numbers of lines, or are not UTF-8.
    """
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise UserError(
            f"parallel files are not aligned: {os.fspath(source_path)!r} has {len(sources)} "
            f"lines but {os.fspath(target_path)!r} has {len(targets)}"
        )
    return list(zip(sources, targets))


def read_tsv_pairs(
    path: str | os.PathLike,
    source_column: int = 0,
    target_column: int = 1,
    member: str | None = None,
) -> Pairs:
    """Reads sentence pairs from a tab-separated file, or from a file inside a .zip archive.

    Blank lines are skipped; extra columns (such as the attribution column of Anki exports)
    are ignored.

    Args:
        path: a .tsv/.txt file (plain or gzip), or a .zip archive.
        source_column: index of the source column.
        target_column: index of the target column.
        member: the file inside the archive, e.g. "spa-eng/spa.txt"; may be left out when
            the archive holds a single file.

    Returns:
        (source, target) pairs in file order.

    Example (an Anki export: `read_tsv_pairs("spa-eng.zip", member="spa-eng/spa.txt")`;
    here a file of two of its lines, with their attribution column):
    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()  # deleted with the object
    >>> path = Path(folder.name) / "spa.txt"
    >>> _ = path.write_text("Go.\\tVe.\\tCC-BY 2.0 (France)\\n\\n"
    ...                     "Hi.\\tHola.\\tCC-BY 2.0 (France)\\n", encoding="utf-8")
    >>> read_tsv_pairs(path)
    [('Go.', 'Ve.'), ('Hi.', 'Hola.')]

    Raises:
        FileNotFoundError: `path` does not exist, or `member` is not in the archive.
        ValueError: a line has too few columns, or the text is not UTF-8.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file {str(path)!r} does not exist")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            files = [info.filename for info in archive.infolist() if not info.is_dir()]
            if member is None:
                if len(files) != 1:
                    raise UserError(
                        f"{str(path)!r} holds {len(files)} files {files}; pass member= to "
                        "choose one"
                    )
                member = files[0]
            if member not in files:
                raise FileNotFoundError(
                    f"{member!r} is not in the archive {str(path)!r}; it holds {files}"
                )
            name = f"{path}:{member}"
            lines = _split_lines(archive.read(member), name)
    elif member is not None:
        raise UserError(f"member={member!r} was given but {str(path)!r} is not a .zip archive")
    else:
        name, lines = str(path), read_lines(path)
    needed = max(source_column, target_column) + 1
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < needed:
            raise UserError(
                f"{name!r}, line {number}: expected at least {needed} tab-separated columns "
                f"(source_column={source_column}, target_column={target_column}), got "
                f"{len(fields)}"
            )
        pairs.append((fields[source_column], fields[target_column]))
    return pairs


def read_multi30k(
    directory: str | os.PathLike,
    split: str,
    source_lang: str = "en",
    target_lang: str = "de",
) -> Pairs:
    """Reads one split of Multi30k (task 1) from its raw files `{split}.{lang}[.gz]`.

    Args:
        directory: folder holding e.g. train.en.gz and train.de.gz (the layout of
            data/task1/raw in the multi30k/dataset repository).
        split: one of "train" (29,000 pairs), "val" (1,014) or "test_2016_flickr" (1,000).
        source_lang: language code of the source side ("en", "de", "fr", "cs").
        target_lang: language code of the target side.

    Returns:
        (source, target) pairs.

    Raises:
        ValueError: `split` is unknown or the two files are not aligned.
        FileNotFoundError: a language file is missing.
    """
    if split not in MULTI30K_SPLITS:
        raise UserError(f"unknown Multi30k split {split!r}; expected one of {MULTI30K_SPLITS}")
    directory = Path(directory)
    paths = []
    for lang in (source_lang, target_lang):
        candidates = [directory / f"{split}.{lang}.gz", directory / f"{split}.{lang}"]
        found = [candidate for candidate in candidates if candidate.is_file()]
        if not found:
            raise FileNotFoundError(
                f"Multi30k file for split {split!r}, language {lang!r} not found: neither "
                f"{str(candidates[0])!r} nor {str(candidates[1])!r} exists"
            )
        paths.append(found[0])
    return read_parallel(*paths)
