"""Reusable Keras 3 attention layers, written with `keras.ops` only (no TensorFlow import)."""

from zoo.layers.attention import causal_mask, fused_attention, scaled_dot_product_attention
from zoo.layers.chunked_attention import (
    chunked_attention,
    sliding_window_attention,
    sliding_window_mask,
)
from zoo.layers.class_token import ClassToken
from zoo.layers.feed_forward import FeedForward
from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.multi_head_attention import MultiHeadAttention
from zoo.layers.patch_embedding import PatchEmbedding
from zoo.layers.position_embedding import (
    PositionEmbedding,
    interpolate_position_embedding,
    interpolate_position_embedding_2d,
)
from zoo.layers.sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
    sinusoidal_position_encoding,
)
from zoo.layers.token_embedding import TokenEmbedding
from zoo.layers.transformer_decoder import TransformerDecoderBlock
from zoo.layers.transformer_encoder import TransformerEncoderBlock

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
