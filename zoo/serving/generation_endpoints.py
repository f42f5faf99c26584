"""A causal language model's serving signature, as `zoo.serving.export.export_model` exports
it: `serving_default` takes `tf.string [batch]` prompts and returns `completions` (each
prompt followed by its continuation, as `CausalLM.generate`) and `new_tokens` (int32, how
many tokens each continuation has). Byte-pair tokenization (keras-hub's layer on TF Text
ops), the sampling loop over the key/value cache and detokenization run in the graph.

The other inputs are optional scalars, filled from the signature's defaults when a request
leaves them out (the SignatureDef's `defaults`, which TF Serving applies):
`max_new_tokens` (`DEFAULT_NEW_TOKENS`, 32, or the cap if smaller), `temperature` (0:
greedy, the default; above 0 a top-p draw of logits divided by it), `top_p` (1.0) and `seed`
(-1: a fresh draw each request; 0 or more: the same draws for the same request).

Each prompt is read after the model's start token, as `CausalLM.generate` reads it (unless
its preprocessor has `add_start_token=False`); the completions never hold that token.

Each refusal is InvalidArgument before the model runs, naming the cap: more than
`MAX_PROMPTS` prompts, a prompt of more than `prompt_byte_cap` bytes (before tokenizing) or
`prompt_token_cap` tokens (its start token not counted), `max_new_tokens` outside
1..`new_token_cap`, a temperature or top-p outside its range. Prompt (start token included)
and new tokens together stay within the model's positions, so the cache of a request holds
at most `MAX_PROMPTS x max_positions` positions a layer.

A greedy continuation does not depend on what shares the request: rows never read one
another (`zoo.generation.sampling`). A sampled one depends on its row and on the shortest
prompt of the request (the noise is a hash of seed, step and row): the same request with the
same seed repeats its answer.
"""

from __future__ import annotations

from typing import Any

from zoo.generation.samplers import GreedySampler, draw, top_p_filter
from zoo.generation.sampling import initial_state, sampling_step
from zoo.serving.chunks import check_batch_size

# The most prompts one request may hold: every prompt's cache is held for the whole request.
MAX_PROMPTS = 8
# The new tokens a request gets when it does not say.
DEFAULT_NEW_TOKENS = 32
# UTF-8 bytes of a prompt allowed per prompt token (before tokenizing; a GPT-2 piece is
# rarely longer than 16 bytes).
BYTES_PER_TOKEN = 16


def prompt_token_cap(max_positions: int, add_start_token: bool = False) -> int:
    """The most tokens of a served prompt's text: half the model's positions (512 for GPT-2),
    less the start token that a model with `add_start_token` reads before it (511)."""
    return max(1, int(max_positions) // 2) - int(add_start_token)


def new_token_cap(max_positions: int) -> int:
    """The most new tokens a served request may ask: the positions a longest prompt (its
    start token included) leaves."""
    return max(1, int(max_positions) - prompt_token_cap(max_positions))


def prompt_byte_cap(max_positions: int) -> int:
    """The most UTF-8 bytes of a served prompt, checked before tokenizing it."""
    return prompt_token_cap(max_positions) * BYTES_PER_TOKEN


class _ServedSampler:
    """Greedy at temperature 0, else a top-p draw; temperature and p are graph tensors."""

    uses_noise = True

    def __init__(self, temperature: Any, top_p: Any) -> None:
        self.temperature, self.top_p = temperature, top_p

    def choose(self, logits: Any, noise: Any) -> Any:
        import tensorflow as tf

        def sampled() -> Any:
            scaled = logits / tf.maximum(self.temperature, 1e-6)
            return draw(top_p_filter(scaled, self.top_p), noise)

        return tf.cond(self.temperature > 0, sampled,
                       lambda: GreedySampler().choose(logits, noise))


def _check(condition: Any, *message: Any) -> Any:
    import tensorflow as tf

    return tf.debugging.Assert(condition, list(message))


def causal_lm_endpoints(model: Any) -> tuple[Any, Any]:
    """The `serving_default` `tf.function` of an exported `CausalLM` and the tokenizer layer
    it uses (to track).

    Raises:
        UserError: the model has no tokenizer.
    """
    import tensorflow as tf

    tokenizer = model.preprocessor.require_tokenizer()
    layer = tokenizer.layer
    layer(tf.constant(["build"]))
    end_id, vocabulary = model.end_id, model.backbone.vocabulary_size
    positions, add_start = model.backbone.max_positions, model.preprocessor.add_start_token
    token_cap, new_cap, byte_cap = (prompt_token_cap(positions, add_start),
                                    new_token_cap(positions), prompt_byte_cap(positions))
    pieces = tf.constant([tokenizer.piece_bytes(i) for i in range(vocabulary)])

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="prompts"),
        tf.TensorSpec([], tf.int32, name="max_new_tokens"),
        tf.TensorSpec([], tf.float32, name="temperature"),
        tf.TensorSpec([], tf.float32, name="top_p"),
        tf.TensorSpec([], tf.int32, name="seed")])
    def generate(prompts: Any, max_new_tokens: Any, temperature: Any, top_p: Any,
                 seed: Any) -> dict:
        longest_bytes = tf.reduce_max(tf.concat([tf.strings.length(prompts), [0]], 0))
        with tf.control_dependencies([
                check_batch_size(prompts, MAX_PROMPTS, "prompts"),
                _check(longest_bytes <= byte_cap, "a prompt of", longest_bytes,
                       "bytes is longer than the limit of", byte_cap, "bytes"),
                _check((max_new_tokens >= 1) & (max_new_tokens <= new_cap),
                       "max_new_tokens must be from 1 to", new_cap, "; got", max_new_tokens),
                _check((temperature >= 0) & (temperature <= 100),
                       "temperature must be from 0 (greedy) to 100; got", temperature),
                _check((top_p > 0) & (top_p <= 1), "top_p must be in (0, 1]; got", top_p)]):
            ids = tf.cast(layer(prompts), tf.int32)
        if isinstance(ids, tf.Tensor):
            ids = tf.RaggedTensor.from_tensor(ids, padding=end_id)
        longest = tf.reduce_max(tf.concat([tf.cast(ids.row_lengths(), tf.int32), [0]], 0))
        with tf.control_dependencies([_check(
                longest <= token_cap, "a prompt of", longest,
                "tokens is longer than the limit of", token_cap, "tokens")]):
            if add_start:  # the start token before each prompt, as `CausalLM.generate`'s
                ids = tf.concat([tf.RaggedTensor.from_tensor(
                    tf.fill([tf.shape(prompts)[0], 1], end_id)), ids], axis=1)
            lengths = tf.cast(ids.row_lengths(), tf.int32)
            longest = tf.reduce_max(tf.concat([lengths, [0]], 0))
            # An empty prompt (without start token) starts from the end token, as there.
            dense = ids.to_tensor(end_id, shape=[tf.shape(prompts)[0], tf.maximum(longest, 1)])
        seed = tf.where(seed < 0, tf.random.uniform([], 0, 2**31 - 1, tf.int32), seed)
        new = _continue(model, dense, tf.maximum(lengths, 1), max_new_tokens,
                        _ServedSampler(temperature, top_p), seed)
        kept = tf.cumsum(tf.cast(tf.equal(new, end_id), tf.int32), axis=1) == 0
        new = tf.ragged.boolean_mask(new, kept)
        text = tf.strings.reduce_join(tf.gather(pieces, new), axis=-1)
        # Bytes that are not UTF-8 (a character cut off) become U+FFFD, as `decode` does.
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        return {"completions": tf.strings.join([prompts, text]),
                "new_tokens": tf.cast(new.row_lengths(), tf.int32)}

    return generate, layer


