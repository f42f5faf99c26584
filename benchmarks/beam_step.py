"""Where a beam-search step's time goes: the parts of one step of `zoo bench`'s mt-beam4.

    python benchmarks/beam_step.py [--rows 128] [--seconds 1] [--rounds 3]

Each part runs 32 times inside one compiled loop (`compile_for_backend`: XLA on TensorFlow,
as the searches run) and is reported in ms per step, best of `--rounds`:

- the decoder step (`Translator.decode_step`, its logits consumed) of the bench's 3+3-layer
  Transformer (d 256, 8 heads, FFN 1024, vocabulary 8,000), `--rows` rows (32 sentences x
  beam 4) and 33 cache positions; and the same with a vocabulary of 800 and with an FFN of
  256, whose differences are the output projection's and the FFNs' share; with 1 and 65
  cache positions (the self-attention over the cache); with one decoder layer of three;
- the beam's reorder of the self-attention cache (a gather of every buffer's rows), one per
  loop iteration and two (as `zoo.generation.beam`'s beam search runs them: XLA then need not copy
  the gathered cache back into the loop's buffer);
- the top 4 of each row of `(rows, 8000)` logits: `keras.ops.top_k` and
  `zoo.generation.top_k.blocked_top_k`.

Random weights and inputs; timed by the harness (`zoo.bench.steps.measure`). Writes
benchmarks/results/beam_step-BACKEND-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

import keras
import numpy as np
from keras import ops

from zoo.bench.report import write_benchmark
from zoo.bench.steps import measure
from zoo.bench.workers import MT
from zoo.generation.top_k import blocked_top_k
from zoo.training.compilation import compile_for_backend
from zoo.models.translator.model import Translator

STEPS, CACHE_LENGTH, SOURCE_LENGTH, BEAM = 32, 33, 24, 4


def ms_per_step(fn: Callable[[], Any], seconds: float, rounds: int) -> float:
    """Best over `rounds` of the mean time of `fn` (a loop of `STEPS` steps), per step."""
    def call() -> None:
        keras.ops.convert_to_numpy(fn())

    call()  # compiles
    best = min(1.0 / measure(call, 1, seconds, warmup=0, min_calls=2) for _ in range(rounds))
    return 1000 * best / STEPS


def decoder_step(rows: int, seconds: float, rounds: int, cache_length: int = CACHE_LENGTH,
                 **changes: int) -> float:
    """ms per `decode_step` at `rows` rows and `cache_length` cache positions, the bench's
    shape with `changes`."""
    keras.utils.set_random_seed(0)
    model = Translator(dropout=0.0, **{**MT, **changes})
    model.ensure_built()
    source = np.random.default_rng(0).integers(4, 799, (rows, SOURCE_LENGTH)).astype("int32")

    def steps(source_ids: Any) -> Any:
        memory, mask = model.encode(source_ids)
        self_cache, cross_cache = model.initial_cache(memory, cache_length)
        tokens = ops.full((rows, 1), 5, "int32")

        def body(i: Any, state: tuple) -> tuple:
            total, cache = state
            logits, cache = model.decode_step(tokens, i, cache, cross_cache, mask)
            return total + ops.max(logits), cache

        return ops.fori_loop(0, STEPS, body, (ops.zeros(()), self_cache))[0]

    compiled = compile_for_backend(steps, model)
    return ms_per_step(lambda: compiled(source), seconds, rounds)


def looped(part: Callable[[Any, Any], Any], argument: Any, seconds: float, rounds: int,
           per_iteration: int = 1) -> float:
    """ms per step of `part(step, argument)` (which returns the next argument), looped,
    `per_iteration` steps in each iteration of the loop (as the beam search runs two)."""
    def iteration(i: Any, x: Any) -> Any:
        for k in range(per_iteration):
            x = part(i * per_iteration + k, x)
        return x

    compiled = compile_for_backend(
        lambda x: ops.fori_loop(0, STEPS // per_iteration, iteration, x),
        keras.layers.Identity())
    return ms_per_step(lambda: keras.tree.flatten(compiled(argument))[0], seconds, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows, timing = args.rows, (args.seconds, args.rounds)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(rows, MT["vocabulary_size"])).astype("float32")
    head_dim = MT["hidden_dim"] // MT["num_heads"]
    buffers = tuple(rng.normal(size=(rows, MT["num_heads"], CACHE_LENGTH, head_dim))
                    .astype("float32") for _ in range(2 * MT["num_decoder_layers"]))

    def reorder(i: Any, cache: tuple) -> tuple:
        # Each row takes a beam-mate's history, a different one at every step.
        parent = (ops.arange(rows, dtype="int32") // BEAM) * BEAM + (i % BEAM)
        return tuple(ops.take(c, parent, axis=0) for c in cache)

    def top_k_part(find: Callable) -> Callable:
        def part(i: Any, x: Any) -> Any:
            top, indices = find(x, BEAM)
            return x + 1e-3 * (ops.sum(top) + ops.cast(ops.sum(indices), "float32"))
        return part

    parts = {
        "decoder step": decoder_step(rows, *timing),
        "decoder step, vocabulary 800": decoder_step(rows, *timing, vocabulary_size=800),
        "decoder step, FFN 256": decoder_step(rows, *timing, intermediate_dim=256),
        "decoder step, 1 cache position": decoder_step(rows, *timing, cache_length=1),
        "decoder step, 65 cache positions": decoder_step(rows, *timing, cache_length=65),
        "decoder step, 1 decoder layer": decoder_step(rows, *timing, num_decoder_layers=1),
        "cache reorder": looped(reorder, buffers, *timing),
        "cache reorder, two per iteration": looped(reorder, buffers, *timing, per_iteration=2),
        "keras.ops.top_k": looped(top_k_part(lambda x, k: ops.top_k(x, k=k)), logits, *timing),
        "blocked_top_k": looped(top_k_part(blocked_top_k), logits, *timing),
    }
    for name, ms in parts.items():
        print(f"{name:32s} {ms:6.2f} ms per step")
    result = {
        "benchmark": "beam_step", "backend": keras.backend.backend(),
        "settings": {"rows": rows, "cache_length": CACHE_LENGTH, "steps": STEPS, **MT},
        "ms_per_step": {name: round(ms, 3) for name, ms in parts.items()},
    }
    write_benchmark(__file__, result, variant=keras.backend.backend())


if __name__ == "__main__":
    main()
