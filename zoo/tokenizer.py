"""A joint source/target subword tokenizer: one SentencePiece BPE model for both languages.

The translator shares one vocabulary between English and German (as in "Attention Is All You
Need", section 5.1), so one `SubwordTokenizer` encodes both sides. It has two faces over the
same serialized SentencePiece model:

- a Python path (`encode`, `encode_batch_padded`, `decode`) that needs only `sentencepiece`
  and numpy, for training input pipelines on backends without TensorFlow;
- a graph path (`to_keras_hub`) that returns a `keras_hub.tokenizers.SentencePieceTokenizer`
  built from the same proto, for tokenization inside an exported SavedModel.

Special ids are fixed by `train`: pad 0, unknown 1, start 2, end 3.

`MarianTokenizer` has the same interface for converted OPUS-MT translators: two SentencePiece
models (source and target pieces) and one id map (`vocab.json`), as Hugging Face's
`MarianTokenizer` reads them.
"""

from __future__ import annotations

import io
import json
import os
import warnings
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import sentencepiece

from training.text_batches import END_ID, PAD_ID, START_ID, UNKNOWN_ID

PAD_PIECE, UNKNOWN_PIECE, START_PIECE, END_PIECE = "<pad>", "<unk>", "<s>", "</s>"


class SubwordTokenizer:
    """A SentencePiece subword tokenizer with pad, unknown, start and end ids.

    Args:
        proto: the serialized SentencePiece model (`ModelProto` bytes), as returned by
            `SubwordTokenizer.train(...).proto` or read from a `.model` file.

    Example:
    >>> tokenizer = SubwordTokenizer.train(sentences, vocabulary_size=2000)
    >>> ids = tokenizer.encode(["A dog runs."])        # [[..., tokenizer.end_id]]
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
            raise ValueError(
                f"proto ({len(self._proto)} bytes) is not a valid SentencePiece model: {error}"
            ) from None
        missing = [
            name
            for name, value in [
                ("pad", self._processor.pad_id()),
                ("unknown", self._processor.unk_id()),
                ("start", self._processor.bos_id()),
                ("end", self._processor.eos_id()),
            ]
            if value < 0
        ]
        if missing:
            raise ValueError(
                f"the SentencePiece model has no {', '.join(missing)} id; expected pad, "
                "unknown, start and end ids (train it with SubwordTokenizer.train)"
            )

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
        if not isinstance(vocabulary_size, int) or vocabulary_size < 5:
            raise ValueError(f"vocabulary_size must be an int >= 5, got {vocabulary_size!r}")
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
                sentence_iterator=iter(counted),
                model_writer=model,
                vocab_size=vocabulary_size,
                model_type=model_type,
                character_coverage=character_coverage,
                normalization_rule_name=normalization,
                pad_id=PAD_ID,
                unk_id=UNKNOWN_ID,
                bos_id=START_ID,
                eos_id=END_ID,
                pad_piece=PAD_PIECE,
                unk_piece=UNKNOWN_PIECE,
                bos_piece=START_PIECE,
                eos_piece=END_PIECE,
                # Determinism: no sampling of the input, one thread.
                input_sentence_size=0,
                shuffle_input_sentence=False,
                num_threads=1,
                minloglevel=2,
            )
        except (RuntimeError, ValueError) as error:
            if counted.error is not None:
                raise counted.error from None
            if counted.count == 0:
                raise ValueError("texts is empty; expected at least one sentence") from None
            raise ValueError(
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
    def from_file(cls, path: str | os.PathLike) -> SubwordTokenizer | MarianTokenizer:
        """Reads a tokenizer from a SentencePiece `.model` file written by `save`.

        A file written by `MarianTokenizer.save` (a zip archive) gives a `MarianTokenizer`,
        so a translator's stored tokenizer loads whichever kind it is.
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(f"tokenizer model file {os.fspath(path)!r} does not exist")
        with open(path, "rb") as file:
            data = file.read()
        if data.startswith(_ZIP_MAGIC):
            return MarianTokenizer.from_bytes(data)
        return cls(data)

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> None:
        """Writes the serialized model to `path` (a SentencePiece `.model` file).

        Raises:
            FileExistsError: `path` exists and `overwrite` is False.
        """
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(
                f"{os.fspath(path)!r} already exists; pass overwrite=True to replace it"
            )
        with open(path, "wb") as file:
            file.write(self._proto)

    @property
    def proto(self) -> bytes:
        """The serialized SentencePiece model."""
        return self._proto

    @property
    def vocabulary_size(self) -> int:
        return self._processor.get_piece_size()

    @property
    def pad_id(self) -> int:
        return self._processor.pad_id()

    @property
    def unknown_id(self) -> int:
        return self._processor.unk_id()

    @property
    def start_id(self) -> int:
        return self._processor.bos_id()

    @property
    def end_id(self) -> int:
        return self._processor.eos_id()

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocabulary_size={self.vocabulary_size})"

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
            raise ValueError(
                f"max_length must be an int > {specials} (room for the start/end ids and one "
                f"piece), got {max_length!r}"
            )
        bodies = self._processor.encode(strings, out_type=int)
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

        Each sequence is read up to its first end id; pad and start ids are skipped, so both
        `encode` output and padded model output decode cleanly.

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
                raise ValueError(
                    f"ids must be 2-D (batch, length), got an array of shape {ids.shape}"
                )
            if ids.size and not np.issubdtype(ids.dtype, np.integer):
                raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
            ids = ids.tolist()
        texts = []
        for index, sequence in enumerate(ids):
            if isinstance(sequence, (int, np.integer)):
                raise ValueError(
                    "ids must be a batch of id sequences (a list of lists); got a flat list "
                    "of ints: wrap one sequence as [ids]"
                )
            kept = []
            for token in sequence:
                token = int(token)
                if token == self.end_id:
                    break
                if not 0 <= token < self.vocabulary_size:
                    raise ValueError(
                        f"id {token} in sequence {index} is outside the vocabulary "
                        f"[0, {self.vocabulary_size})"
                    )
                if token not in (self.pad_id, self.start_id):
                    kept.append(token)
            texts.append(self._processor.decode(kept))
        return texts

    def id_to_piece(self, token_id: int) -> str:
        """The subword piece of one id (spaces shown as U+2581), e.g. for attention plots."""
        if not 0 <= int(token_id) < self.vocabulary_size:
            raise ValueError(f"id {token_id} is outside the vocabulary [0, {self.vocabulary_size})")
        return self._processor.id_to_piece(int(token_id))

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
                raise ValueError(
                    f"text {index} is not valid UTF-8: byte {text[error.start]:#04x} at "
                    f"position {error.start} ({error.reason})"
                ) from None
        elif not isinstance(text, str):
            raise TypeError(f"text {index} is a {type(text).__name__}, expected str or bytes")
        strings.append(text)
    return strings


