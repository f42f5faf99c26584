"""`CausalLM`'s generation: prompts to ids, the sampling loop or beam search compiled once per
shape, ids back to text, stop strings, and streaming one token at a time.

The loop is `zoo.generation.sampling.sample` (greedy, random, top-k, top-p) or
`zoo.generation.beam.beam_search` (the translator's); this module only feeds them the model's
step, `CausalLM.next_logits`, over the backbone's key/value cache.

On TensorFlow the generation functions are graphs without XLA (`jit_compile=False`): XLA
compiles each prompt width and setting anew, which took seconds per shape on a CPU, more than
a short generation's steps cost (JAX compiles always).
"""

from __future__ import annotations

import functools
import random
from typing import Any, Iterator, Sequence

import numpy as np
from keras import ops

from zoo.generation.beam import beam_search
from zoo.generation.samplers import (
    BeamSampler,
    Sampler,
    check_repetition_penalty,
    get_sampler,
)
from zoo.generation.sampling import initial_state, sample, sampling_step
from zoo.generation.settings import check_max_new_tokens
from zoo.text.base import _as_strings
from zoo.training.compilation import compile_for_backend
from zoo.training.errors import UserError


class CausalLMGeneration:
    """`generate`, `generate_ids` and `stream` of a `CausalLM`."""

    def next_logits(self, token_ids: Any, index: Any, cache: tuple) -> tuple[Any, tuple]:
        """The step the searches call: `(batch, 1)` tokens at position `index` ->
        `((batch, vocab) float32 logits of the next token, cache)`."""
        hidden, cache = self.backbone.call_with_cache(token_ids, cache, index)
        return self.logits(hidden)[:, -1, :], cache

    def _prefilled(self, tokens: Any, width: int, total: int) -> tuple:
        """The cache of `total` positions after one pass over `tokens[:, :width]`."""
        cache = self.backbone.empty_cache(ops.shape(tokens)[0], total)
        if width:
            _, cache = self.backbone.call_with_cache(tokens[:, :width], cache, 0)
        return cache

    def _settings(self, prompt_ids: Sequence[Sequence[int]], max_new_tokens: Any,
                  sampler: Any, repetition_penalty: Any) -> tuple[int, Sampler, float]:
        """The checked settings (before anything is traced or allocated)."""
        sampler = get_sampler(sampler)
        longest = max((len(p) for p in prompt_ids), default=1)
        limit = self.backbone.max_positions - longest
        return (check_max_new_tokens(max_new_tokens, limit), sampler,
                check_repetition_penalty(repetition_penalty))

    def _prompt_ids(self, prompt_ids: Sequence[Sequence[int]]) -> list[list[int]]:
        """Each prompt as a list of ids in the vocabulary; an empty one starts with the end
        token, as Hugging Face's `generate` starts from its start token."""
        end, size = self.end_id, self.backbone.vocabulary_size
        prompts = []
        for index, ids in enumerate(prompt_ids):
            ids = [int(i) for i in ids] or [end]
            if not all(0 <= i < size for i in ids):
                raise UserError(f"prompt {index} holds an id outside the vocabulary "
                                f"[0, {size}): {ids}")
            prompts.append(ids)
        return prompts

    def generate_ids(self, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int = 50,
                     sampler: str | Sampler = "greedy", seed: int | None = None,
                     repetition_penalty: float = 1.0) -> list[list[int]]:
        """The new ids of each prompt, up to (not including) its end token.

        The prompts are read exactly as given, no start token added (Hugging Face's
        `generate`); an empty prompt starts from the end token.

        Args: as `generate`, with prompts as lists of token ids.
        """
        prompts = self._prompt_ids(prompt_ids)
        max_new, sampler, penalty = self._settings(prompts, max_new_tokens, sampler,
                                                   repetition_penalty)
        if not prompts:
            return []
        self.ensure_built()
        if isinstance(sampler, BeamSampler):
            return [self._beam_ids(p, max_new, sampler) for p in prompts]
        seed = random.randrange(1 << 31) if seed is None else _seed(seed)
        width = max(len(p) for p in prompts)
        tokens = np.full((len(prompts), width + max_new), self.end_id, "int32")
        for row, ids in enumerate(prompts):
            tokens[row, :len(ids)] = ids
        lengths = np.array([len(p) for p in prompts], "int32")
        key = ("sample", tokens.shape, width, sampler, penalty)
        if key not in self._generate_functions:
            self._generate_functions[key] = compile_for_backend(functools.partial(
                self._sample_graph, width=width, max_new=max_new, sampler=sampler,
                penalty=penalty), self, jit_compile=False)
        out = np.asarray(ops.convert_to_numpy(self._generate_functions[key](
            tokens, lengths, np.int32(seed))))
        return [_until_end(out[row, n:n + max_new], self.end_id)
                for row, n in enumerate(lengths)]

    def _sample_graph(self, tokens: Any, lengths: Any, seed: Any, width: int, max_new: int,
                      sampler: Sampler, penalty: float) -> Any:
        cache = self._prefilled(tokens, width, width + max_new)
        return sample(self.next_logits, tokens, lengths, cache, max_new, sampler, self.end_id,
                      self.backbone.vocabulary_size, seed, penalty)

    def _beam_ids(self, prompt: list[int], max_new: int, sampler: BeamSampler) -> list[int]:
        """Beam search from one prompt: its last token starts every hypothesis."""
        key = ("beam", len(prompt), max_new, sampler)
        if key not in self._generate_functions:
            self._generate_functions[key] = compile_for_backend(functools.partial(
                self._beam_graph, max_new=max_new, sampler=sampler), self, jit_compile=False)
        tokens = self._generate_functions[key](np.array([prompt], "int32"))
        return _until_end(np.asarray(ops.convert_to_numpy(tokens))[0], self.end_id)

    def _beam_graph(self, prompt: Any, max_new: int, sampler: BeamSampler) -> Any:
        beams, offset = sampler.num_beams, prompt.shape[1] - 1
        cache = self._prefilled(prompt, offset, offset + max_new)
        cache = tuple((ops.repeat(k, beams, axis=0), ops.repeat(v, beams, axis=0))
                      for k, v in cache)
        last = ops.repeat(prompt[:, offset:], beams, axis=0)

        def next_logits(tokens: Any, index: Any, cache: tuple, context: tuple) -> tuple:
            # Step 0 feeds the search's start token: the prompt's last one instead.
            tokens = ops.where(index == 0, context[0][: ops.shape(tokens)[0]], tokens)
            return self.next_logits(tokens, index + offset, cache)

        tokens, _ = beam_search(next_logits, cache, 1, beams, max_new, self.end_id,
                                self.end_id, pad_id=self.end_id, alpha=sampler.alpha,
                                context=(last,))
        return tokens[:, 0]

    # ------------------------------------------------------------------ text
    def generate(self, prompts: Sequence[str], max_new_tokens: int = 50,
                 sampler: str | Sampler = "greedy", seed: int | None = None,
                 stop_strings: Sequence[str] = (), repetition_penalty: float = 1.0
                 ) -> list[str]:
        """Continues each prompt: the prompt followed by its generated text.

        The model reads each prompt after its start token (the end-of-text token, as each
        training text began) unless its preprocessor has `add_start_token=False`; the text
        returned never holds that token. `generate_ids` takes ids exactly as given.

        Args:
            prompts: the texts to continue (a list of strings).
            max_new_tokens: most tokens generated per prompt, from 1 to what the model's
                positions leave after the longest prompt.
            sampler: "greedy", "beam", "random", "top_k", "top_p", or a sampler object
                (`zoo.generation.samplers`, e.g. `TopPSampler(p=0.9, temperature=0.7)`).
            seed: an int that makes a sampled run repeatable (None: a fresh draw).
            stop_strings: a continuation is cut after the first of these it writes.
            repetition_penalty: CTRL's penalty of tokens already present (1: none).

        Returns:
            One string per prompt.

        Raises:
            UserError: a bad setting (the message names it), or a model without tokenizer.
        """
        texts = _as_strings(prompts)
        stops = _stop_strings(stop_strings)
        tokenizer = self.preprocessor.require_tokenizer() if self.preprocessor else None
        if tokenizer is None:
            raise UserError("this language model has no tokenizer; use generate_ids")
        new = self.generate_ids(self.preprocessor.prompt_ids(texts), max_new_tokens, sampler,
                                seed, repetition_penalty)
        return [text + _cut(continuation, stops)
                for text, continuation in zip(texts, tokenizer.decode(new))]

    def stream(self, prompt: str, max_new_tokens: int = 50, sampler: str | Sampler = "greedy",
               seed: int | None = None, stop_strings: Sequence[str] = (),
               repetition_penalty: float = 1.0) -> Iterator[str]:
        """The continuation of one prompt, piece by piece as its tokens come (the same
        tokens as `generate`; beam search gives its text at the end).

        Args: as `generate`, for one prompt.
        """
        (text,) = _as_strings([prompt])
        stops = _stop_strings(stop_strings)
        tokenizer = self.preprocessor.require_tokenizer() if self.preprocessor else None
        if tokenizer is None:
            raise UserError("this language model has no tokenizer")
        prompts = self._prompt_ids(self.preprocessor.prompt_ids([text]))
        max_new, sampler, penalty = self._settings(prompts, max_new_tokens, sampler,
                                                   repetition_penalty)
        if isinstance(sampler, BeamSampler):
            new = self.generate_ids(prompts, max_new, sampler)[0]
            yield _cut(tokenizer.decode([new])[0], stops)
            return
        yield from self._stream_pieces(prompts[0], max_new, sampler, penalty, seed, stops)

    def _stream_pieces(self, prompt: list[int], max_new: int, sampler: Sampler,
                       penalty: float, seed: int | None, stops: list[str]) -> Iterator[str]:
        self.ensure_built()
        seed = random.randrange(1 << 31) if seed is None else _seed(seed)
        tokens = np.full((1, len(prompt) + max_new), self.end_id, "int32")
        tokens[0, :len(prompt)] = prompt
        key = ("stream", len(prompt), max_new, sampler, penalty)
        if key not in self._generate_functions:
            self._generate_functions[key] = (
                compile_for_backend(lambda t: initial_state(
                    t, np.array([len(prompt)], "int32"),
                    self._prefilled(t, len(prompt), t.shape[1]),
                    self.backbone.vocabulary_size, penalty != 1.0), self, jit_compile=False),
                compile_for_backend(
                    lambda s, *state: sampling_step(self.next_logits, sampler, self.end_id,
                                                    max_new, s, penalty, *state), self,
                    jit_compile=False))
        start, step = self._generate_functions[key]
        state, decoder, written = start(tokens), self.preprocessor.tokenizer.stream_decoder(), ""
        for _ in range(max_new):
            state = step(np.int32(seed), *state)
            i = int(ops.convert_to_numpy(state[0]))
            token = int(np.asarray(ops.convert_to_numpy(state[1]))[0, i])
            if token == self.end_id:
                break
            piece = decoder.add(token)
            stop = _first_stop(written + piece, stops)
            if stop is not None:
                yield (written + piece)[len(written):stop]
                return
            written += piece
            yield piece
            if bool(np.asarray(ops.convert_to_numpy(state[2]))[0]):
                break
        yield decoder.finish()


def _seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise UserError(f"seed must be an integer; got {seed!r}")
    return int(seed) % (1 << 31)


def _until_end(ids: Any, end_id: int) -> list[int]:
    ids = [int(i) for i in ids]
    return ids[:ids.index(end_id)] if end_id in ids else ids


def _stop_strings(stop_strings: Any) -> list[str]:
    if isinstance(stop_strings, str):
        stop_strings = [stop_strings]
    stops = list(stop_strings or ())
    if not all(isinstance(s, str) and s for s in stops):
        raise UserError(f"stop_strings must be non-empty strings; got {stop_strings!r}")
    return stops


def _first_stop(text: str, stops: list[str]) -> int | None:
    """Where `text` ends at its first stop string (the stop string kept), or None."""
    ends = [text.find(s) + len(s) for s in stops if s in text]
    return min(ends) if ends else None


def _cut(text: str, stops: list[str]) -> str:
    end = _first_stop(text, stops)
    return text if end is None else text[:end]
