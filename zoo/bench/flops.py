"""The floating-point operations of the bench's works, counted from their shapes.

Only the matrix products are counted, each `2 * m * n * k` (a multiply and an add per term),
as model-FLOP-utilisation figures count them: the elementwise work (normalisation, softmax,
GELU, the optimizer's update) is a few percent of these models' and runs at another rate.
Attention is counted over every key a query reads (the whole square in training, no credit
for a causal mask; the cached positions so far in decoding), so that the count is the work
any implementation must do, not what one of them pads or skips. A training step counts three
times its forward pass (the backward pass computes two products for each of the forward's),
the convention of Kaplan et al. (2020) and of PaLM's MFU.

`zoo.bench.works.flops_per_unit` applies these to each work's shapes;
tests/zoo/bench/test_flops.py checks them against PyTorch's own count (`FlopCounterMode`) of
timm's ViT and Hugging Face's Marian, which nobody here wrote.
"""

from __future__ import annotations

from typing import Mapping

TRAINING_MULTIPLE = 3  # forward + backward (two products per forward product)


def _block_flops(tokens: int, keys: int, hidden_dim: int, intermediate_dim: int) -> int:
    """One pre- or post-norm Transformer encoder block on `tokens` tokens attending over
    `keys` keys: the query/key/value/output projections, scores and weighted sum, and the
    two feed-forward products."""
    d, f = hidden_dim, intermediate_dim
    projections = 2 * tokens * d * d * 4
    attention = 2 * tokens * keys * d * 2
    feed_forward = 2 * tokens * d * f * 2
    return projections + attention + feed_forward


def vit_forward_flops(shape: Mapping[str, int]) -> int:
    """One image's forward pass through a ViT with a class token: the patch embedding, every
    block over `patches + 1` tokens, and the head on the class token.

    Args:
        shape: `image_size`, `patch_size`, `num_layers`, `hidden_dim`, `intermediate_dim`,
            `num_classes` (the zoo's VisionTransformer arguments).

    Example:
        >>> vit_forward_flops(dict(image_size=32, patch_size=4, num_layers=6, hidden_dim=192,
        ...                        num_heads=3, intermediate_dim=384, num_classes=10))
        250683648
    """
    patches = (shape["image_size"] // shape["patch_size"]) ** 2
    d = shape["hidden_dim"]
    embed = 2 * patches * (shape["patch_size"] ** 2 * 3) * d
    blocks = shape["num_layers"] * _block_flops(patches + 1, patches + 1, d,
                                                shape["intermediate_dim"])
    return embed + blocks + 2 * d * shape["num_classes"]


def vit_train_flops(shape: Mapping[str, int]) -> int:
    """One image's training step (forward and backward) through `vit_forward_flops`'s ViT."""
    return TRAINING_MULTIPLE * vit_forward_flops(shape)


def _encoder_flops(shape: Mapping[str, int], source_tokens: int) -> int:
    """One sentence through the translator's encoder."""
    return shape["num_encoder_layers"] * _block_flops(
        source_tokens, source_tokens, shape["hidden_dim"], shape["intermediate_dim"])


def generation_flops(shape: Mapping[str, int], sentences: int, source_tokens: int,
                     new_tokens: int, beam: int = 1) -> int:
    """An encoder-decoder Transformer generating `new_tokens` tokens for each of `sentences`
    sentences of `source_tokens` tokens with a key/value cache, greedy (`beam` 1) or with
    `beam` hypotheses: the encoder once per sentence; for each of the `sentences * beam`
    decoder rows, the cross-attention keys and values once, then per step its self-attention
    (projections of one token, scores over the positions cached so far, itself included),
    cross-attention (query and output projections, scores over the source), feed-forward
    network and output projection over the vocabulary. The beam's bookkeeping (top-k,
    reordering the cache) is not a product.

    Args:
        shape: `vocabulary_size`, `hidden_dim`, `num_encoder_layers`,
            `num_decoder_layers`, `intermediate_dim` (the zoo's Translator arguments).
    """
    d, f, v = shape["hidden_dim"], shape["intermediate_dim"], shape["vocabulary_size"]
    layers = shape["num_decoder_layers"]
    rows = sentences * beam
    cross_keys_values = layers * 2 * source_tokens * d * d * 2
    per_step = layers * (2 * d * d * 4           # self-attention projections
                         + 2 * d * d * 2          # cross-attention query and output
                         + 2 * source_tokens * d * 2
                         + 2 * d * f * 2) + 2 * d * v
    # Step t (1-based) attends over t cached positions: sum over t of 2 * t * d * 2.
    self_scores = layers * 2 * d * 2 * new_tokens * (new_tokens + 1) // 2
    decoder = rows * (cross_keys_values + new_tokens * per_step + self_scores)
    return sentences * _encoder_flops(shape, source_tokens) + decoder


def translation_train_flops(shape: Mapping[str, int], sentences: int, source_tokens: int,
                            target_tokens: int) -> int:
    """A teacher-forced training step (forward and backward) of the encoder-decoder on
    `sentences` pairs of `source_tokens` and `target_tokens` tokens: the encoder, every
    decoder block (self-attention over all target positions, cross-attention over the
    source) and the output projection at every target position."""
    d, f, v = shape["hidden_dim"], shape["intermediate_dim"], shape["vocabulary_size"]
    t, s = target_tokens, source_tokens
    decoder_block = (_block_flops(t, t, d, f)            # self-attention and FFN
                     + 2 * s * d * d * 2                   # cross keys and values
                     + 2 * t * d * d * 2                   # cross query and output
                     + 2 * t * s * d * 2)                  # cross scores and sum
    forward = (_encoder_flops(shape, s) + shape["num_decoder_layers"] * decoder_block
               + 2 * t * d * v)
    return TRAINING_MULTIPLE * sentences * forward


def matmul_flops(size: int) -> int:
    """A `size x size` by `size x size` matrix product: `2 * size**3`."""
    return 2 * size ** 3
