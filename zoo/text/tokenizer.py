"""The translator's tokenizers: the `Tokenizer` interface and the zoo's own subword one.

The translator shares one vocabulary between English and German (as in "Attention Is All You
Need", section 5.1), so one `SubwordTokenizer` encodes both sides. It has two faces over the
same serialized SentencePiece model:

- a Python path (`encode`, `encode_batch_padded`, `decode`) that needs only `sentencepiece`
  and numpy, for training input pipelines on backends without TensorFlow;
- a graph path (`graph_tokenizer`) that returns a `keras_hub.tokenizers.SentencePieceTokenizer`
  built from the same proto, for tokenization inside an exported SavedModel.

Special ids are fixed by `train`: pad 0, unknown 1, start 2, end 3.

`zoo.text.base.Tokenizer` holds what every tokenizer of a `Translator` shares (checking texts,
padding, truncating, decoding up to the end id, saving); `zoo.text.marian.MarianTokenizer`, for
converted OPUS-MT translators, is the other one.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator, Sequence

import sentencepiece

from zoo.training.text_batches import END_ID, PAD_ID, START_ID, UNKNOWN_ID
from zoo.training.errors import UserError
from zoo.layers.validation import positive_int

from zoo.text.base import (  # noqa: F401  (`Tokenizer` is named here too)
    END_PIECE,
    PAD_PIECE,
    START_PIECE,
    UNKNOWN_PIECE,
    Tokenizer,
    _as_strings,
)
# A `MarianTokenizer.save` file is a zip archive; a SentencePiece model is a protobuf.
ZIP_MAGIC = b"PK\x03\x04"


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

    def graph_tokenizer(self, **kwargs: object) -> object:
        """The same tokenizer inside a TensorFlow graph (for export and tf.data): a
        `keras_hub.tokenizers.SentencePieceTokenizer` over the same model, whose `tokenize`
        gives the ids of `encode(..., add_end=False)` and `detokenize` the texts of `decode`.

        Args:
            **kwargs: passed on, e.g. `sequence_length`, `add_bos`, `add_eos`.
        """
        import keras_hub  # Lazy: keras_hub pulls in TensorFlow Text.

        return keras_hub.tokenizers.SentencePieceTokenizer(proto=self._proto, **kwargs)

    def to_keras_hub(self, **kwargs: object) -> object:
        """The `keras_hub.tokenizers.SentencePieceTokenizer` of `graph_tokenizer`."""
        return self.graph_tokenizer(**kwargs)


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
