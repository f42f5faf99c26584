"""Installs as `zoo.layers` (never a top-level `layers`): reusable Keras 3 attention layers.

They are written with `keras.ops` only (no TensorFlow import). The names below load their
module (and Keras) on first use, so that the ground floor is cheap: `zoo.layers.validation`
serves the flag checks of `zoo --help` without loading Keras, and a small helper is imported
rather than copied.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module of this package that defines it; imported on first access (PEP 562).
_LAZY = {
    "ClassToken": "class_token",
    "FeedForward": "feed_forward",
    "LayerNormalization": "layer_normalization",
    "MultiHeadAttention": "multi_head_attention",
    "PatchEmbedding": "patch_embedding",
    "PositionEmbedding": "position_embedding",
    "SinusoidalPositionEncoding": "sinusoidal_position_encoding",
    "TokenEmbedding": "token_embedding",
    "TransformerDecoderBlock": "transformer_decoder",
    "TransformerEncoderBlock": "transformer_encoder",
    "causal_mask": "attention",
    "chunked_attention": "chunked_attention",
    "fused_attention": "attention",
    "interpolate_position_embedding": "position_embedding",
    "interpolate_position_embedding_2d": "position_embedding",
    "scaled_dot_product_attention": "attention",
    "sinusoidal_position_encoding": "sinusoidal_position_encoding",
    "sliding_window_attention": "chunked_attention",
    "sliding_window_mask": "chunked_attention",
}

__all__ = [
    "ClassToken",
    "FeedForward",
    "LayerNormalization",
    "MultiHeadAttention",
    "PatchEmbedding",
    "PositionEmbedding",
    "SinusoidalPositionEncoding",
    "TokenEmbedding",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "causal_mask",
    "chunked_attention",
    "fused_attention",
    "interpolate_position_embedding",
    "interpolate_position_embedding_2d",
    "scaled_dot_product_attention",
    "sinusoidal_position_encoding",
    "sliding_window_attention",
    "sliding_window_mask",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