# ---------------------------------------------------------------------- Marian / OPUS-MT
_ZIP_MAGIC = b"PK\x03\x04"
_MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
_MARIAN_SETTINGS = "settings.json"
_META_SYMBOL = "\u2581"


class MarianTokenizer:
    """OPUS-MT's tokenizer: source and target SentencePiece models and one id map.

    Encoding cuts a source sentence into the source model's pieces and numbers them with the
    id map (`vocab.json`; a piece it lacks is the unknown id), then appends the end id.
    Decoding maps ids back to pieces, drops the special ones (end, unknown, pad) and joins
    the pieces, as Hugging Face's `MarianTokenizer` with `skip_special_tokens=True` does
    (with one shared vocabulary it joins them with the source model). A leading language
    code (`>>de<<`, for multilingual OPUS-MT models) is one piece of its own.

    The interface is `SubwordTokenizer`'s (`encode`, `encode_batch_padded`, `decode`,
    `id_to_piece`, `save`, `pad_id`, `start_id`, `end_id`, `unknown_id`,
    `vocabulary_size`), so a `Translator` takes either. Marian starts every target with the
    pad id: `start_id == pad_id`.

    Args:
        source_proto: the serialized source SentencePiece model (`source.spm`).
        target_proto: the serialized target SentencePiece model (`target.spm`).
        vocabulary: the id map, piece -> id (the contents of `vocab.json`); the ids must be
            0 .. n - 1, each once.
        end_piece: the end-of-sentence piece (`</s>`, id 0 in OPUS-MT).
        unknown_piece: the unknown piece (`<unk>`, id 1 in OPUS-MT).
        pad_piece: the padding piece (`<pad>`, the last id in OPUS-MT).
        clean_up_spaces: remove spaces before punctuation after decoding (Hugging Face's
            `clean_up_tokenization_spaces`; off for OPUS-MT).

    Example:
    >>> tokenizer = MarianTokenizer.from_folder("opus-mt-en-de/")   # doctest: +SKIP
    >>> tokenizer.decode(tokenizer.encode(["A dog runs."]))          # doctest: +SKIP
    """

    def __init__(self, source_proto: bytes, target_proto: bytes,
                 vocabulary: Mapping[str, int], *, end_piece: str = END_PIECE,
                 unknown_piece: str = UNKNOWN_PIECE, pad_piece: str = PAD_PIECE,
                 clean_up_spaces: bool = False) -> None:
        processors = []
        for what, proto in (("source_proto", source_proto), ("target_proto", target_proto)):
            if not isinstance(proto, (bytes, bytearray)):
                raise TypeError(f"{what} must be a serialized SentencePiece model (bytes); got "
                                f"{type(proto).__name__}")
            try:
                processors.append(
                    sentencepiece.SentencePieceProcessor(model_proto=bytes(proto)))
            except RuntimeError as error:
                raise ValueError(f"{what} ({len(proto)} bytes) is not a valid SentencePiece "
                                 f"model: {error}") from None
        self._source_proto, self._target_proto = bytes(source_proto), bytes(target_proto)
        self._source, self._target = processors
        if not isinstance(vocabulary, Mapping) or not vocabulary:
            raise ValueError("vocabulary must be a non-empty mapping of pieces to ids "
                             "(the contents of vocab.json)")
        pieces: list[str | None] = [None] * len(vocabulary)
        for piece, index in vocabulary.items():
            if isinstance(index, bool) or not isinstance(index, int) \
                    or not 0 <= index < len(vocabulary):
                raise ValueError(f"vocabulary id {index!r} of piece {piece!r} is not in "
                                 f"[0, {len(vocabulary)}): the ids must be 0 .. n - 1")
            if pieces[index] is not None:
                raise ValueError(f"vocabulary id {index} is given to both {pieces[index]!r} "
                                 f"and {piece!r}")
            pieces[index] = str(piece)
        self._pieces: list[str] = pieces  # type: ignore[assignment]  (all filled: n ids, n keys)
        self._ids = {piece: index for index, piece in enumerate(self._pieces)}
        for what, piece in (("end_piece", end_piece), ("unknown_piece", unknown_piece),
                            ("pad_piece", pad_piece)):
            if piece not in self._ids:
                raise ValueError(f"{what} {piece!r} is not in the vocabulary")
        self._pieces_of_specials = (end_piece, unknown_piece, pad_piece)
        self._end_id, self._unknown_id, self._pad_id = (self._ids[p]
                                                        for p in self._pieces_of_specials)
        self.clean_up_spaces = bool(clean_up_spaces)

    # --- construction and storage -------------------------------------------------------

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> MarianTokenizer:
        """Reads an OPUS-MT folder: `source.spm`, `target.spm`, `vocab.json` and, when
        present, `tokenizer_config.json` / `special_tokens_map.json` (special pieces).

        Raises:
            FileNotFoundError: one of the three files is missing (the message names it).
            ValueError: separate source and target vocabularies (`target_vocab.json`,
                `separate_vocabs`), which a `Translator` cannot share, or a bad file.
        """
        folder = Path(folder)
        for name in _MARIAN_FILES:
            if not (folder / name).is_file():
                raise FileNotFoundError(f"the Marian tokenizer needs {name}; there is none "
                                        f"in {str(folder)!r}")
        settings: dict = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            if (folder / name).is_file():
                settings.update(_read_json(folder / name))
        if settings.get("separate_vocabs") or (folder / "target_vocab.json").is_file():
            raise ValueError(f"{str(folder)!r} has separate source and target vocabularies; "
                             "the zoo's Translator shares one")
        return cls((folder / "source.spm").read_bytes(), (folder / "target.spm").read_bytes(),
                   _read_json(folder / "vocab.json"),
                   end_piece=_token_text(settings.get("eos_token"), END_PIECE),
                   unknown_piece=_token_text(settings.get("unk_token"), UNKNOWN_PIECE),
                   pad_piece=_token_text(settings.get("pad_token"), PAD_PIECE),
                   clean_up_spaces=bool(settings.get("clean_up_tokenization_spaces", False)))

    @classmethod
    def from_bytes(cls, data: bytes) -> MarianTokenizer:
        """Reads the archive that `save` writes (a zip of the three files and settings)."""
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                files = {name: archive.read(name) for name in (*_MARIAN_FILES,
                                                               _MARIAN_SETTINGS)}
        except (zipfile.BadZipFile, KeyError) as error:
            raise ValueError(f"not a Marian tokenizer archive: {error}") from None
        settings = json.loads(files[_MARIAN_SETTINGS])
        return cls(files["source.spm"], files["target.spm"], json.loads(files["vocab.json"]),
                   **settings)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> MarianTokenizer:
        """Reads a file written by `save`."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"tokenizer file {os.fspath(path)!r} does not exist")
        with open(path, "rb") as file:
            return cls.from_bytes(file.read())

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> None:
        """Writes the tokenizer to one file (a zip of `source.spm`, `target.spm`,
        `vocab.json` and its settings); `SubwordTokenizer.from_file` reads it back too.

        Raises:
            FileExistsError: `path` exists and `overwrite` is False.
        """
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(
                f"{os.fspath(path)!r} already exists; pass overwrite=True to replace it")
        end, unknown, pad = self._pieces_of_specials
        settings = {"end_piece": end, "unknown_piece": unknown, "pad_piece": pad,
                    "clean_up_spaces": self.clean_up_spaces}
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("source.spm", self._source_proto)
            archive.writestr("target.spm", self._target_proto)
            archive.writestr("vocab.json", json.dumps(self._ids, ensure_ascii=False))
            archive.writestr(_MARIAN_SETTINGS, json.dumps(settings))
        with open(path, "wb") as file:
            file.write(buffer.getvalue())

    @property
    def source_proto(self) -> bytes:
        """The serialized source SentencePiece model."""
        return self._source_proto

    @property
    def target_proto(self) -> bytes:
        """The serialized target SentencePiece model."""
        return self._target_proto

    @property
    def vocabulary(self) -> dict[str, int]:
        """The id map, piece -> id (a copy)."""
        return dict(self._ids)

    @property
    def vocabulary_size(self) -> int:
        return len(self._pieces)

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def unknown_id(self) -> int:
        return self._unknown_id

    @property
    def start_id(self) -> int:
        """Marian's decoder start id: the pad id."""
        return self._pad_id

    @property
    def end_id(self) -> int:
        return self._end_id

    def __repr__(self) -> str:
        return f"MarianTokenizer(vocabulary_size={self.vocabulary_size})"

    # --- Python path --------------------------------------------------------------------

    def pieces(self, text: str) -> list[str]:
        """The source pieces of one text (a leading `>>xx<<` language code is one piece)."""
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[:end + 2]], text[end + 2:]
        return code + self._source.encode(text, out_type=str)

    def encode(self, texts: Sequence[str | bytes], max_length: int | None = None,
               add_start: bool = False, add_end: bool = True) -> list[list[int]]:
        """Encodes each text to ids, as Hugging Face's `MarianTokenizer(texts)` does.

        Args: as for `SubwordTokenizer.encode` (`add_start` puts the start id, which is the
            pad id, first).

        Returns:
            One list of ids per text; an empty text gives `[end_id]`.

        Raises:
            TypeError, ValueError: as `SubwordTokenizer.encode`.
        """
        strings = _as_strings(texts)
        specials = int(add_start) + int(add_end)
        if max_length is not None and (not isinstance(max_length, int)
                                       or max_length <= specials):
            raise ValueError(f"max_length must be an int > {specials} (room for the start/end "
                             f"ids and one piece), got {max_length!r}")
        prefix = [self.start_id] if add_start else []
        suffix = [self.end_id] if add_end else []
        bodies = [[self._ids.get(p, self._unknown_id) for p in self.pieces(text)]
                  for text in strings]
        if max_length is not None:
            too_long = [len(b) + specials for b in bodies if len(b) + specials > max_length]
            if too_long:
                warnings.warn(
                    f"{len(too_long)} of {len(bodies)} texts encode to more than max_length="
                    f"{max_length} ids (longest: {max(too_long)}); they are truncated to "
                    f"{max_length}", stacklevel=2)
                bodies = [b[:max_length - specials] for b in bodies]
        return [prefix + body + suffix for body in bodies]

    def encode_batch_padded(self, texts: Sequence[str | bytes], max_length: int | None = None,
                            add_start: bool = False, add_end: bool = True) -> np.ndarray:
        """Encodes texts into one int32 array padded with `pad_id` (as
        `SubwordTokenizer.encode_batch_padded`)."""
        encoded = self.encode(texts, max_length, add_start=add_start, add_end=add_end)
        width = max_length if max_length is not None else max(map(len, encoded), default=0)
        batch = np.full((len(encoded), width), self.pad_id, dtype=np.int32)
        for row, ids in enumerate(encoded):
            batch[row, :len(ids)] = ids
        return batch

    def decode(self, ids: Sequence[Sequence[int]] | np.ndarray) -> list[str]:
        """Decodes a batch of id sequences to texts, each read up to its first end id.

        Equal to Hugging Face's `MarianTokenizer.batch_decode(ids, skip_special_tokens=True)`:
        the end, unknown and pad ids are dropped, the other pieces joined.

        Raises:
            ValueError: `ids` is not a batch of sequences, or holds an id outside the
                vocabulary.
        """
        if isinstance(ids, np.ndarray) or hasattr(ids, "shape"):
            ids = np.asarray(ids)
            if ids.ndim != 2:
                raise ValueError(f"ids must be 2-D (batch, length), got an array of shape "
                                 f"{ids.shape}")
            if ids.size and not np.issubdtype(ids.dtype, np.integer):
                raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
            ids = ids.tolist()
        skipped = {self._end_id, self._unknown_id, self._pad_id}
        texts = []
        for index, sequence in enumerate(ids):
            if isinstance(sequence, (int, np.integer)):
                raise ValueError("ids must be a batch of id sequences (a list of lists); got a "
                                 "flat list of ints: wrap one sequence as [ids]")
            pieces = []
            for token in sequence:
                token = int(token)
                if token == self._end_id:
                    break
                if not 0 <= token < self.vocabulary_size:
                    raise ValueError(f"id {token} in sequence {index} is outside the "
                                     f"vocabulary [0, {self.vocabulary_size})")
                if token not in skipped:
                    pieces.append(self._pieces[token])
            text = self._source.decode_pieces(pieces).replace(_META_SYMBOL, " ").strip()
            texts.append(_clean_up_spaces(text) if self.clean_up_spaces else text)
        return texts

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id (spaces shown as U+2581), e.g. for attention plots."""
        if not 0 <= int(token_id) < self.vocabulary_size:
            raise ValueError(f"id {token_id} is outside the vocabulary "
                             f"[0, {self.vocabulary_size})")
        return self._pieces[int(token_id)]

    def to_keras_hub(self, **kwargs: object) -> object:
        """The same tokenizer inside a TensorFlow graph (TF and TF Text ops only), for
        export: a `zoo.converters.marian_graph.MarianGraphTokenizer` layer, whose `tokenize`
        gives the ids of `encode(..., add_end=False)` and `detokenize` the texts of `decode`.
        (Named as `SubwordTokenizer`'s graph path, which `zoo.export` calls.)

        Args:
            **kwargs: layer arguments (`name`).
        """
        from zoo.converters.marian_graph import MarianGraphTokenizer  # TensorFlow

        return MarianGraphTokenizer(self, **kwargs)


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except json.JSONDecodeError as error:
        raise ValueError(f"{str(path)!r} is not valid JSON: {error}") from None


def _token_text(value: object, default: str) -> str:
    """A special token's text from tokenizer_config.json (a string or an AddedToken dict)."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return str(value) if value else default


def _clean_up_spaces(text: str) -> str:
    """Hugging Face's `clean_up_tokenization`: no space before punctuation and clitics."""
    for spaced, joined in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                           (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                           (" 're", "'re")):
        text = text.replace(spaced, joined)
    return text