def signature_defaults(max_positions: int) -> dict[str, Any]:
    """The values of the optional inputs of `serving_default` when a request leaves them
    out (`max_new_tokens`: `DEFAULT_NEW_TOKENS`, or `new_token_cap` if smaller)."""
    import numpy as np

    new = min(DEFAULT_NEW_TOKENS, new_token_cap(max_positions))
    return {"max_new_tokens": np.int32(new), "temperature": np.float32(0.0),
            "top_p": np.float32(1.0), "seed": np.int32(-1)}


def write_signature_defaults(export_dir: Any, signature: str, defaults: dict) -> None:
    """Writes `defaults` into the `defaults` map of `signature`'s SignatureDef in
    `export_dir/saved_model.pb` (what `tf.saved_model.save` writes for a `tf.function`'s
    default arguments; Keras' export saves concrete functions, which have none)."""
    from pathlib import Path

    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    path = Path(export_dir) / "saved_model.pb"
    saved_model = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    for meta_graph in saved_model.meta_graphs:
        for key, value in defaults.items():
            meta_graph.signature_def[signature].defaults[key].CopyFrom(
                tf.make_tensor_proto(value))
    path.write_bytes(saved_model.SerializeToString())


def _continue(model: Any, prompts: Any, lengths: Any, max_new_tokens: Any, sampler: Any,
              seed: Any) -> Any:
    """`(batch, max_new_tokens)` int32: each prompt's new tokens (the end token after the
    last), by `zoo.generation.sampling`'s step in a `tf.while_loop` whose buffer and cache
    are as wide as the request's longest prompt and `max_new_tokens` (graph tensors)."""
    import tensorflow as tf

    end_id = model.end_id
    batch, width = tf.shape(prompts)[0], tf.shape(prompts)[1]
    total = width + max_new_tokens
    tokens = tf.concat([prompts, tf.fill([batch, max_new_tokens], end_id)], axis=1)
    cache = model.backbone.empty_cache(batch, total)
    _, cache = model.backbone.call_with_cache(prompts, cache, 0)  # the prefill
    state = initial_state(tokens, lengths, cache, model.backbone.vocabulary_size, False)

    def running(i: Any, tokens: Any, finished: Any, *rest: Any) -> Any:
        return tf.logical_and(i < total - 1, tf.logical_not(tf.reduce_all(finished)))

    def step(*state: Any) -> tuple:
        return sampling_step(model.next_logits, sampler, end_id, max_new_tokens, seed, 1.0,
                             *state)

    _, tokens, *_ = tf.while_loop(running, step, state, maximum_iterations=total,
                                  parallel_iterations=1)
    columns = tf.range(max_new_tokens)[None, :] + lengths[:, None]
    return tf.gather(tokens, columns, batch_dims=1)
