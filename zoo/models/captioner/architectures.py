"""Architectures of the image captioner (see `zoo.models.architectures`).

`ImageCaptioner.from_architecture(name)` builds a freshly initialised captioner of one of these
shapes, without a tokenizer; trained weights load by handle:
`zoo.load("hf://nlpconnect/vit-gpt2-image-captioning")`.

An architecture is two sets of arguments: `encoder` (a `ViTBackbone`'s) and `decoder` (a
`GPT2Backbone`'s, built with cross-attention); the images are mapped from 0..255 to [-1, 1],
as the ViT checkpoints' image processors do (mean = std = 0.5).
"""

from __future__ import annotations

from typing import Any

from zoo.models.architectures import register_architecture


def _captioner(name: str, description: str, encoder: dict[str, Any],
               decoder: dict[str, Any]) -> None:
    register_architecture("ImageCaptioner", name, description, encoder=encoder,
                          decoder=decoder)


_captioner(
    "vit-gpt2-captioner",
    "ViT-B/16 encoder (224 px) with GPT-2 small's decoder and cross-attention: the shape of "
    "nlpconnect's vit-gpt2 captioner (untrained; trained: "
    "hf://nlpconnect/vit-gpt2-image-captioning)",
    encoder=dict(image_size=224, patch_size=16, hidden_dim=768, num_layers=12, num_heads=12,
                 intermediate_dim=3072, layer_norm_epsilon=1e-12),
    decoder=dict(vocabulary_size=50257, num_layers=12, num_heads=12, hidden_dim=768,
                 intermediate_dim=3072, max_positions=1024, dropout=0.1,
                 attention_dropout=0.1))
_captioner(
    "captioner-tiny",
    "for tests and toy data: 32 px images in 8 px patches, encoder and decoder of 2 layers, "
    "width 32, 4 heads; 512 pieces, 64 positions",
    encoder=dict(image_size=32, patch_size=8, hidden_dim=32, num_layers=2, num_heads=4,
                 intermediate_dim=64, layer_norm_epsilon=1e-12),
    decoder=dict(vocabulary_size=512, num_layers=2, num_heads=4, hidden_dim=32,
                 intermediate_dim=128, max_positions=64))
