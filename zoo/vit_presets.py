"""Architecture presets of the Vision Transformer (Dosovitskiy et al., 2021, table 1).

A preset names an architecture, not trained weights: `VisionTransformer.from_preset(name)`
builds a freshly initialised model of that shape. (Trained models are loaded with
`zoo.load`.)

The ImageNet-scale presets are the paper's ViT-B/16 and ViT-L/16 and the DeiT paper's
ViT-Ti/16 and ViT-S/16 (Touvron et al., 2021, table 1), at 224 x 224 pixels, patch 16, with
1000 classes: 5,717,416 (Ti), 22,050,664 (S), 86,567,656 (B) and 304,326,632 (L) parameters.

"vit-s16-384-window" is ViT-S/16 at 384 x 384 pixels (a 24 x 24 grid, 577 tokens) with
sliding-window attention (`attention_window`, see `layers.sliding_window_attention`): each
patch attends to the patches within 48 positions of it in row-major order (two grid rows
above and below), and the class token attends to and is attended by all (`global_tokens=1`);
22,196,584 parameters with 1000 classes (the 224-pixel model's plus 380 more position
embeddings).

The CIFAR-scale presets take 32 x 32 images cut into 4 x 4 patches (an 8 x 8 grid, 65 tokens
with the class token), the usual set-up for training a ViT from scratch on CIFAR-10:
- "vit-cifar-tiny" (1,806,538 parameters with 10 classes) trains on a CPU;
- "vit-cifar-small" (6,268,810 parameters with 10 classes) follows the ~6.3M-parameter ViT
  that reaches about 90% on CIFAR-10 trained from scratch with strong augmentation
  (hidden 384, 7 layers, MLP 384).
"""

from __future__ import annotations

from typing import Any

_IMAGENET = {"image_size": 224, "patch_size": 16, "num_classes": 1000}
_CIFAR = {"image_size": 32, "patch_size": 4, "num_classes": 10}

VIT_PRESETS: dict[str, dict[str, Any]] = {
    "vit-ti16-224": {
        **_IMAGENET, "hidden_dim": 192, "num_layers": 12, "num_heads": 3,
        "intermediate_dim": 768,
    },
    "vit-s16-224": {
        **_IMAGENET, "hidden_dim": 384, "num_layers": 12, "num_heads": 6,
        "intermediate_dim": 1536,
    },
    "vit-b16-224": {
        **_IMAGENET, "hidden_dim": 768, "num_layers": 12, "num_heads": 12,
        "intermediate_dim": 3072,
    },
    "vit-l16-224": {
        **_IMAGENET, "hidden_dim": 1024, "num_layers": 24, "num_heads": 16,
        "intermediate_dim": 4096,
    },
    "vit-s16-384-window": {
        **_IMAGENET, "image_size": 384, "hidden_dim": 384, "num_layers": 12, "num_heads": 6,
        "intermediate_dim": 1536, "attention_window": 48, "global_tokens": 1,
    },
    "vit-cifar-tiny": {
        **_CIFAR, "hidden_dim": 192, "num_layers": 6, "num_heads": 3,
        "intermediate_dim": 384, "dropout": 0.1,
    },
    "vit-cifar-small": {
        **_CIFAR, "hidden_dim": 384, "num_layers": 7, "num_heads": 8,
        "intermediate_dim": 384, "dropout": 0.1,
    },
}
"""Preset name -> `VisionTransformer` constructor arguments."""

VIT_PRESET_DESCRIPTIONS: dict[str, str] = {
    "vit-ti16-224": "ViT-Ti/16 (DeiT-Ti): 224 px, patch 16, 192 dim, 12 layers, 3 heads",
    "vit-s16-224": "ViT-S/16 (DeiT-S): 224 px, patch 16, 384 dim, 12 layers, 6 heads",
    "vit-b16-224": "ViT-B/16: 224 px, patch 16, 768 dim, 12 layers, 12 heads",
    "vit-l16-224": "ViT-L/16: 224 px, patch 16, 1024 dim, 24 layers, 16 heads",
    "vit-s16-384-window": "ViT-S/16 at 384 px with sliding-window attention (window 48, "
                          "the class token global): 577 tokens, 12 layers, 6 heads",
    "vit-cifar-tiny": "CIFAR-scale ViT: 32 px, patch 4, 192 dim, 6 layers, 3 heads",
    "vit-cifar-small": "CIFAR-scale ViT (~6.3M parameters): 32 px, patch 4, 384 dim, "
                       "7 layers, 8 heads",
}
"""Preset name -> a one-line description (for `zoo models` and the README)."""


def vit_preset_config(name: str) -> dict[str, Any]:
    """The constructor arguments of a preset (a copy the caller may change).

    Args:
        name: a key of `VIT_PRESETS`.

    Returns:
        A new dict of `VisionTransformer` arguments.

    Raises:
        ValueError: if `name` is not a preset; the message lists the preset names.
    """
    if name not in VIT_PRESETS:
        raise ValueError(
            f"unknown ViT preset {name!r}; expected one of: {', '.join(sorted(VIT_PRESETS))}"
        )
    return dict(VIT_PRESETS[name])
