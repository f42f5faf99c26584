"""CLIP's tokenizer (Radford et al. 2021): byte-level BPE with an end-of-word mark, in the graph.

A text becomes ids in four steps, each as OpenAI's and Hugging Face's tokenizers take it:

    normalise   NFC, every run of Unicode whitespace to one space, lower case
    split       `<|startoftext|>`, `<|endoftext|>`, contractions ('s 't 're 've 'm 'll 'd),
                runs of letters, single digits, runs of other symbols; spaces dropped
    merge       each word's UTF-8 bytes as GPT-2's printable characters, "</w>" added to its
                last one, merged in the rank order of `merges.txt` (keras-hub's
                `CLIPTokenizer` on TensorFlow Text ops)
    pack        `<|startoftext|>` ids `<|endoftext|>`, cut to the context length (77) and
                padded with the checkpoint's pad token

Why not keras-hub's `CLIPTokenizer` alone: its graph path splits words with GPT-2's pattern
(so "2024" is one word where CLIP has four digits), lowercases ASCII only, and neither
composes Unicode (NFC) nor folds Unicode spaces, so its ids differ from the reference on
numbers and on non-ASCII text. Here the first two steps are TensorFlow ops that do what the
reference does, and keras-hub's tokenizer merges the words (where its GPT-2 split finds
nothing more to cut). One path in Python, `tf.data` and exported graphs alike.

Lower case is the reference's, letter by letter: TensorFlow's (ICU's) writes a capital sigma
at the end of a word as the final form "ς", the reference as "σ", so "Σ" is mapped to "σ"
before the rest is lowercased.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoo.text.base import _as_strings
from zoo.text.bpe_files import (check_vocabulary, merge_rules, read_bpe_files,
                                write_bpe_files)
from zoo.training.errors import UserError
from zoo.training.files.json_files import read_json_file

START_OF_TEXT, END_OF_TEXT = "<|startoftext|>", "<|endoftext|>"
CONTEXT_LENGTH = 77  # CLIP's text positions
# What the reference's `\s` matches (Unicode White_Space); RE2's `\s` is ASCII only.
_SPACE = r"\t\n\x0b\f\r\x{85}\p{Zs}\x{2028}\x{2029}"
_WORD = (r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|"
         rf"[^{_SPACE}\p{{L}}\p{{N}}]+")


def normalize(texts: Any) -> Any:
    """CLIP's normalisation of a string tensor, in TensorFlow ops: NFC, each run of
    whitespace to one space, lower case (Unicode)."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    texts = tf_text.normalize_utf8(texts, "NFC")
    texts = tf.strings.regex_replace(texts, f"[{_SPACE}]+", " ")
    texts = tf.strings.regex_replace(texts, "Σ", "σ")  # no final form (see above)
    return tf.strings.lower(texts, encoding="utf-8")


