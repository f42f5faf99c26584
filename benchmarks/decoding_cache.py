"""Greedy decoding speed with and without the key/value cache, as a ratio (CPU or GPU).

    python benchmarks/decoding_cache.py [--architecture transformer-multi30k] [--batch 16]
        [--source-length 24] [--new-tokens 32] [--repeats 3]

Both decoders are compiled (`compile_for_backend`) and generate the same tokens from the
same random-weight model. With the cache, step i runs the decoder on one token and attends
to i cached keys; without it, step i runs the whole decoder over the target buffer again
(causally masked), which is what decoding without a cache costs. Timed by the harness
(`zoo.bench.steps.seconds_per_call`, best of `--repeats`); writes
benchmarks/results/decoding_cache-BACKEND-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import json

import keras
import numpy as np
from keras import ops

from zoo.bench.report import write_benchmark
from zoo.bench.steps import seconds_per_call
from zoo.generation.greedy import greedy_search
from zoo.training.compilation import compile_for_backend
from zoo.models.architectures import ARCHITECTURES, architectures
from zoo.models.translator.model import Translator


def uncached_greedy(model: Translator, source_ids, max_length: int, start_id: int = 2,
                    end_id: int = 3):
    """Greedy search that recomputes the full decoder over the buffer at every step."""
    memory, source_mask = model.encode(source_ids)
    batch = ops.shape(source_ids)[0]

    def next_logits(tokens, index, cache):
        buffer = cache[0]
        buffer = ops.slice_update(buffer, [0, index], tokens)
        logits = model.decode(buffer, memory, source_mask)  # (batch, L, vocab)
        step = ops.take(logits, index, axis=1)
        return step, (buffer,)

    buffer = ops.zeros((batch, max_length + 1), "int32")
    return greedy_search(next_logits, (buffer,), batch, max_length, start_id, end_id)


def timed(fn, *args, repeats: int) -> tuple[float, np.ndarray]:
    """The best of `repeats` timed calls of `fn(*args)` after one that compiles, and the
    tokens it generated."""
    out = {}

    def call() -> None:
        out["tokens"] = np.asarray(ops.convert_to_numpy(fn(*args)[0]))

    call()  # compile
    return min(seconds_per_call(call) for _ in range(repeats)), out["tokens"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architecture", default="transformer-multi30k",
                        choices=list(architectures("Translator")))
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--source-length", type=int, default=24)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    model = Translator(vocabulary_size=args.vocabulary_size,
                       **ARCHITECTURES[args.architecture].config)
    model.ensure_built()
    rng = np.random.default_rng(0)
    source = rng.integers(4, args.vocabulary_size, (args.batch, args.source_length)).astype(
        "int32")
    # No end token: both decoders run all `new_tokens` steps.
    cached = compile_for_backend(
        lambda ids: model.generate(ids, beam_size=1, max_length=args.new_tokens), model)
    uncached = compile_for_backend(
        lambda ids: uncached_greedy(model, ids, args.new_tokens, end_id=-1), model)
    t_cached, tokens_cached = timed(cached, source, repeats=args.repeats)
    t_uncached, tokens_uncached = timed(uncached, source, repeats=args.repeats)
    generated = args.batch * args.new_tokens
    result = {
        "backend": keras.backend.backend(),
        "architecture": args.architecture,
        "settings": vars(args),
        "cached_seconds": round(t_cached, 4),
        "uncached_seconds": round(t_uncached, 4),
        "cached_tokens_per_second": round(generated / t_cached, 1),
        "uncached_tokens_per_second": round(generated / t_uncached, 1),
        "speedup": round(t_uncached / t_cached, 2),
        "same_first_tokens": bool(np.array_equal(tokens_cached[:, :8], tokens_uncached[:, :8])),
    }
    print(json.dumps(result, indent=2))
    write_benchmark(__file__, result, variant=keras.backend.backend())


if __name__ == "__main__":
    main()
