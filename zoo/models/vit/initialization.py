"""PyTorch's default initialisation for a built `VisionTransformer`.

Keras draws a new ViT's kernels from Glorot's uniform law with zero biases (and the zoo's
head from zeros); PyTorch's `nn.Linear` and `nn.Conv2d`, which the published CIFAR recipes
of this architecture use, draw every kernel and every bias from U(-1/sqrt(fan_in),
+1/sqrt(fan_in)), and those recipes draw the position table and class token from N(0, 1).
On the zoo's own model and trainer the second gained 9.4 points at equal steps in a
controlled CPU proxy (docs/training-runs.md, runs A and K): `zoo train vit
--initialization pytorch`.

    model = VisionTransformer.from_architecture("vit-cifar-small", num_classes=10)
    pytorch_initialization(model, seed=0)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

INITIALIZATIONS = ("keras", "pytorch")


def fan_in(kernel_path: str, shape: tuple[int, ...]) -> int:
    """The inputs one output unit of a kernel sees.

    A per-head projection `(width, heads, head)` (queries, keys, values) sees `width`; the
    attention output `(heads, head, width)` and any other kernel (a Dense `(in, out)`, a
    convolution `(h, w, in, out)`) every axis but the last.

    Example:
        >>> fan_in("block/self_attention/query/kernel", (384, 8, 48))
        384
        >>> fan_in("block/self_attention/attention_output/kernel", (8, 48, 384))
        384
    """
    per_head_output = len(shape) == 3 and "attention_output" not in kernel_path
    return shape[0] if per_head_output else math.prod(shape[:-1])


def pytorch_initialization(model: Any, seed: int = 0) -> None:
    """Redraws a built ViT's weights as PyTorch's defaults, in place: every kernel and the
    bias of its layer U(+-1/sqrt(fan_in)) (`fan_in`), the position table and class token
    N(0, 1); norms keep their ones and zeros.

    Args:
        model: a `VisionTransformer` (its weights exist once it is constructed).
        seed: the draw's seed.
    """
    rng = np.random.default_rng(seed)
    kernels = {v.path.rsplit("/", 1)[0]: v for v in model.weights if v.path.endswith("/kernel")}
    for variable in model.weights:
        layer, name = variable.path.rsplit("/", 1)
        shape = tuple(variable.shape)
        if name in ("kernel", "bias") and layer in kernels:
            bound = 1.0 / math.sqrt(fan_in(layer, tuple(kernels[layer].shape)))
            variable.assign(rng.uniform(-bound, bound, shape).astype(variable.dtype))
        elif name in ("class_token", "position_embeddings"):
            variable.assign(rng.normal(0.0, 1.0, shape).astype(variable.dtype))