def split_words(texts: Any) -> Any:
    """The words of normalised texts: a `(batch, words)` ragged string tensor."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    words = tf_text.regex_split(texts, _WORD, _WORD)
    return tf.ragged.boolean_mask(words, tf.strings.regex_full_match(words, _WORD))


class CLIPTokenizer:
    """CLIP's byte-level BPE: texts to packed ids in Python and in a TensorFlow graph.

    Args:
        vocabulary: piece -> id (the checkpoint's `vocab.json`), ids 0 .. n-1, holding
            `<|startoftext|>` and `<|endoftext|>`.
        merges: the merge rules in rank order, each "left right" (`merges.txt`; its
            `#version` line allowed).
        sequence_length: the context length texts are cut and padded to (77 in CLIP).
        pad_token: the piece that pads (`<|endoftext|>` in OpenAI's checkpoints; "!" in
            some others).

    Example:
    >>> from zoo.text.byte_pair import byte_to_unicode
    >>> characters = [byte_to_unicode()[b] for b in range(256)]
    >>> pieces = characters + [c + "</w>" for c in characters] + ["ca", "cat</w>"]
    >>> vocabulary = {piece: i for i, piece in enumerate(pieces + [START_OF_TEXT, END_OF_TEXT])}
    >>> tokenizer = CLIPTokenizer(vocabulary, ["c a", "ca t</w>"], sequence_length=6)
    >>> tokenizer.encode(["A  CAT!"])
    [[514, 353, 513, 289, 515]]
    >>> tokenizer.decode([[514, 353, 513, 289, 515, 515]])
    ['a cat !']
    """

    def __init__(self, vocabulary: dict[str, int], merges: Sequence[str],
                 sequence_length: int = CONTEXT_LENGTH, pad_token: str = END_OF_TEXT) -> None:
        check_vocabulary(vocabulary)
        for token in (START_OF_TEXT, END_OF_TEXT, pad_token):
            if token not in vocabulary:
                raise UserError(f"the vocabulary has no special token {token!r}")
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or (
                sequence_length < 2):
            raise UserError(f"sequence_length must be an int >= 2 (the start and end "
                            f"tokens); got {sequence_length!r}")
        self.vocabulary = dict(vocabulary)
        self.merges = merge_rules((str(m).rstrip("\r\n") for m in merges), self.vocabulary)
        self.sequence_length = sequence_length
        self.pad_token = pad_token
        self._pieces = {i: piece for piece, i in self.vocabulary.items()}
        self._layer: Any = None
        self._eager: Any = None

    @classmethod
    def from_folder(cls, folder: str | os.PathLike,
                    sequence_length: int = CONTEXT_LENGTH) -> "CLIPTokenizer":
        """The tokenizer of a checkpoint folder: `vocab.json`, `merges.txt`, and the pad
        token of `special_tokens_map.json` or `tokenizer_config.json` when they name one.

        Raises:
            FileNotFoundError: `vocab.json` or `merges.txt` is missing (the message names it).
            UserError: a file is damaged.
        """
        folder = Path(folder)
        vocabulary, merges = read_bpe_files(folder, "CLIP's tokenizer")
        pad_token = END_OF_TEXT
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            if (folder / name).is_file():
                pad = read_json_file(folder / name, expect=dict).get("pad_token")
                pad = pad.get("content") if isinstance(pad, dict) else pad
                if isinstance(pad, str):
                    pad_token = pad
                    break
        return cls(vocabulary, merges, sequence_length, pad_token)

    def save(self, folder: str | os.PathLike) -> None:
        """Writes `vocab.json`, `merges.txt` and `special_tokens_map.json` (its pad token)
        into `folder`, which `from_folder` reads back."""
        folder = Path(folder)
        write_bpe_files(folder, self.vocabulary, self.merges)
        (folder / "special_tokens_map.json").write_text(
            json.dumps({"pad_token": self.pad_token}), encoding="utf-8")

    vocabulary_size = property(lambda self: len(self.vocabulary), doc="Number of pieces.")
    start_id = property(lambda self: self.vocabulary[START_OF_TEXT],
                        doc="The id of `<|startoftext|>`, which leads every text.")
    end_id = property(lambda self: self.vocabulary[END_OF_TEXT],
                      doc="The id of `<|endoftext|>`, where the text tower reads a text.")
    pad_id = property(lambda self: self.vocabulary[self.pad_token],
                      doc="The id that pads a text to `sequence_length`.")

    def __repr__(self) -> str:
        return (f"CLIPTokenizer(vocabulary_size={self.vocabulary_size}, "
                f"sequence_length={self.sequence_length})")

    @property
    def layer(self) -> Any:
        """keras-hub's `CLIPTokenizer` of this vocabulary on its TensorFlow path (the merge
        step); the resource `zoo.serving` keeps with an exported graph."""
        if self._layer is None:
            import tensorflow as tf
            from keras_hub.tokenizers import CLIPTokenizer as KerasHubCLIPTokenizer

            with tf.init_scope():  # its tables outlive the graph that first asks for them
                self._layer = KerasHubCLIPTokenizer(
                    vocabulary=self.vocabulary, merges=self.merges, dtype="int32",
                    _allow_python_workflow=False)
        return self._layer

    def tokenize(self, texts: Any) -> Any:
        """The ids of each text, without start or end: a `(batch, ids)` int32 ragged tensor.
        TensorFlow ops only (`tf.data`, `tf.function`, exported graphs); an eager call runs
        them as one `tf.function` (keras-hub's layer takes its graph path only there)."""
        import tensorflow as tf

        texts = tf.convert_to_tensor(texts, tf.string)
        if not tf.executing_eagerly():
            return self._tokenize_graph(texts)
        if self._eager is None:
            self._eager = tf.function(self._tokenize_graph, input_signature=[
                tf.TensorSpec([None], tf.string)])
        return self._eager(texts)

    def _tokenize_graph(self, texts: Any) -> Any:
        import tensorflow as tf

        words = split_words(normalize(texts))
        ids = self.layer(words.flat_values)  # (words, pieces)
        return tf.RaggedTensor.from_row_splits(
            ids.flat_values, tf.gather(ids.row_splits, words.row_splits))

    def pack(self, texts: Any, sequence_length: int | None = None) -> tuple[Any, Any]:
        """`(token_ids, padding_mask)`, each `(batch, sequence_length)`: start id, the
        text's ids cut to fit, end id, then padding (as the reference with
        `padding="max_length", truncation=True`). TensorFlow ops only."""
        import tensorflow as tf

        length = sequence_length or self.sequence_length
        ids = self.tokenize(texts)[:, :length - 2]
        rows = ids.nrows()
        ids = tf.concat([tf.fill([rows, 1], self.start_id), ids,
                         tf.fill([rows, 1], self.end_id)], axis=1)
        token_ids = ids.to_tensor(default_value=self.pad_id, shape=[None, length])
        padding_mask = tf.ones_like(ids, tf.bool).to_tensor(default_value=False,
                                                            shape=[None, length])
        return token_ids, padding_mask

    def encode(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """The ids of each text with its start and end ids, cut to `sequence_length`
        (unpadded), as Python lists.

        Raises:
            TypeError: `texts` is one string, or holds something that is not text.
            UserError: a bytes text is not UTF-8.
        """
        strings = _as_strings(texts)
        if not strings:
            return []
        token_ids, mask = self.pack(strings)
        return [[int(i) for i, real in zip(row, keep) if real]
                for row, keep in zip(token_ids.numpy(), mask.numpy())]

    def decode(self, ids: Any) -> list[str]:
        """The text of each id sequence up to its end id, each "</w>" a space: the
        normalised text (lower case, single spaces, a space after each word).

        Raises:
            UserError: an id outside the vocabulary.
        """
        from zoo.text.byte_pair import byte_to_unicode

        to_byte = {c: b for b, c in byte_to_unicode().items()}
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        texts = []
        for sequence in ids:
            pieces = []
            for token in sequence:
                piece = self._pieces.get(int(token))
                if piece is None:
                    raise UserError(f"id {token} is outside the vocabulary "
                                    f"[0, {self.vocabulary_size})")
                if piece == END_OF_TEXT:
                    break
                if piece != START_OF_TEXT:
                    pieces.append(piece)
            text = "".join(pieces).replace("</w>", " ")
            data = bytes(to_byte[c] if c in to_byte else 32 for c in text)
            texts.append(data.decode("utf-8", errors="replace").strip())
        return texts
