"""Searching a caption: `ImageCaptioner`'s greedy and beam search over the decoder's cache.

The searches are the translator's (`zoo.generation.greedy`, `zoo.generation.beam`); this
module feeds them the captioner's step. The image is encoded once, and each decoder block's
cross-attention keys and values of its tokens are computed once (`context`, which beam moves
leave alone and which follows its image when finished images leave an export's batch); the
self-attention cache starts empty and grows with the caption
(`zoo.generation.loop.cache_lengths`).

Every image has the same budget, `max_length` tokens (the end token included), so that its
caption does not depend on what else is searched with it.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from zoo.generation.beam import beam_search
from zoo.generation.greedy import greedy_search
from zoo.generation.settings import check_search_settings
from zoo.training.compilation import compile_for_backend

# The most caption tokens by default (the end token included): Hugging Face's `generate`
# default, and more than the captions of the usual data sets (COCO's are ~10 words).
DEFAULT_MAX_LENGTH = 20


class CaptionerSearch:
    """`ImageCaptioner`'s search methods: `generate` (the graph an export stores) and
    `search` (compiled once per shape)."""

    def next_logits(self, token_ids: Any, index: Any, cache: tuple, context: tuple
                    ) -> tuple[Any, tuple]:
        """The searches' step: `(rows, 1)` tokens at position `index` -> `((rows, vocab)
        float32 logits of the next token, cache)`; `context` holds every block's
        cross-attention `(keys, values)` of the rows' images."""
        hidden, cache = self.decoder.call_with_cache(token_ids, cache, index,
                                                     cross_attention_cache=context[0])
        return self.logits(hidden)[:, -1, :], cache

    def generate(self, images: Any, beam_size: int = 4,
                 max_length: int = DEFAULT_MAX_LENGTH, alpha: float = 0.6
                 ) -> tuple[Any, Any]:
        """Searches caption ids for `(batch, height, width, channels)` 0..255 images (not
        compiled; see `search`).

        Args:
            images: the images, of any size (resized to the encoder's).
            beam_size: 1 for greedy search.
            max_length: most caption tokens, the end token included (an int, or a scalar
                tensor in a TensorFlow graph).
            alpha: the GNMT length-penalty exponent of beam search.

        Returns:
            `(tokens, scores)`: with `beam_size` 1, `(batch, L)` tokens and `(batch,)`
            log-probabilities; otherwise `(batch, beam, L)` and `(batch, beam)`
            length-normalised scores, best first. After a caption's end token come end
            tokens (GPT-2 pads with it).
        """
        memory = self.encode(images, training=False)
        batch = ops.shape(memory)[0]  # an int, or a tensor in a graph of unknown batch
        context = (self.decoder.compute_cross_attention_cache(memory),)
        cache = self.decoder.empty_cache(batch, 0)
        if beam_size > 1:  # every image's rows repeated for its hypotheses (b * beam + k)
            cache, context = keras.tree.map_structure(
                lambda t: ops.repeat(t, beam_size, axis=0), (cache, context))

        def grow(cache: tuple, length: Any) -> tuple:
            return tuple(block.self_attention.grow_cache(pair, length)
                         for block, pair in zip(self.decoder.decoder_blocks, cache))

        end = self.end_id
        settings = dict(pad_id=end, grow_cache=grow, context=context,
                        length_limit=self.decoder.max_positions)
        if beam_size == 1:
            return greedy_search(self.next_logits, cache, batch, max_length, self.start_id,
                                 end, **settings)
        return beam_search(self.next_logits, cache, batch, beam_size, max_length,
                           self.start_id, end, alpha=alpha, **settings)

    def search(self, images: np.ndarray, beam_size: int = 4,
               max_length: int = DEFAULT_MAX_LENGTH, alpha: float = 0.6
               ) -> tuple[np.ndarray, np.ndarray]:
        """`generate`, compiled once per (images' shape, beam, length, alpha); the best
        hypothesis only: `(batch, max_length)` ids and `(batch,)` scores."""
        beam_size, max_length, alpha = check_search_settings(
            beam_size, max_length, self.decoder.max_positions, alpha)
        images = np.asarray(images, "float32")
        self.ensure_built()
        key = (images.shape, beam_size, max_length, alpha)
        if key not in self._search_functions:
            self._search_functions[key] = compile_for_backend(
                lambda pixels: self.generate(pixels, beam_size, max_length, alpha), self)
        tokens, scores = self._search_functions[key](images)
        tokens, scores = (np.asarray(ops.convert_to_numpy(t)) for t in (tokens, scores))
        if beam_size > 1:
            tokens, scores = tokens[:, 0], scores[:, 0]
        return tokens, scores


def until_end(ids: np.ndarray, end_id: int) -> list[int]:
    """A caption's ids before its first end token."""
    ids = [int(i) for i in ids]
    return ids[:ids.index(end_id)] if end_id in ids else ids
