"""BERT's uncased WordPiece tokenization for the sentence encoder, in Python and in a graph.

`SentenceTokenizer` gives `SentenceEncoder.embed` its padded `token_ids` / `padding_mask`
arrays with keras-hub's Python WordPiece path (lowercase, accents stripped, punctuation and
CJK characters split, `[CLS] ... [SEP]`) from the model's own vocabulary;
`SentenceTokenizer.tokenize_in_graph` gives the same ids with TensorFlow and TF Text ops only
(for `zoo export`), with the character classes of `graph_character_classes`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from keras import ops

from zoo.layers.validation import positive_int
from zoo.training.errors import UserError

_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
# Ideographs split off as words of their own (BERT's "CJK" ranges, as keras-hub's).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# keras-hub's WordPiece maps words longer than this many UTF-8 bytes to [UNK].
_MAX_BYTES_PER_WORD = 100


def _re2_class(code_points: Sequence[int]) -> str:
    """An RE2 character class of the sorted code points, as ranges `[\\x{41}-\\x{5A}...]`."""
    parts, start, previous = [], None, None
    for c in list(code_points) + [None]:
        if start is not None and (c is None or c != previous + 1):
            parts.append(f"\\x{{{start:X}}}" if start == previous
                         else f"\\x{{{start:X}}}-\\x{{{previous:X}}}")
            start = None
        if start is None:
            start = c
        previous = c
    return "[" + "".join(parts) + "]"


# Stands in the graph for a character that Python's Unicode tables do not know but ICU's do
# (see `graph_character_classes`): a private-use character, in no vocabulary, that ICU leaves
# alone, so its word becomes [UNK] as the unknown character's does in Python.
_PLACEHOLDER = "\ue000"


@functools.cache
def graph_character_classes() -> dict[str, str]:
    """The character classes of `SentenceTokenizer.tokenize`, as RE2 classes for the graph.

    keras-hub's Python WordPiece path decides with Python's `unicodedata` (accent marks,
    category Mn; NFD and NFKC case folding) and the `regex` module (punctuation, control and
    format characters), whose Unicode versions differ from RE2's and from ICU's (TF Text's
    `normalize_utf8` and `case_fold_utf8`). The classes are listed code point by code point
    from those same Python tables, so the graph splits and strips exactly where `tokenize`
    does; characters unassigned in `unicodedata` that ICU would decompose or fold are
    listed as "unknown" (the graph replaces them with a placeholder). Runs TensorFlow
    eagerly (call it outside a trace, e.g. under `tf.init_scope()`).

    Returns:
        `{"mark", "split", "keep", "unknown"}`: accent marks removed after NFD; characters
        that end a word; those of them that are words of their own; characters Python
        leaves unchanged and ICU does not, outside "split" ("" when there are none).
    """
    import unicodedata

    import regex
    import tensorflow as tf
    import tensorflow_text as tf_text

    code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    everything = "".join(map(chr, code_points))

    def matching(pattern: str) -> set[int]:
        return {ord(m.group()) for m in regex.finditer(pattern, everything)}

    punctuation = matching(r"[!-/]|[:-@]|[\[-`]|[{-~]|\p{P}")
    cjk = {c for low, high in _CJK_RANGES for c in range(low, high + 1)}
    keep = punctuation | cjk
    split = keep | matching(r"[ \t\n\r\f]|\p{Cc}|\p{Cf}")
    categories = {c: unicodedata.category(chr(c)) for c in code_points}
    marks = [c for c in code_points if categories[c] == "Mn"]
    unassigned = [c for c in code_points if categories[c] == "Cn"]
    characters = [chr(c).encode() for c in unassigned]
    text = tf.constant(characters)
    folded = tf_text.case_fold_utf8(text).numpy()
    decomposed = tf_text.normalize_utf8(text, "NFD").numpy()
    # (None of them is punctuation or a word boundary: the placeholder is neither.)
    unknown = [c for c, b, f, d in zip(unassigned, characters, folded, decomposed)
               if (f not in (b, b"") or d != b) and c not in split]
    return {"mark": _re2_class(marks), "split": _re2_class(sorted(split)),
            "keep": _re2_class(sorted(keep)),
            "unknown": _re2_class(unknown) if unknown else ""}


def read_vocabulary(vocabulary: str | Path | Sequence[str]) -> list[str]:
    """A WordPiece vocabulary as a list of tokens, from a `vocab.txt` path or a sequence.

    Args:
        vocabulary: a path to a file of one token per line (the token's id is its line
            number), or the tokens themselves.

    Returns:
        The tokens, in id order.

    Raises:
        ValueError: if the vocabulary is empty, has duplicates, or lacks one of BERT's
            special tokens `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`.
    """
    if isinstance(vocabulary, (str, Path)):
        path = Path(vocabulary)
        if not path.is_file():
            raise UserError(f"vocabulary file {str(path)!r} does not exist")
        tokens = path.read_text(encoding="utf-8").splitlines()
        source = repr(str(path))
    else:
        tokens = [str(t) for t in vocabulary]
        source = "the given vocabulary"
    if not tokens:
        raise UserError(f"{source} is empty")
    if len(set(tokens)) != len(tokens):
        seen: set[str] = set()
        duplicates = sorted({t for t in tokens if t in seen or seen.add(t)})
        raise UserError(f"{source} has duplicate tokens: {duplicates[:5]}")
    missing = [t for t in _SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise UserError(f"{source} lacks the special tokens {missing}")
    return tokens


class SentenceTokenizer:
    """BERT's uncased WordPiece tokenization into padded `token_ids` / `padding_mask` arrays.

    Text is lowercased, accents are stripped, and punctuation and CJK characters are split off
    before WordPiece (keras-hub's `WordPieceTokenizer`, which gives the same ids as the
    Hugging Face `BertTokenizer` of uncased BERT models). Each text becomes
    `[CLS] tokens [SEP]`, truncated to `max_length` tokens in all; a batch is padded with
    `[PAD]` to its longest member.

    Args:
        vocabulary: a `vocab.txt` path or the tokens (see `read_vocabulary`).
        max_length: the most tokens per text, `[CLS]` and `[SEP]` included.
        lowercase: lowercase and strip accents (uncased models).

    Example:
    >>> tokenizer = SentenceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"])
    >>> batch = tokenizer(["Hello", "hello hello"])
    >>> batch["token_ids"].tolist(), batch["padding_mask"].tolist()
    ([[2, 4, 3, 0], [2, 4, 4, 3]], [[1, 1, 1, 0], [1, 1, 1, 1]])
    """

    def __init__(self, vocabulary: str | Path | Sequence[str], max_length: int = 256,
                 lowercase: bool = True) -> None:
        self.vocabulary = read_vocabulary(vocabulary)
        self.max_length = positive_int(max_length, "max_length")
        if self.max_length < 2:
            raise UserError(f"max_length must leave room for [CLS] and [SEP]; got {max_length}")
        self.lowercase = bool(lowercase)
        index = {token: i for i, token in enumerate(self.vocabulary)}
        self.pad_id, self.cls_id, self.sep_id = index["[PAD]"], index["[CLS]"], index["[SEP]"]
        self._graph_wordpiece: Any = None  # tensorflow_text's, built by tokenize_in_graph
        import keras_hub  # imported here: it is slow to import and only text input needs it

        self._wordpiece = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=self.vocabulary, lowercase=self.lowercase,
            strip_accents=self.lowercase, split=True, split_on_cjk=True, oov_token="[UNK]",
            dtype="int32",
        )

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, `[CLS]` and `[SEP]` included, truncated to `max_length`."""
        if isinstance(texts, str):
            raise UserError(f"texts must be a list of strings, not one string: {texts!r}")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise UserError(f"texts[{i}] is not a string: {text!r}")
        if not texts:
            return []
        pieces = self._wordpiece(texts)
        pieces = [np.asarray(ops.convert_to_numpy(p)).tolist() for p in pieces]
        body = self.max_length - 2
        return [[self.cls_id] + [int(t) for t in ids[:body]] + [self.sep_id] for ids in pieces]

    def __call__(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """`{"token_ids", "padding_mask"}` int32 arrays `(batch, longest)` for the texts."""
        ids = self.tokenize(texts)
        length = max((len(row) for row in ids), default=0)
        token_ids = np.full((len(ids), length), self.pad_id, dtype="int32")
        padding_mask = np.zeros((len(ids), length), dtype="int32")
        for i, row in enumerate(ids):
            token_ids[i, :len(row)] = row
            padding_mask[i, :len(row)] = 1
        return {"token_ids": token_ids, "padding_mask": padding_mask}

    def tokenize_in_graph(self, texts: Any) -> dict[str, Any]:
        """`__call__` with TensorFlow and TF Text ops only, for `tf.function`s and SavedModels.

        The same steps as `tokenize` (which runs keras-hub's Python WordPiece path): NFD and
        accent marks removed, words split at whitespace, control characters, punctuation
        and CJK ideographs, NFKC case folding, then `tensorflow_text.FastWordpieceTokenizer`
        over this tokenizer's vocabulary; `[CLS] ... [SEP]`, truncated to `max_length`.

        Args:
            texts: a `tf.string` tensor `(batch,)`.

        Returns:
            `{"token_ids", "padding_mask"}` int32 tensors `(batch, longest)`, padded with
            `[PAD]` as `__call__` pads.
        """
        import tensorflow as tf
        import tensorflow_text as tf_text

        with tf.init_scope():  # eager: the model buffer outlives the function traced
            classes = graph_character_classes()
            if self._graph_wordpiece is None:
                self._graph_wordpiece = tf_text.FastWordpieceTokenizer(
                    vocab=self.vocabulary, suffix_indicator="##", unknown_token="[UNK]",
                    max_bytes_per_word=_MAX_BYTES_PER_WORD, no_pretokenization=True,
                    support_detokenization=False, token_out_type=tf.int32)
        texts = tf.convert_to_tensor(texts, tf.string)
        # tensorflow_text.regex_split stops at a NUL byte; NUL is a word boundary anyway.
        texts = tf.strings.regex_replace(texts, "\\x00", " ")
        if self.lowercase:
            if classes["unknown"]:  # before ICU's NFD and case folding see them
                texts = tf.strings.regex_replace(texts, classes["unknown"], _PLACEHOLDER)
            texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"),
                                             classes["mark"], "")
        words = tf_text.regex_split(texts, classes["split"], classes["keep"])
        if self.lowercase:
            words = tf_text.case_fold_utf8(words)
        pieces = self._graph_wordpiece.tokenize(words).merge_dims(1, 2)
        batch = tf.shape(texts)[0]
        ids = tf.concat([tf.fill([batch, 1], self.cls_id),
                         pieces[:, : self.max_length - 2],
                         tf.fill([batch, 1], self.sep_id)], axis=1)
        return {"token_ids": ids.to_tensor(self.pad_id),
                "padding_mask": tf.ones_like(ids).to_tensor(0)}
