"""The translator's tokenizers: the `Tokenizer` interface and the zoo's own subword one.

The translator shares one vocabulary between English and German (as in "Attention Is All You
Need", section 5.1), so one `SubwordTokenizer` encodes both sides. It has two faces over the
same serialized SentencePiece model:

- a Python path (`encode`, `encode_batch_padded`, `decode`) that needs only `sentencepiece`
  and numpy, for training input pipelines on backends without TensorFlow;
- a graph path (`to_keras_hub`) that returns a `keras_hub.tokenizers.SentencePieceTokenizer`
  built from the same proto, for tokenization inside an exported SavedModel.

Special ids are fixed by `train`: pad 0, unknown 1, start 2, end 3.

`Tokenizer` holds what every tokenizer of a `Translator` shares (checking texts, padding,
truncating, decoding up to the end id, saving); `zoo.text.marian.MarianTokenizer`, for
converted OPUS-MT translators, is the other one.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import sentencepiece

from zoo.training.text_batches import END_ID, PAD_ID, START_ID, UNKNOWN_ID
from zoo.errors import UserError
from zoo.layers.validation import positive_int

PAD_PIECE, UNKNOWN_PIECE, START_PIECE, END_PIECE = "<pad>", "<unk>", "<s>", "</s>"
# A `MarianTokenizer.save` file is a zip archive; a SentencePiece model is a protobuf.
ZIP_MAGIC = b"PK\x03\x04"


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
        with open(path, "wb") as file:
            file.write(self._serialized())

    # --- Python path --------------------------------------------------------------------

    def encode(
        self,
        texts: Sequence[str | bytes],
        max_length: int | None = None,
        add_start: bool = False,
        add_end: bool = True,
    ) -> list[list[int]]:
        """Encodes each text to a list of piece ids.

        Args:
            texts: a list of strings (bytes must be UTF-8).
            max_length: when given, longer results are cut to `max_length` ids, the start
                and end ids kept; a warning gives the lengths.
            add_start: put the start id first.
            add_end: put the end id last.

        Returns:
            One list of ids per text; an empty text gives `[end_id]` (or `[]`).

        Raises:
            TypeError: `texts` is a single string, or holds something that is not text.
            ValueError: a bytes text is not valid UTF-8, or `max_length` leaves no room.
        """
        strings = _as_strings(texts)
        specials = int(add_start) + int(add_end)
        if max_length is not None and (not isinstance(max_length, int) or max_length <= specials):
            raise UserError(
                f"max_length must be an int > {specials} (room for the start/end ids and one "
                f"piece), got {max_length!r}"
            )
        bodies = self._encode_texts(strings)
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


class SubwordTokenizer(Tokenizer):
    """A SentencePiece subword tokenizer with pad, unknown, start and end ids.

    Args:
        proto: the serialized SentencePiece model (`ModelProto` bytes), as returned by
            `SubwordTokenizer.train(...).proto` or read from a `.model` file.

    Example (a real vocabulary has thousands of pieces, trained on a corpus):
    >>> sentences = ["A dog runs.", "A cat sleeps.", "Two dogs run in the snow.", "The cat runs."]
    >>> tokenizer = SubwordTokenizer.train(sentences, vocabulary_size=32)
    >>> ids = tokenizer.encode(["A dog runs."])
    >>> ids[0][-1] == tokenizer.end_id
    True
    >>> tokenizer.decode(ids)
    ['A dog runs.']
    """

    def __init__(self, proto: bytes):
        if not isinstance(proto, (bytes, bytearray)):
            raise TypeError(
                f"proto must be the serialized SentencePiece model as bytes, got "
                f"{type(proto).__name__}; use SubwordTokenizer.from_file(path) for a file"
            )
        self._proto = bytes(proto)
        try:
            self._processor = sentencepiece.SentencePieceProcessor(model_proto=self._proto)
        except RuntimeError as error:
            raise UserError(
                f"proto ({len(self._proto)} bytes) is not a valid SentencePiece model: {error}"
            ) from None
        processor = self._processor
        ids = {"pad": processor.pad_id(), "unknown": processor.unk_id(),
               "start": processor.bos_id(), "end": processor.eos_id()}
        missing = [name for name, value in ids.items() if value < 0]
        if missing:
            raise UserError(
                f"the SentencePiece model has no {', '.join(missing)} id; expected pad, "
                "unknown, start and end ids (train it with SubwordTokenizer.train)"
            )
        self._set_ids(processor.get_piece_size(), **ids)
        self._skipped_ids = frozenset((self.pad_id, self.start_id))

    # --- construction and storage -------------------------------------------------------

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocabulary_size: int = 8000,
        model_type: str = "bpe",
        character_coverage: float = 1.0,
        output_path: str | os.PathLike | None = None,
        normalization: str = "nmt_nfkc",
        seed: int = 0,
    ) -> SubwordTokenizer:
        """Trains a SentencePiece model in memory on `texts` (both languages together).

        Training is deterministic: the same texts in the same order give the same model bytes
        (one trainer thread, a fixed random seed, every sentence used without sampling).

        Args:
            texts: sentences, one string each; source and target sentences mixed.
            vocabulary_size: number of pieces, the four special pieces included.
            model_type: a SentencePiece model type: "bpe", "unigram", "char" or "word".
            character_coverage: share of characters the vocabulary must cover; 1.0 keeps
                every character seen in training (right for the Latin script).
            output_path: when given, the model is also written there (it must not exist).
            normalization: SentencePiece normalisation rule: "nmt_nfkc" (NFKC, whitespace
                runs collapsed, case kept) or "identity".
            seed: seed of SentencePiece's random generator.

        Returns:
            The trained tokenizer.

        Raises:
            ValueError: `texts` is empty, holds a non-string, or `vocabulary_size` is more
                than the texts can fill.
            TypeError: `texts` is a single string instead of an iterable of them.
            FileExistsError: `output_path` already exists.
        """
        vocabulary_size = positive_int(vocabulary_size, "vocabulary_size", error=UserError,
                                       minimum=5)
        if output_path is not None and os.path.exists(output_path):
            raise FileExistsError(
                f"output_path {os.fspath(output_path)!r} already exists; remove it or save "
                "with tokenizer.save(path, overwrite=True)"
            )
        counted = _CountingStrings(texts)
        model = io.BytesIO()
        sentencepiece.set_random_generator_seed(seed)
        try:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(counted), model_writer=model,
                vocab_size=vocabulary_size, model_type=model_type,
                character_coverage=character_coverage, normalization_rule_name=normalization,
                pad_id=PAD_ID, unk_id=UNKNOWN_ID, bos_id=START_ID, eos_id=END_ID,
                pad_piece=PAD_PIECE, unk_piece=UNKNOWN_PIECE, bos_piece=START_PIECE,
                eos_piece=END_PIECE,
                # Determinism: no sampling of the input, one thread.
                input_sentence_size=0, shuffle_input_sentence=False, num_threads=1,
                minloglevel=2,
            )
        except (RuntimeError, ValueError) as error:
            if counted.error is not None:
                raise counted.error from None
            if counted.count == 0:
                raise UserError("texts is empty; expected at least one sentence") from None
            raise UserError(
                f"SentencePiece training failed (vocabulary_size={vocabulary_size}, "
                f"model_type={model_type!r}, {counted.count} sentences): {error}"
            ) from None
        if counted.error is not None:
            raise counted.error
        tokenizer = cls(model.getvalue())
        if output_path is not None:
            tokenizer.save(output_path)
        return tokenizer

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Tokenizer:
        """Reads a tokenizer from a file written by `save`: a SentencePiece `.model` file.
        (`zoo.text.loading.load_tokenizer` reads a `MarianTokenizer`'s file too.)

        Raises:
            FileNotFoundError: if `path` is not a file.
            zoo.UserError: if it holds a `MarianTokenizer` (a zip archive).
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(f"tokenizer model file {os.fspath(path)!r} does not exist")
        with open(path, "rb") as file:
            data = file.read()
        if data.startswith(ZIP_MAGIC):
            raise UserError(f"{os.fspath(path)!r} holds a Marian tokenizer; read it with "
                            f"zoo.text.loading.load_tokenizer or MarianTokenizer.from_file")
        return cls(data)

    @property
    def proto(self) -> bytes:
        """The serialized SentencePiece model (what `save` writes to a `.model` file)."""
        return self._proto

    def _serialized(self) -> bytes:
        return self._proto

    # --- Python path --------------------------------------------------------------------

    def normalize(self, texts: Sequence[str | bytes]) -> list[str]:
        """Returns `texts` as `decode(encode(texts))` gives them back when no piece is unknown.

        With the default "nmt_nfkc" rule that is NFKC with whitespace runs collapsed to one
        space and leading/trailing whitespace removed.
        """
        strings = _as_strings(texts)
        # SentencePiece writes spaces as the meta symbol U+2581 and adds one in front.
        return [
            self._processor.normalize(text).replace("\u2581", " ").lstrip(" ")
            for text in strings
        ]

    def _encode_texts(self, texts: list[str]) -> list[list[int]]:
        return self._processor.encode(texts, out_type=int)

    def _decode_ids(self, ids: list[int]) -> str:
        return self._processor.decode(ids)

    def _piece(self, token_id: int) -> str:
        return self._processor.id_to_piece(token_id)

    # --- graph path ---------------------------------------------------------------------

    def to_keras_hub(self, **kwargs):
        """Returns a `keras_hub.tokenizers.SentencePieceTokenizer` over the same model.

        Its `tokenize` gives the ids of `encode(..., add_end=False)` and its `detokenize` the
        texts of `decode`, inside a TensorFlow graph (for export and tf.data).

        Args:
            **kwargs: passed on, e.g. `sequence_length`, `add_bos`, `add_eos`.
        """
        import keras_hub  # Lazy: keras_hub pulls in TensorFlow Text.

        return keras_hub.tokenizers.SentencePieceTokenizer(proto=self._proto, **kwargs)


class _CountingStrings:
    """Iterates over texts for the trainer, checking each is a string and counting them."""

    def __init__(self, texts: Iterable[str]):
        if isinstance(texts, (str, bytes)):
            raise TypeError("texts must be an iterable of sentences, got a single string")
        self._texts = texts
        self.count = 0
        self.error: ValueError | None = None

    def __iter__(self) -> Iterator[str]:
        for text in self._texts:
            if not isinstance(text, str):
                # Raised after training: an exception thrown through the C++ trainer comes
                # back wrapped in its internal error text.
                self.error = ValueError(
                    f"texts[{self.count}] is a {type(text).__name__}, expected a str"
                )
                return
            self.count += 1
            yield text


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
