"""The interface a `Translator` asks of its tokenizer (`Tokenizer`), and the checks, padding,
truncation and decoding every tokenizer shares: `zoo.text.tokenizer.SubwordTokenizer` (the
zoo's own) and `zoo.text.marian.MarianTokenizer` (converted OPUS-MT) build on it."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np

from zoo.training.errors import UserError
from zoo.training.files.file_store import write_atomically
from zoo.layers.validation import is_int

PAD_PIECE, UNKNOWN_PIECE, START_PIECE, END_PIECE = "<pad>", "<unk>", "<s>", "</s>"


class Tokenizer:
    """What a `Translator` asks of its tokenizer: ids for texts and texts for ids.

    A subclass sets the special ids and the vocabulary size in its `__init__` (by calling
    `_set_ids`) and supplies four small pieces: `_encode_texts` (the piece ids of each
    text), `_decode_ids` (the text of the ids kept by `decode`), `_piece` (one id's piece)
    and `_serialized` (the bytes `save` writes). Everything else, and every check, is here.
    """

    _skipped_ids: frozenset[int] = frozenset()  # ids `decode` drops (besides the end id)

    def _set_ids(self, vocabulary_size: int, pad: int, unknown: int, start: int,
                 end: int) -> None:
        self._vocabulary_size = vocabulary_size
        self._pad_id, self._unknown_id, self._start_id, self._end_id = pad, unknown, start, end

    vocabulary_size = property(lambda self: self._vocabulary_size, doc="Number of pieces.")
    pad_id = property(lambda self: self._pad_id, doc="The id that pads a batch.")
    unknown_id = property(lambda self: self._unknown_id, doc="The id of an unknown piece.")
    start_id = property(lambda self: self._start_id, doc="The id that starts a target.")
    end_id = property(lambda self: self._end_id, doc="The id that ends a sequence.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocabulary_size={self.vocabulary_size})"

    def _encode_texts(self, texts: list[str]) -> list[list[int]]:
        raise NotImplementedError

    def _encode_target_texts(self, texts: list[str]) -> list[list[int]]:
        """The piece ids of target-side texts: the same as the sources' for one joint model."""
        return self._encode_texts(texts)

    def _decode_ids(self, ids: list[int]) -> str:
        raise NotImplementedError

    def _piece(self, token_id: int) -> str:
        raise NotImplementedError

    def _serialized(self) -> bytes:
        raise NotImplementedError

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> None:
        """Writes the tokenizer to one file, which `SubwordTokenizer.from_file` reads back.

        Raises:
            FileExistsError: `path` exists and `overwrite` is False.
        """
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(
                f"{os.fspath(path)!r} already exists; pass overwrite=True to replace it"
            )
        # Renamed into place whole: never through a link, never truncating a file that has
        # other hard links (they keep the old content).
        data = self._serialized()
        write_atomically(path, lambda temporary: temporary.write_bytes(data))

    # --- Python path --------------------------------------------------------------------

    def encode(
        self,
        texts: Sequence[str | bytes],
        max_length: int | None = None,
        add_start: bool = False,
        add_end: bool = True,
        target: bool = False,
    ) -> list[list[int]]:
        """Encodes each text to a list of piece ids.

        Args:
            texts: a list of strings (bytes must be UTF-8).
            max_length: when given, longer results are cut to `max_length` ids, the start
                and end ids kept; a warning gives the lengths.
            add_start: put the start id first.
            add_end: put the end id last.
            target: the texts are target-language sentences (the references a model learns
                to write): a tokenizer with a model per side (OPUS-MT's `target.spm`) cuts
                them with its target model; one joint model cuts both sides alike.

        Returns:
            One list of ids per text; an empty text gives `[end_id]` (or `[]`).

        Raises:
            TypeError: `texts` is a single string, or holds something that is not text.
            ValueError: a bytes text is not valid UTF-8, or `max_length` leaves no room.
        """
        strings = _as_strings(texts)
        specials = int(add_start) + int(add_end)
        if max_length is not None and (not is_int(max_length) or max_length <= specials):
            raise UserError(
                f"max_length must be an int > {specials} (room for the start/end ids and one "
                f"piece), got {max_length!r}"
            )
        bodies = (self._encode_target_texts if target else self._encode_texts)(strings)
        prefix = [self.start_id] if add_start else []
        suffix = [self.end_id] if add_end else []
        encoded = [prefix + body + suffix for body in bodies]
        if max_length is None:
            return encoded
        too_long = [len(ids) for ids in encoded if len(ids) > max_length]
        if too_long:
            warnings.warn(
                f"{len(too_long)} of {len(encoded)} texts encode to more than max_length="
                f"{max_length} ids (longest: {max(too_long)}; lengths: {too_long[:10]}"
                f"{' ...' if len(too_long) > 10 else ''}); they are truncated to {max_length}",
                stacklevel=2,
            )
            budget = max_length - specials
            encoded = [
                ids if len(ids) <= max_length else prefix + body[:budget] + suffix
                for ids, body in zip(encoded, bodies)
            ]
        return encoded

    def encode_batch_padded(
        self,
        texts: Sequence[str | bytes],
        max_length: int | None = None,
        add_start: bool = False,
        add_end: bool = True,
    ) -> np.ndarray:
        """Encodes texts into one int32 array padded with `pad_id`.

        Args: as for `encode`.

        Returns:
            Array of shape (len(texts), max_length) when `max_length` is given, else
            (len(texts), longest encoding).
        """
        encoded = self.encode(texts, max_length, add_start=add_start, add_end=add_end)
        if max_length is not None:
            width = max_length
        else:
            width = max((len(ids) for ids in encoded), default=0)
        batch = np.full((len(encoded), width), self.pad_id, dtype=np.int32)
        for row, ids in enumerate(encoded):
            batch[row, : len(ids)] = ids
        return batch

    def decode(self, ids: Sequence[Sequence[int]] | np.ndarray) -> list[str]:
        """Decodes a batch of id sequences to texts.

        Each sequence is read up to its first end id; the subclass's special ids (pad and
        start for `SubwordTokenizer`) are skipped, so both `encode` output and padded model
        output decode cleanly.

        Args:
            ids: a list of id lists, or a 2-D integer array (batch, length).

        Returns:
            One string per sequence.

        Raises:
            ValueError: `ids` is not a batch of sequences, or holds an id outside the
                vocabulary.
        """
        if isinstance(ids, np.ndarray) or hasattr(ids, "shape"):
            ids = np.asarray(ids)
            if ids.ndim != 2:
                raise UserError(
                    f"ids must be 2-D (batch, length), got an array of shape {ids.shape}"
                )
            if ids.size and not np.issubdtype(ids.dtype, np.integer):
                raise UserError(f"ids must be integers, got dtype {ids.dtype}")
            ids = ids.tolist()
        texts = []
        for index, sequence in enumerate(ids):
            if isinstance(sequence, (int, np.integer)):
                raise UserError(
                    "ids must be a batch of id sequences (a list of lists); got a flat list "
                    "of ints: wrap one sequence as [ids]"
                )
            kept = []
            for token in sequence:
                token = int(token)
                if token == self.end_id:
                    break
                if not 0 <= token < self.vocabulary_size:
                    raise UserError(
                        f"id {token} in sequence {index} is outside the vocabulary "
                        f"[0, {self.vocabulary_size})"
                    )
                if token not in self._skipped_ids:
                    kept.append(token)
            texts.append(self._decode_ids(kept))
        return texts

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id (spaces shown as U+2581), e.g. for attention plots."""
        if not 0 <= int(token_id) < self.vocabulary_size:
            raise UserError(f"id {token_id} is outside the vocabulary [0, {self.vocabulary_size})")
        return self._piece(int(token_id))


def _as_strings(texts: Sequence[str | bytes]) -> list[str]:
    """Checks a batch of texts and decodes bytes as strict UTF-8."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"texts must be a list of strings, got a single {type(texts).__name__}; "
            "wrap it as [text]"
        )
    strings = []
    for index, text in enumerate(texts):
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as error:
                raise UserError(
                    f"text {index} is not valid UTF-8: byte {text[error.start]:#04x} at "
                    f"position {error.start} ({error.reason})"
                ) from None
        elif not isinstance(text, str):
            raise TypeError(f"text {index} is a {type(text).__name__}, expected str or bytes")
        strings.append(text)
    return strings
