"""GPT-2's byte-level byte-pair encoding, from a checkpoint's own `vocab.json` and `merges.txt`.

Byte-level BPE (Radford et al. 2019, section 2.2): a text's UTF-8 bytes are each mapped to a
printable character (`byte_to_unicode`), the text is cut into words by GPT-2's pattern
(contractions, letters, digits, other symbols, each with the space before it), and the merges
join the characters of each word, in their rank order, into vocabulary pieces. Every text
encodes (no unknown piece), and ids decode to the exact bytes.

The encoding itself is keras-hub's `BytePairTokenizer`, which runs on TensorFlow Text ops, so the
same object tokenizes in Python, in `tf.data` and inside an exported graph; this module adds
what keras-hub's leaves out: the checks of the zoo's tokenizers, decoding that is exact to the
byte (keras-hub's `detokenize` goes through a graph of strings), a streaming decoder for
`zoo generate`, and the files kept inside a `.keras` model (`save`, `from_folder`).

Called eagerly on Python strings, keras-hub's tokenizer gives Hugging Face's `GPT2Tokenizer`'s
ids on every text tested (tests/zoo/text/test_byte_pair.py); inside a graph, its TF Text regex
ops end a text at a NUL byte (U+0000), which the Python path encodes.
"""

from __future__ import annotations

import codecs
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoo.text.base import _as_strings
from zoo.text.bpe_files import (check_vocabulary, merge_rules, read_bpe_files,
                                write_bpe_files)
from zoo.training.errors import UserError

END_OF_TEXT = "<|endoftext|>"


@functools.cache
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's table of the 256 byte values to printable characters: printable Latin-1 bytes
    stand for themselves, the others (controls, space) for the characters from U+0100 up, so
    that a piece never holds whitespace or a control character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


class BytePairTokenizer:
    """GPT-2's byte-level BPE tokenizer: ids for texts, texts for ids, in Python and in a graph.

    GPT-2 has no padding, start or unknown piece: `<|endoftext|>` ends (and starts) a text
    and pads a batch, as in Hugging Face's models.

    Args:
        vocabulary: piece -> id (the checkpoint's `vocab.json`).
        merges: the merge rules in rank order, each "left right" (`merges.txt`, its
            `#version` line allowed).
        end_token: the piece that ends a text; it is never split when it occurs in a text.

    Example:
    >>> vocabulary = {c: i for i, c in enumerate(sorted(set(byte_to_unicode().values())))}
    >>> vocabulary.update({"ĠĠ": 256, END_OF_TEXT: 257})
    >>> tokenizer = BytePairTokenizer(vocabulary, ["Ġ Ġ"])
    >>> ids = tokenizer.encode(["a  b"])
    >>> len(ids[0]), tokenizer.decode(ids)
    (3, ['a  b'])
    """

    def __init__(self, vocabulary: dict[str, int], merges: Sequence[str],
                 end_token: str = END_OF_TEXT) -> None:
        check_vocabulary(vocabulary)
        if end_token not in vocabulary:
            raise UserError(f"the vocabulary has no end token {end_token!r}")
        self.vocabulary = dict(vocabulary)
        self.merges = merge_rules((str(m).rstrip("\n") for m in merges), self.vocabulary)
        self.end_token = end_token
        self._pieces = {i: piece for piece, i in self.vocabulary.items()}
        self._bytes = {c: b for b, c in byte_to_unicode().items()}
        self._layer: Any = None

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> "BytePairTokenizer":
        """The tokenizer of a folder holding `vocab.json` and `merges.txt`.

        Raises:
            FileNotFoundError: a file is missing (the message names it).
            UserError: a file is damaged.
        """
        return cls(*read_bpe_files(Path(folder), "the byte-pair tokenizer"))

    def save(self, folder: str | os.PathLike) -> None:
        """Writes `vocab.json` and `merges.txt` into `folder` (what `from_folder` reads)."""
        write_bpe_files(Path(folder), self.vocabulary, self.merges)

    vocabulary_size = property(lambda self: len(self.vocabulary), doc="Number of pieces.")
    end_id = property(lambda self: self.vocabulary[self.end_token],
                      doc="The id that ends a text (and pads a batch).")
    pad_id = end_id

    def __repr__(self) -> str:
        return f"BytePairTokenizer(vocabulary_size={self.vocabulary_size})"

    @property
    def layer(self) -> Any:
        """keras-hub's `BytePairTokenizer` of this vocabulary (TensorFlow Text ops): call it
        on a string tensor, in `tf.data` or a `tf.function`, for ragged int32 ids."""
        if self._layer is None:
            from keras_hub.tokenizers import BytePairTokenizer as KerasHubBytePair

            self._layer = KerasHubBytePair(self.vocabulary, self.merges,
                                           unsplittable_tokens=[self.end_token])
        return self._layer

    def encode(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """The ids of each text (no end id added).

        Raises:
            TypeError: `texts` is one string, or holds something that is not text.
            UserError: a bytes text is not UTF-8.
        """
        strings = _as_strings(texts)
        if not strings:
            return []
        ids = self.layer.tokenize(strings)
        if hasattr(ids, "to_list"):  # a ragged tensor
            ids = ids.to_list()
        return [[int(i) for i in row] for row in ids]

    def _check_ids(self, ids: Sequence[int], index: int) -> list[int]:
        out = []
        for token in ids:
            token = int(token)
            if not 0 <= token < self.vocabulary_size:
                raise UserError(f"id {token} in sequence {index} is outside the vocabulary "
                                f"[0, {self.vocabulary_size})")
            out.append(token)
        return out

    def piece_bytes(self, token_id: int) -> bytes:
        """The bytes one id stands for (the end token's own text for the end id)."""
        piece = self._pieces[int(token_id)]
        if piece == self.end_token:
            return piece.encode("utf-8")
        return bytes(self._bytes[c] for c in piece)

    def decode(self, ids: Any, skip_end: bool = True) -> list[str]:
        """The text of each id sequence: exact bytes, decoded as UTF-8 (a sequence cut
        inside a character ends with U+FFFD, as Hugging Face's `decode` does).

        Args:
            ids: a batch of id sequences (a list of lists, or a 2-D array).
            skip_end: drop the end ids (padding, ends of text).
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        texts = []
        for index, sequence in enumerate(ids):
            if isinstance(sequence, int):
                raise UserError("ids must be a batch of id sequences (a list of lists); got "
                                "a flat list of ints: wrap one sequence as [ids]")
            kept = [i for i in self._check_ids(sequence, index)
                    if not (skip_end and i == self.end_id)]
            texts.append(b"".join(self.piece_bytes(i) for i in kept)
                         .decode("utf-8", errors="replace"))
        return texts

    def stream_decoder(self) -> "StreamDecoder":
        """A decoder that takes ids one at a time and returns the text they complete."""
        return StreamDecoder(self)


class StreamDecoder:
    """Decodes ids as they come: a character split over pieces (an emoji's four bytes, say)
    is returned once its last byte has come."""

    def __init__(self, tokenizer: BytePairTokenizer) -> None:
        self.tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token_id: int) -> str:
        """The text that `token_id` completes (maybe empty)."""
        return self._utf8.decode(self.tokenizer.piece_bytes(token_id))

    def finish(self) -> str:
        """What is left (U+FFFD for bytes of an unfinished character)."""
        return self._utf8.decode(b"", final=True)
