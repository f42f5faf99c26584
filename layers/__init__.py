"""Reusable Keras 3 attention layers, written with `keras.ops` only (no TensorFlow import)."""

from .attention import causal_mask, fused_attention, scaled_dot_product_attention
from .chunked_attention import (
    chunked_attention,
    sliding_window_attention,
    sliding_window_mask,
)
from .class_token import ClassToken
from .feed_forward import FeedForward
from .layer_normalization import LayerNormalization
from .multi_head_attention import MultiHeadAttention
from .patch_embedding import PatchEmbedding
from .position_embedding import (
    PositionEmbedding,
    interpolate_position_embedding,
    interpolate_position_embedding_2d,
)
from .sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
    sinusoidal_position_encoding,
)
from .token_embedding import TokenEmbedding
from .transformer_decoder import TransformerDecoderBlock
from .transformer_encoder import TransformerEncoderBlock

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
