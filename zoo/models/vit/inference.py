"""What a trained Vision Transformer says about images: the most probable classes, the
attention weights of every block, and attention rollout over them.

`VisionTransformer` takes these methods from `VisionTransformerInference`. Images may be one
`(height, width, channels)` array or a batch, uint8 or float, values 0..255, of any size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from keras import ops

from zoo.training.errors import UserError
from zoo.layers.validation import positive_int
from zoo.models.vit.attention_rollout import attention_rollout as rollout_attention_maps
from zoo.models.vit.image_batch import as_image_batch


class Probability(float):
    """A probability that `classify` returns: a float with its full value, shown with four
    decimals as `zoo classify` prints it (`[('cat', 0.2775), ...]`, not sixteen digits)."""

    def __repr__(self) -> str:
        return f"{float(self):.4f}"


class VisionTransformerInference:
    """`VisionTransformer`'s methods that take images and return NumPy results."""

    def classify(self, images: Any, top_k: int = 5,
                 batch_size: int = 32) -> list[list[tuple[str, float]]]:
        """The `top_k` most probable classes of each image, most probable first.

        Args:
            images: one image `(height, width, channels)` or a batch of them, uint8 or
                float, values 0..255; any size (they are resized to `image_size`).
            top_k: how many classes per image (at most `num_classes` are returned).
            batch_size: images per forward pass.

        Returns:
            One list per image (a single image gives a list of one list) of
            `(class_name, probability)` pairs; each probability is a float (`Probability`,
            shown with four decimals).

        Raises:
            ValueError: for images of the wrong rank, channel count or dtype, or a `top_k`
                below 1.

        Example:
        >>> import numpy as np
        >>> from zoo.models.vit.model import VisionTransformer
        >>> model = VisionTransformer.from_architecture("vit-cifar-tiny", num_layers=1)
        >>> len(model.classify(np.zeros((32, 32, 3), "uint8"), top_k=3)[0])
        3
        """
        positive_int(top_k, "top_k", error=UserError)
        batch = as_image_batch(images, self.num_channels)
        logits = np.asarray(self.predict(batch, batch_size=batch_size, verbose=0), "float64")
        probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        best = np.argsort(-probabilities, axis=-1, kind="stable")[:, :top_k]
        names = self.class_names or [f"class_{i}" for i in range(self.num_classes)]
        return [[(names[i], Probability(row[i])) for i in order]
                for row, order in zip(probabilities, best)]

    def attention_maps(self, images: Any, batch_size: int = 32) -> list[np.ndarray]:
        """The attention weights of every encoder block.

        Args:
            images: as for `classify`.
            batch_size: images per forward pass.

        Returns:
            One float32 array per block, `(batch, heads, tokens, tokens)`, where tokens are
            the class token (with "cls" pooling), the distillation token (if any), then the
            patches in row-major order.
        """
        batch = as_image_batch(images, self.num_channels)
        chunks = [self._forward(batch[start:start + batch_size], training=False,
                                return_attention_scores=True)[1]
                  for start in range(0, len(batch), batch_size)]
        return [np.concatenate([ops.convert_to_numpy(ops.cast(chunk[layer], "float32"))
                                for chunk in chunks])
                for layer in range(self.num_layers)]

    def attention_rollout(self, images: Any, discard_ratio: float = 0.0,
                          head_fusion: str = "mean") -> np.ndarray:
        """Which patches the prediction draws on: attention rollout over all blocks.

        See `zoo.models.vit.attention_rollout.attention_rollout` (Abnar & Zuidema, 2020). With "cls"
        pooling the class token's row is read out (with a distillation token too: its own
        row is not used), with "gap" the mean of all rows.

        Args:
            images: as for `classify`.
            discard_ratio: fraction in [0, 1) of each layer's weakest fused weights to zero.
            head_fusion: "mean", "max" or "min" over heads.

        Returns:
            `(batch, grid_height, grid_width)` float32; each map is non-negative and sums
            to 1 over the patch grid.
        """
        relevance = rollout_attention_maps(
            self.attention_maps(images), num_prefix_tokens=self.num_prefix_tokens,
            discard_ratio=discard_ratio, head_fusion=head_fusion)
        return relevance.reshape(-1, *self.grid_size)

    @property
    def is_hybrid(self) -> bool:
        """Whether the patches are cut from a convolutional stem's map (the ViT paper's
        hybrid, section 3.1) rather than from the pixels."""
        return self.stem_filters is not None  # type: ignore[attr-defined]

    def class_token_attention(self, images: Any) -> np.ndarray:
        """The last block's attention from the class token (the first prefix token; the mean
        of all rows with "gap" pooling) to the patches, heads averaged: the map to draw for
        a hybrid, whose tokens each see most of the image through the stem, so that rollout
        over them says little about pixels.

        Returns:
            `(batch, grid_height, grid_width)` float32, each map summing to 1 over the grid
            once renormalised over the patches.
        """
        last = self.attention_maps(images)[-1].mean(axis=1)  # (batch, tokens, tokens)
        rows = last[:, 0] if self.num_prefix_tokens else last.mean(axis=1)
        patches = rows[:, self.num_prefix_tokens:]
        patches = patches / np.maximum(patches.sum(axis=1, keepdims=True), 1e-12)
        return patches.reshape(-1, *self.grid_size).astype("float32")
