"""Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers").

Raw attention weights of one layer say little about which inputs a deep model's output draws
on, because every layer mixes tokens again and the residual path carries each token forward.
Rollout models both: each layer's attention is averaged with the identity (the residual) and
the layers are multiplied through. For a ViT, the class token's row of the product, over the
patches, is a heat map of the image regions the prediction rests on.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from zoo.training.errors import UserError

HEAD_FUSIONS = ("mean", "max", "min")


def attention_rollout(
    attention_maps: Sequence[np.ndarray],
    num_prefix_tokens: int = 1,
    discard_ratio: float = 0.0,
    head_fusion: str = "mean",
) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020, section 3) over a stack of attention maps.

    Each layer's heads are fused (mean, max or min), optionally the weakest `discard_ratio`
    of the fused weights of each example are zeroed (Gildenblat's variant), the residual
    connection is added as `A = 0.5 W + 0.5 I` with rows renormalised to sum to 1, and the
    layers are multiplied through, `R = A_L ... A_2 A_1`. Row `i` of `R` says how much each
    input token flows into output token `i`.

    Args:
        attention_maps: per layer, in order, `(batch, heads, tokens, tokens)` weights.
        num_prefix_tokens: 1 when token 0 is a class token, whose row is read out; 0 (global
            average pooling) reads out the mean of all rows, as the pooled output is the mean
            of all tokens.
        discard_ratio: fraction in [0, 1) of each example's fused weights to zero.
        head_fusion: "mean", "max" or "min" over heads.

    Returns:
        `(batch, patches)` float32: the relevance of each patch, a distribution (non-negative,
        summing to 1 over the patches).

    Raises:
        ValueError: for an unknown `head_fusion`, a `discard_ratio` outside [0, 1), or no
            maps.
    """
    if head_fusion not in HEAD_FUSIONS:
        raise UserError(f"head_fusion must be one of {HEAD_FUSIONS}; got {head_fusion!r}")
    if not 0.0 <= float(discard_ratio) < 1.0:
        raise UserError(f"discard_ratio must be in [0, 1); got {discard_ratio!r}")
    if not attention_maps:
        raise UserError("attention rollout needs at least one attention map")
    fuse = {"mean": np.mean, "max": np.max, "min": np.min}[head_fusion]
    tokens = attention_maps[0].shape[-1]
    identity = np.eye(tokens)
    rollout = np.broadcast_to(identity, (attention_maps[0].shape[0], tokens, tokens))
    for weights in attention_maps:
        fused = fuse(np.asarray(weights, "float64"), axis=1)  # (batch, tokens, tokens)
        discard = int(tokens * tokens * float(discard_ratio))
        if discard:
            flat = fused.reshape(fused.shape[0], -1).copy()
            weakest = np.argsort(flat, axis=-1, kind="stable")[:, :discard]
            np.put_along_axis(flat, weakest, 0.0, axis=-1)
            fused = flat.reshape(fused.shape)
        mixed = 0.5 * fused + 0.5 * identity  # the residual path (section 3 of the paper)
        mixed = mixed / mixed.sum(axis=-1, keepdims=True)
        rollout = mixed @ rollout
    if num_prefix_tokens:
        relevance = rollout[:, 0, num_prefix_tokens:]
    else:
        relevance = rollout.mean(axis=1)
    return (relevance / relevance.sum(axis=-1, keepdims=True)).astype("float32")
