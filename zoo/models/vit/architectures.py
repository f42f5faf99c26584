"""Architectures of the Vision Transformer (Dosovitskiy et al., 2021, table 1).

An architecture names a shape, not trained weights: `VisionTransformer.from_architecture(name)`
builds a freshly initialised model of that shape (see `zoo.models.architectures`). Trained models are
loaded with `VisionTransformer.from_preset` / `zoo.load`.

The ImageNet-scale presets are the paper's ViT-B/16 and ViT-L/16 and the DeiT paper's
ViT-Ti/16 and ViT-S/16 (Touvron et al., 2021, table 1), at 224 x 224 pixels, patch 16, with
1000 classes: 5,717,416 (Ti), 22,050,664 (S), 86,567,656 (B) and 304,326,632 (L) parameters.

"vit-s16-384-window" is ViT-S/16 at 384 x 384 pixels (a 24 x 24 grid, 577 tokens) with
sliding-window attention (`attention_window`, see `zoo.layers.sliding_window_attention`): each
patch attends to the patches within 48 positions of it in row-major order (two grid rows
above and below), and the class token attends to and is attended by all (`global_tokens=1`);
22,196,584 parameters with 1000 classes (the 224-pixel model's plus 380 more position
embeddings).

The CIFAR-scale presets take 32 x 32 images cut into 4 x 4 patches (an 8 x 8 grid, 65 tokens
with the class token), the usual set-up for training a ViT from scratch on CIFAR-10:
- "vit-cifar-tiny" (1,806,538 parameters with 10 classes) trains on a CPU;
- "vit-cifar-small" (6,268,810 parameters with 10 classes) follows the ~6.3M-parameter ViT
  that reaches about 90% on CIFAR-10 trained from scratch with strong augmentation
  (hidden 384, 7 layers, MLP 384);
- "vit-cifar-hybrid" is the hybrid ViT of the paper's section 3.1 at CIFAR scale: two
  stride-2 3 x 3 convolutions (48 and 96 channels, batch norm, ReLU; Xiao et al., 2021) then
  1 x 1 patches of their 8 x 8 map, with vit-cifar-tiny's encoder.
- "vit-cifar-cct" takes the tokenizer of the Compact Convolutional Transformer CCT-4/3x2
  (Hassani et al., 2021: two 3 x 3 convolutions of 64 and 128 channels, each with ReLU and a
  stride-2 max pooling, no batch norm) and its encoder (width 128, 4 layers, 2 heads, MLP
  128), and keeps the ViT's class token where CCT pools the sequence: 500,298 parameters
  with 10 classes, a third of vit-cifar-tiny's training cost per image.
- "vit-cifar-cct7" is the same at CCT-7/3x2's size (convolutions of 64 and 256 channels,
  width 256, 7 layers, 4 heads, MLP 512; 93.65% on CIFAR-10 in 300 epochs as CCT, Hassani et
  al. table 2): 3,924,682 parameters with 10 classes, for a GPU.
- "vit-cifar-vgg" is the hybrid for training on a CPU: a batch-normalised VGG stem of the
  fast CIFAR-10 networks (stages of 64, then 128 and 128, then 256 channels, each stage ended
  by a 2 x 2 max pooling) turns the image into a 4 x 4 map, whose 16 positions are the
  patches (patch 8, 17 tokens with the class token) of a 4-layer encoder of width 256 (4
  heads, MLP 512): 2,702,026 parameters with 10 classes. Most of its cost is the stem's, and
  at 17 tokens the encoder adds a third to it.
"""

from __future__ import annotations

from typing import Any

from zoo.models.architectures import register_architecture

_IMAGENET = {"image_size": 224, "patch_size": 16, "num_classes": 1000}
_CIFAR = {"image_size": 32, "patch_size": 4, "num_classes": 10}


def _vit(name: str, description: str, **config: Any) -> None:
    register_architecture("VisionTransformer", name, description, **config)


_vit("vit-ti16-224", "ViT-Ti/16 (DeiT-Ti): 224 px, patch 16, 192 dim, 12 layers, 3 heads",
     **_IMAGENET, hidden_dim=192, num_layers=12, num_heads=3, intermediate_dim=768)
_vit("vit-s16-224", "ViT-S/16 (DeiT-S): 224 px, patch 16, 384 dim, 12 layers, 6 heads",
     **_IMAGENET, hidden_dim=384, num_layers=12, num_heads=6, intermediate_dim=1536)
_vit("vit-b16-224", "ViT-B/16: 224 px, patch 16, 768 dim, 12 layers, 12 heads",
     **_IMAGENET, hidden_dim=768, num_layers=12, num_heads=12, intermediate_dim=3072)
_vit("vit-l16-224", "ViT-L/16: 224 px, patch 16, 1024 dim, 24 layers, 16 heads",
     **_IMAGENET, hidden_dim=1024, num_layers=24, num_heads=16, intermediate_dim=4096)
_vit("vit-s16-384-window",
     "ViT-S/16 at 384 px with sliding-window attention (window 48, the class token global): "
     "577 tokens, 12 layers, 6 heads",
     **{**_IMAGENET, "image_size": 384}, hidden_dim=384, num_layers=12, num_heads=6,
     intermediate_dim=1536, attention_window=48, global_tokens=1)
_vit("vit-cifar-tiny", "CIFAR-scale ViT: 32 px, patch 4, 192 dim, 6 layers, 3 heads",
     **_CIFAR, hidden_dim=192, num_layers=6, num_heads=3, intermediate_dim=384, dropout=0.1)
_vit("vit-cifar-small",
     "CIFAR-scale ViT (~6.3M parameters): 32 px, patch 4, 384 dim, 7 layers, 8 heads",
     **_CIFAR, hidden_dim=384, num_layers=7, num_heads=8, intermediate_dim=384, dropout=0.1)
_vit("vit-cifar-hybrid",
     "CIFAR-scale hybrid ViT: conv stem (48, 96), 1 x 1 patches, 192 dim, 6 layers, 3 heads",
     **_CIFAR, hidden_dim=192, num_layers=6, num_heads=3, intermediate_dim=384, dropout=0.1,
     stem_filters=[48, 96])
_vit("vit-cifar-cct",
     "CIFAR-scale ViT with CCT-4/3x2's tokenizer (convolutions 64, 128, max pooling) and "
     "encoder: 128 dim, 4 layers, 2 heads, MLP 128",
     **_CIFAR, hidden_dim=128, num_layers=4, num_heads=2, intermediate_dim=128, dropout=0.1,
     stem_filters=[64, 128], stem_style="pooled")
_vit("vit-cifar-cct7",
     "CIFAR-scale ViT with CCT-7/3x2's tokenizer (convolutions 64, 256, max pooling) and "
     "encoder: 256 dim, 7 layers, 4 heads, MLP 512",
     **_CIFAR, hidden_dim=256, num_layers=7, num_heads=4, intermediate_dim=512, dropout=0.1,
     stem_filters=[64, 256], stem_style="pooled")
_vit("vit-cifar-vgg",
     "CIFAR-scale hybrid ViT for a CPU: VGG stem (64 | 128, 128 | 256, batch norm, max "
     "pooling) to a 4 x 4 map, 256 dim, 4 layers, 4 heads, MLP 512",
     **{**_CIFAR, "patch_size": 8}, hidden_dim=256, num_layers=4, num_heads=4,
     intermediate_dim=512, stem_filters=[64, [128, 128], 256], stem_style="vgg")
