"""Reusable Keras 3 attention layers, written with `keras.ops` only (no TensorFlow import)."""

from layers.attention import causal_mask, fused_attention, scaled_dot_product_attention
from layers.feed_forward import FeedForward
from layers.multi_head_attention import MultiHeadAttention
from layers.transformer_decoder import TransformerDecoderBlock
from layers.transformer_encoder import TransformerBlock, TransformerEncoderBlock

__all__ = [
    "FeedForward",
    "MultiHeadAttention",
    "TransformerBlock",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "causal_mask",
    "fused_attention",
    "scaled_dot_product_attention",
]
