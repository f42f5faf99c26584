"""Architectures of CLIP (Radford et al. 2021, tables 19 and 20; see `zoo.models.architectures`).

`CLIP.from_architecture(name)` (or `CLIPBackbone.from_architecture`) builds a freshly
initialised model of one of these shapes; trained weights load by handle:
`CLIP.from_preset("hf://openai/clip-vit-base-patch32")` / `zoo.load(...)`.
"""

from __future__ import annotations

from zoo.models.architectures import register_architecture

# OpenAI's byte-level BPE vocabulary and text context; the text tower of the ViT-B models.
_VOCABULARY, _CONTEXT = 49408, 77
_TEXT_B = dict(vocabulary_size=_VOCABULARY, context_length=_CONTEXT, text_hidden_dim=512,
               text_num_layers=12, text_num_heads=8, text_intermediate_dim=2048,
               embedding_dim=512)
_VISION_B = dict(image_size=224, vision_hidden_dim=768, vision_num_layers=12,
                 vision_num_heads=12, vision_intermediate_dim=3072)

register_architecture(
    "CLIPBackbone", "clip-vit-b32",
    "CLIP ViT-B/32's shape (untrained; trained: hf://openai/clip-vit-base-patch32): 224-pixel "
    "images in 32-pixel patches, ViT-B image tower, 12-layer width-512 text tower, space 512",
    patch_size=32, **_VISION_B, **_TEXT_B)
register_architecture(
    "CLIPBackbone", "clip-vit-b16",
    "CLIP ViT-B/16's shape (untrained; trained: hf://openai/clip-vit-base-patch16): as "
    "clip-vit-b32 with 16-pixel patches",
    patch_size=16, **_VISION_B, **_TEXT_B)
register_architecture(
    "CLIPBackbone", "clip-tiny",
    "a tiny CLIP for tests and CPUs: 32-pixel images in 16-pixel patches, two towers of 2 "
    "layers, width 32, 4 heads; OpenAI's vocabulary and context; space 32",
    image_size=32, patch_size=16, vision_hidden_dim=32, vision_num_layers=2,
    vision_num_heads=4, vision_intermediate_dim=64, vocabulary_size=_VOCABULARY,
    context_length=_CONTEXT, text_hidden_dim=32, text_num_layers=2, text_num_heads=4,
    text_intermediate_dim=64, embedding_dim=32)
