"""CLIP's symmetric contrastive loss (Radford et al. 2021, figure 3): in a batch of N matching
(image, text) pairs, each image's text is the right one of N candidates and each text's image
likewise; the other N - 1 pairs of the batch are the negatives.

    logits = s * I T^T                       (N, N), s = exp(t) the learned temperature
    loss = (CE(logits, arange N) + CE(logits^T, arange N)) / 2      rows: images; columns: texts

Why not `keras.losses.SparseCategoricalCrossentropy` twice: the labels are the diagonal, not
data, and both directions of one matrix belong together, in float32 whatever the policy.
"""

from __future__ import annotations

from typing import Any

from keras import ops


def symmetric_contrastive_loss(logits_per_image: Any) -> Any:
    """The mean of the image-to-text and text-to-image cross-entropies of matching pairs.

    Args:
        logits_per_image: `(N, N)` similarities, row i the image i against every text of
            the batch (already scaled by the temperature); pair i is (image i, text i).

    Returns:
        A float32 scalar.

    Example:
    >>> import numpy as np
    >>> logits = np.array([[10.0, 0.0], [0.0, 10.0]], "float32")
    >>> round(float(symmetric_contrastive_loss(logits)), 5)
    5e-05
    """
    logits = ops.cast(logits_per_image, "float32")
    diagonal = ops.diagonal(logits)  # (N,) the matching pairs
    image_to_text = ops.logsumexp(logits, axis=1) - diagonal  # -log p(text i | image i)
    text_to_image = ops.logsumexp(logits, axis=0) - diagonal  # -log p(image i | text i)
    return (ops.mean(image_to_text) + ops.mean(text_to_image)) / 2.0
