"""Removing heads from a built `MultiHeadAttention`, the other heads unchanged.

The output projection is a sum over heads, so dropping head h's rows of W^O (and its columns
of W^Q, W^K, W^V) removes just that head's contribution. The new layer is made by
`from_config` with the smaller `num_heads`, and given the kept heads' weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .multi_head_attention import MultiHeadAttention


def prune_attention_heads(layer: MultiHeadAttention, heads: Sequence[int]
                          ) -> MultiHeadAttention:
    """A new, built copy of the multi-head attention `layer` without the given heads.

    Args:
        layer: a built `MultiHeadAttention`.
        heads: indices of the heads to remove, in `[0, num_heads)`.

    Returns:
        A layer of `layer`'s class with `num_heads - len(set(heads))` heads, whose heads
        compute as the kept heads of `layer`.

    Raises:
        ValueError: if `layer` is not built, a head is out of range, or every head would go.

    Example:
    >>> import numpy as np
    >>> from zoo.layers import MultiHeadAttention
    >>> mha = MultiHeadAttention(num_heads=4, key_dim=2)
    >>> _ = mha(np.zeros((1, 3, 8), "float32"))
    >>> prune_attention_heads(mha, [0, 2]).num_heads
    2
    """
    if not layer.built:
        raise ValueError("pruning heads needs a built layer; call it on data first")
    heads = sorted({int(h) for h in heads})
    bad = [h for h in heads if not 0 <= h < layer.num_heads]
    if bad:
        raise ValueError(f"heads {bad} are out of range for a layer of {layer.num_heads} heads")
    if len(heads) >= layer.num_heads:
        raise ValueError(f"cannot remove all {layer.num_heads} heads")
    keep = [h for h in range(layer.num_heads) if h not in heads]
    pruned = type(layer).from_config({**layer.get_config(), "num_heads": len(keep)})
    # The query, value and key sizes `layer` was built for (batch and length unknown).
    pruned.build(*((None, None, size) for size in (
        layer._query_dim, layer._value_input_dim, layer._key_input_dim)))
    for old, new in ((layer.query_dense, pruned.query_dense),
                     (layer.key_dense, pruned.key_dense),
                     (layer.value_dense, pruned.value_dense)):
        kernel, *bias = old.get_weights()  # (d, heads, head_dim), (heads, head_dim)
        new.set_weights([kernel[:, keep, :]] + [b[keep, :] for b in bias])
    kernel, *bias = layer.output_dense.get_weights()  # (heads, value_dim, d_out), (d_out,)
    pruned.output_dense.set_weights([kernel[keep, :, :]] + bias)
    if layer.query_key_norm:  # one scale and offset for every head: kept as they are
        pruned.query_norm.set_weights(layer.query_norm.get_weights())
        pruned.key_norm.set_weights(layer.key_norm.get_weights())
    return pruned
