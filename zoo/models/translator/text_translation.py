"""Sentences in, sentences out: the tokenizer side of the Transformer translator.

`Translator` takes these methods from `TextTranslation`: tokenizing source sentences into
padded id batches, translating them in batches of similar length through `Translator.search`,
and aligning a sentence pair by cross-attention. The tokenizer is the preprocessor's
(`zoo.models.translator.preprocessor.TranslatorPreprocessor`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from keras import ops

from zoo.training.errors import UserError
from zoo.generation.settings import check_search_settings
from zoo.text.base import Tokenizer
from zoo.text.tokenizer import SubwordTokenizer


class TextTranslation:
    """`Translator`'s methods that take and return text, and save its tokenizer."""

    def require_tokenizer(self) -> SubwordTokenizer:
        """The translator's tokenizer; a one-line UserError when it has none (a model built
        from ids alone cannot take text)."""
        return self.preprocessor.require_tokenizer()

    @property
    def source_character_cap(self) -> int:
        """The characters of a source text read (the preprocessor's
        `source_character_cap`)."""
        return self.preprocessor.source_character_cap

    def cut_sources(self, texts: Sequence[str]) -> list[str]:
        """`texts` cut to `source_character_cap` characters each, with one warning that
        names the cut texts by their index."""
        return self.preprocessor.cut_sources(texts, cap=self.source_character_cap)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Source texts to `(batch, S)` ids, S rounded up to a multiple of 8 (fewer shapes
        to compile), truncated at `max_source_length` with a warning (each text cut to
        `source_character_cap` characters first): `TranslatorPreprocessor.encode_texts`."""
        self.require_tokenizer()
        texts = self.cut_sources([_as_text(t, i) for i, t in enumerate(texts)])
        return self.preprocessor.pad(self.preprocessor.tokenize(texts))

    def translate(self, texts: Sequence[str] | str, beam_size: int = 4,
                  max_length: int | None = None, alpha: float = 0.6,
                  batch_size: int = 64, return_scores: bool = False,
                  progress: Callable[[int], None] | None = None) -> Any:
        """Translates a list of sentences.

        Args:
            texts: source sentences (a single string is treated as a list of one).
            beam_size: 1 for greedy search.
            max_length: most output tokens; by default each sentence's own budget, 1.5 x its
                source length (rounded up to a multiple of 8) + 10, capped
                (`source_budgets`): the same whatever else is in `texts`.
            alpha: GNMT length-penalty exponent.
            batch_size: sentences decoded together; sentences of similar length go together
                (the batches follow the source length), so that a batch pads little and its
                searches end together.
            return_scores: also return each translation's score.
            progress: called with the number of sentences each batch translated, as it
                finishes (e.g. `zoo.training.progress.Step.advance`).

        Returns:
            `list[str]`, or `(list[str], list[float])` with `return_scores`. Empty or blank
            inputs give empty translations. A text longer than `source_character_cap`
            characters is cut to them first, with a warning naming its index: the model
            reads `max_source_length` tokens of it at most (zoo/text/length_cap.py).
        """
        beam_size, max_length, alpha = check_search_settings(
            beam_size, max_length, self.max_target_length, alpha)
        if isinstance(texts, (str, bytes)):
            texts = [texts]
        tokenizer = self.require_tokenizer()
        texts = self.cut_sources([_as_text(t, i) for i, t in enumerate(texts)])
        outputs, scores = [""] * len(texts), [0.0] * len(texts)
        todo = [i for i, t in enumerate(texts) if t.strip()]
        encoded = dict(zip(todo, self.preprocessor.tokenize([texts[i] for i in todo])
                           if todo else []))
        # By source length: batches of like lengths pad less, so they translate faster than
        # the sentences in their own order, to the same translations (docs/performance-log.md).
        todo.sort(key=lambda i: len(encoded[i]))
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            ids = self.preprocessor.pad([encoded[i] for i in chunk])
            tokens, chunk_scores = self.search(ids, beam_size, max_length, alpha)
            if beam_size > 1:
                tokens, chunk_scores = tokens[:, 0], chunk_scores[:, 0]
            for i, text, score in zip(chunk, tokenizer.decode(tokens), chunk_scores):
                outputs[i], scores[i] = text, float(score)
            if progress is not None:
                progress(len(chunk))
        return (outputs, scores) if return_scores else outputs

    def cross_attention(self, text: str, translation: str | None = None,
                        beam_size: int = 4) -> tuple[list[str], list[str], np.ndarray]:
        """Source-by-target alignment of one sentence pair, for a heatmap.

        Runs the decoder over the (given or generated) translation and averages the last
        decoder block's cross-attention over heads.

        Returns:
            `(source_pieces, target_pieces, weights (target, source))`.
        """
        tokenizer = self.require_tokenizer()
        (text,) = self.cut_sources([_as_text(text, 0)])
        if translation is None:
            translation = self.translate([text], beam_size=beam_size)[0]
        source = np.array(tokenizer.encode([text], max_length=self.max_source_length), "int32")
        target = tokenizer.encode([translation], add_start=True, add_end=False,
                                  target=True)
        target = np.array(target, "int32")
        memory, mask = self.encode(source)
        _, cross = self.decode(target, memory, mask, return_attention_scores=True)
        weights = np.asarray(ops.convert_to_numpy(ops.mean(cross[-1], axis=1)))[0]
        pieces = tokenizer.id_to_piece if isinstance(tokenizer, Tokenizer) else str
        source_pieces = [pieces(int(i)) for i in source[0]]
        # Row t of the weights predicts target token t + 1: label rows by what they predict.
        target_pieces = [pieces(int(i)) for i in target[0][1:]] + ["</s>"]
        return source_pieces, target_pieces, weights



def _as_text(text: Any, position: int) -> str:
    """A source sentence as `str`; bytes must be UTF-8, and a `str` must not hold a lone
    surrogate (what Python makes of bytes that are not UTF-8 in `sys.argv` or a file name)."""
    if isinstance(text, bytes):
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise UserError(
                f"input {position} is not valid UTF-8 ({error.reason} at byte {error.start}): "
                f"{text[:40]!r}") from None
    if not isinstance(text, str):
        raise TypeError(f"translate expects strings; input {position} is "
                        f"{type(text).__name__}: {text!r}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise UserError(
            f"input {position} is not text: it holds the lone surrogate "
            f"{ord(text[error.start]):#06x} at character {error.start} (bytes that were not "
            f"UTF-8, decoded with surrogateescape?): {text[:40]!r}") from None
    return text
