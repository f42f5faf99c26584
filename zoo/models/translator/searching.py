"""Searching a translation: `Translator`'s greedy and beam search over its key/value cache.

`Translator` takes these methods from `TranslatorSearch`: `generate` (the search, as a graph an
export stores), `search` (compiled once per shape), and the output budgets. Each sentence has
its own budget, that of its own source length (`source_budgets`), so that its translation is
the same whatever else is searched with it: in a batch of `translate`, in a served request, in
the server's batch.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from zoo.generation.beam import beam_search
from zoo.generation.greedy import greedy_search
from zoo.generation.settings import NEVER, check_search_settings
from zoo.training.compilation import compile_for_backend


class TranslatorSearch:
    """`Translator`'s search methods (greedy and beam, their budgets, their compilation)."""

    def generate(self, source_ids: Any, beam_size: int = 4, max_length: int | None = None,
                 alpha: float = 0.6, max_lengths: Any | None = None) -> tuple[Any, Any]:
        """Searches target ids for `(batch, S)` source ids (not compiled; see `search`).

        Args:
            source_ids: `(batch, S)` int32, padded with `pad_id`.
            beam_size: 1 for greedy search.
            max_length: most output tokens of any sentence; None: each sentence's own
                budget (`source_budgets`), within that of the width S rounded up to a
                multiple of 8, so that a sentence's translation does not depend on the
                others in its batch nor on how far its ids were padded.
            alpha: GNMT length-penalty exponent.
            max_lengths: `(batch,)` int32, each sentence's most tokens, each at most
                `max_length`; None: as `max_length` says.

        Returns:
            `(tokens, scores)`: with `beam_size` 1, greedy `(batch, L)` tokens and `(batch,)`
            log-probabilities; otherwise `(batch, beam, L)` and `(batch, beam)`
            length-normalised scores, best first.
        """
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        batch = ops.shape(source_ids)[0]  # an int, or a tensor in a graph of unknown batch
        if max_length is None:
            max_length = self.default_max_length(_padded_width(source_ids.shape[1],
                                                               self.max_source_length))
            if max_lengths is None:
                max_lengths = self.source_budgets(source_ids)
        if max_lengths is not None:
            max_lengths = ops.minimum(max_lengths, max_length)
        memory, source_mask = self.encode(source_ids)
        # The self-attention cache starts empty: the search grows it to the lengths it
        # needs (`zoo.generation.loop.cache_lengths`; one full length for small searches).
        self_cache, cross_cache = self.initial_cache(memory, 0)
        # What every step reads and no step changes; it follows its sentence when finished
        # sentences leave the batch (an export's graph). A forced end token needs each
        # sentence's last position.
        context = (cross_cache, source_mask)
        if self.force_end_at_max_length:
            context += (ops.full((batch,), max_length, "int32") if max_lengths is None
                        else ops.cast(max_lengths, "int32"),)
        if beam_size > 1:
            # Every sentence's rows repeated beam_size times (row b * beam + k), after its
            # cross-attention keys and values are computed once (not once per hypothesis).
            self_cache, context = keras.tree.map_structure(
                lambda t: ops.repeat(t, beam_size, axis=0), (self_cache, context))

        start, end = self.special_ids()

        def next_logits(tokens: Any, index: Any, cache: tuple, context: tuple
                        ) -> tuple[Any, tuple]:
            logits, new_cache = self.decode_step(tokens, index, cache, *context[:2])
            if self.force_end_at_max_length:
                # A sentence's last allowed token can only be the end token.
                only_end = ops.where(ops.arange(self.vocabulary_size) == end, 0.0, NEVER)
                last = ops.expand_dims(index >= context[2] - 1, 1)
                logits = ops.where(last, logits + only_end, logits)
            return logits, new_cache

        settings = dict(pad_id=self.pad_id, grow_cache=self.backbone.grow_cache,
                        context=context,
                        length_limit=self.max_target_length, max_lengths=max_lengths)
        if beam_size == 1:
            return greedy_search(next_logits, self_cache, batch, max_length, start, end,
                                 **settings)
        return beam_search(next_logits, self_cache, batch, beam_size, max_length, start,
                           end, alpha=alpha, **settings)

    def default_max_length(self, source_length: int) -> int:
        """Output budget relative to the source: 1.5 x source + 10 tokens, capped."""
        return int(min(self.max_target_length, 1.5 * source_length + 10))

    def source_budgets(self, source_ids: Any) -> Any:
        """Each sentence's own output budget, `(batch,)` int32: `default_max_length` of its
        source length (its ids other than `pad_id`) rounded up to a multiple of 8, at most
        `max_source_length`: the budget it has alone, as `translate` pads it. A search gives
        each sentence its own budget, so that its translation does not depend on the longest
        source in its batch (the batch's padded width)."""
        lengths = ops.sum(ops.cast(ops.not_equal(source_ids, self.pad_id), "int32"), axis=1)
        padded = _padded_width(lengths, self.max_source_length)
        budget = ops.floor(1.5 * ops.cast(padded, "float32") + 10.0)
        return ops.minimum(self.max_target_length, ops.cast(budget, "int32"))

    def search(self, source_ids: np.ndarray, beam_size: int = 4, max_length: int | None = None,
               alpha: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
        """`generate`, compiled once per (batch, source length, beam, length, alpha): with
        no `max_length`, each sentence has its own budget (`source_budgets`)."""
        # Before anything is traced: a bad value is one line, and a huge max_length never
        # allocates its cache.
        beam_size, max_length, alpha = check_search_settings(
            beam_size, max_length, self.max_target_length, alpha)
        source_ids = np.asarray(source_ids, dtype="int32")
        self.ensure_built()
        key = (source_ids.shape, beam_size, max_length, alpha)
        if key not in self._search_functions:
            self._search_functions[key] = compile_for_backend(
                lambda ids: self.generate(ids, beam_size, max_length, alpha), self)
        tokens, scores = self._search_functions[key](source_ids)
        return np.asarray(ops.convert_to_numpy(tokens)), np.asarray(ops.convert_to_numpy(scores))


def _padded_width(length: Any, max_source_length: int) -> Any:
    """A source length rounded up to a multiple of 8 (as `encode_texts` pads), at most
    `max_source_length`: an int, or a tensor of lengths."""
    if isinstance(length, int):
        return min(max_source_length, -(-length // 8) * 8)
    return ops.minimum(max_source_length, (length + 7) // 8 * 8)
