"""Reading a stored tokenizer of either kind, as a translator keeps it."""

from __future__ import annotations

import os

from zoo.text.marian import MarianTokenizer
from zoo.text.tokenizer import ZIP_MAGIC, SubwordTokenizer, Tokenizer


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Reads a file written by `SubwordTokenizer.save` (a SentencePiece `.model` file) or by
    `MarianTokenizer.save` (a zip archive): a translator's stored tokenizer, whichever kind.

    Raises:
        FileNotFoundError: if `path` is not a file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"tokenizer model file {os.fspath(path)!r} does not exist")
    with open(path, "rb") as file:
        data = file.read()
    if data.startswith(ZIP_MAGIC):
        return MarianTokenizer.from_bytes(data)
    return SubwordTokenizer(data)
