"""OPUS-MT's tokenizer for converted Marian translators: two SentencePiece models (source and
target pieces) and one id map (`vocab.json`), as Hugging Face's `MarianTokenizer` reads them.

It has the interface of `zoo.text.base.Tokenizer`, so a `Translator` takes it as it takes the
zoo's own `SubwordTokenizer`; `zoo.text.marian_graph` is the same tokenizer inside a
TensorFlow graph, for export.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import sentencepiece

from zoo.training.errors import UserError
from zoo.layers.validation import is_int
from zoo.training.files.json_files import read_json_file
from zoo.text.base import END_PIECE, PAD_PIECE, UNKNOWN_PIECE, Tokenizer

_MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
_MARIAN_SETTINGS = "settings.json"
_META_SYMBOL = "\u2581"


class MarianTokenizer(Tokenizer):
    """OPUS-MT's tokenizer: source and target SentencePiece models and one id map.

    Encoding cuts a source sentence into the source model's pieces and numbers them with the
    id map (`vocab.json`; a piece it lacks is the unknown id), then appends the end id.
    Decoding maps ids back to pieces, drops the special ones (end, unknown, pad) and joins
    the pieces, as Hugging Face's `MarianTokenizer` with `skip_special_tokens=True` does
    (with one shared vocabulary it joins them with the source model). A leading language
    code (`>>de<<`, for multilingual OPUS-MT models) is one piece of its own.

    The interface is `zoo.text.base.Tokenizer`'s (`encode`, `encode_batch_padded`, `decode`,
    `id_to_piece`, `save`, `pad_id`, `start_id`, `end_id`, `unknown_id`,
    `vocabulary_size`), so a `Translator` takes it as it takes a `SubwordTokenizer`. Marian
    starts every target with the pad id: `start_id == pad_id`.

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
                raise UserError(f"{what} ({len(proto)} bytes) is not a valid SentencePiece "
                                f"model: {error}") from None
        self._source_proto, self._target_proto = bytes(source_proto), bytes(target_proto)
        self._source, self._target = processors
        if not isinstance(vocabulary, Mapping) or not vocabulary:
            raise UserError("vocabulary must be a non-empty mapping of pieces to ids "
                            "(the contents of vocab.json)")
        pieces: list[str | None] = [None] * len(vocabulary)
        for piece, index in vocabulary.items():
            if not is_int(index) or not 0 <= index < len(vocabulary):
                raise UserError(f"vocabulary id {index!r} of piece {piece!r} is not in "
                                f"[0, {len(vocabulary)}): the ids must be 0 .. n - 1")
            if pieces[index] is not None:
                raise UserError(f"vocabulary id {index} is given to both {pieces[index]!r} "
                                f"and {piece!r}")
            pieces[index] = str(piece)
        self._pieces: list[str] = pieces  # type: ignore[assignment]  (all filled: n ids, n keys)
        self._ids = {piece: index for index, piece in enumerate(self._pieces)}
        for what, piece in (("end_piece", end_piece), ("unknown_piece", unknown_piece),
                            ("pad_piece", pad_piece)):
            if piece not in self._ids:
                raise UserError(f"{what} {piece!r} is not in the vocabulary")
        self._pieces_of_specials = (end_piece, unknown_piece, pad_piece)
        end, unknown, pad = (self._ids[p] for p in self._pieces_of_specials)
        self._set_ids(len(self._pieces), pad=pad, unknown=unknown, start=pad, end=end)
        self._skipped_ids = frozenset((end, unknown, pad))
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
            if not (folder / name).exists():
                raise FileNotFoundError(f"the Marian tokenizer needs {name}; there is none "
                                        f"in {str(folder)!r}")
            if name.endswith(".spm") and not (folder / name).is_file():
                raise UserError(f"{folder / name} is not a regular file, so not a "
                                "SentencePiece model")
        settings: dict = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            if (folder / name).exists():
                settings.update(_read_json(folder / name))
        if settings.get("separate_vocabs") or (folder / "target_vocab.json").is_file():
            raise UserError(f"{str(folder)!r} has separate source and target vocabularies; "
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
            raise UserError(f"not a Marian tokenizer archive: {error}") from None
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

    def _serialized(self) -> bytes:
        """A zip of `source.spm`, `target.spm`, `vocab.json` and the settings (what `save`
        writes; `zoo.text.loading.load_tokenizer` reads it back too)."""
        end, unknown, pad = self._pieces_of_specials
        settings = {"end_piece": end, "unknown_piece": unknown, "pad_piece": pad,
                    "clean_up_spaces": self.clean_up_spaces}
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("source.spm", self._source_proto)
            archive.writestr("target.spm", self._target_proto)
            archive.writestr("vocab.json", json.dumps(self._ids, ensure_ascii=False))
            archive.writestr(_MARIAN_SETTINGS, json.dumps(settings))
        return buffer.getvalue()

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

    # --- Python path --------------------------------------------------------------------

    def pieces(self, text: str) -> list[str]:
        """The source pieces of one text (a leading `>>xx<<` language code is one piece)."""
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[:end + 2]], text[end + 2:]
        return code + self._source.encode(text, out_type=str)

    def _encode_texts(self, texts: list[str]) -> list[list[int]]:
        """As Hugging Face's `MarianTokenizer(texts)`: pieces numbered by the id map."""
        return [[self._ids.get(p, self._unknown_id) for p in self.pieces(text)]
                for text in texts]

    def _encode_target_texts(self, texts: list[str]) -> list[list[int]]:
        """As Hugging Face's `MarianTokenizer(text_target=texts)`: the target model's pieces."""
        pieces = self._target.encode(texts, out_type=str)
        return [[self._ids.get(p, self._unknown_id) for p in row] for row in pieces]

    def _decode_ids(self, ids: list[int]) -> str:
        """As Hugging Face's `batch_decode(ids, skip_special_tokens=True)`."""
        pieces = [self._pieces[token] for token in ids]
        text = self._source.decode_pieces(pieces).replace(_META_SYMBOL, " ").strip()
        return _clean_up_spaces(text) if self.clean_up_spaces else text

    def _piece(self, token_id: int) -> str:
        return self._pieces[token_id]

    def graph_tokenizer(self, **kwargs: object) -> object:
        """The same tokenizer inside a TensorFlow graph (TF and TF Text ops only), for
        export: a `zoo.text.marian_graph.MarianGraphTokenizer` layer (not a keras-hub
        object), whose `tokenize` gives the ids of `encode(..., add_end=False)` and
        `detokenize` the texts of `decode`.

        Args:
            **kwargs: layer arguments (`name`).
        """
        from zoo.text.marian_graph import MarianGraphTokenizer  # TensorFlow

        return MarianGraphTokenizer(self, **kwargs)

    def to_keras_hub(self, **kwargs: object) -> object:
        """The former name of `graph_tokenizer`, kept for callers: it returns the zoo's
        `MarianGraphTokenizer` layer, not a keras-hub object (keras-hub has no Marian
        tokenizer)."""
        return self.graph_tokenizer(**kwargs)


def _read_json(path: Path) -> dict:
    """A JSON object of OPUS-MT's folder (`vocab.json`, `tokenizer_config.json`, ...), read
    with the size limit of `zoo.training.files.json_files`."""
    return read_json_file(path, expect=dict)


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
