"""Training speed of hybrid ViT shapes on this machine: convolutional stems with batch norm
under the zoo's encoder blocks, sketched as functional Keras models (docs/training-runs.md,
"A batch-normalised stem").

    KERAS_BACKEND=tensorflow python benchmarks/hybrid_stem_speed.py [NAME-SUBSTRING ...]

Each shape trains `fit` steps of batch 128 on random arrays (one epoch of 4 steps to compile,
then two timed epochs of 4 steps, by the harness's `zoo.bench.steps.measure`) and prints its
parameters and images/s; writes benchmarks/results/hybrid_stem_speed-BACKEND-HOST-DATE.json. A stem stage is a list of
convolution channels (3 x 3, batch norm, ReLU), ended by a 2 x 2 max pooling.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.steps import measure  # noqa: E402
from zoo.layers.class_token import ClassToken  # noqa: E402
from zoo.layers.transformer_encoder import TransformerEncoderBlock  # noqa: E402

BATCH = 128
# name: (stem stages, encoder width, blocks, heads, MLP width)
SHAPES = {
    "A 64|128 d192x4": ([[64], [128]], 192, 4, 3, 384),
    "B 64|128,128 d192x4": ([[64], [128, 128]], 192, 4, 3, 384),
    "D 64|128|256 d256x2": ([[64], [128], [256]], 256, 2, 4, 512),
    "E 64|128,128|256 d256x2": ([[64], [128, 128], [256]], 256, 2, 4, 512),
    "vit-cifar-vgg 64|128,128|256 d256x4": ([[64], [128, 128], [256]], 256, 4, 4, 512),
}


def build(stages: list[list[int]], width: int, blocks: int, heads: int, mlp: int) -> keras.Model:
    """A hybrid of the given shape: stem, 1 x 1 patch projection, class token, pre-norm
    blocks, final norm and a 10-class head on the class token."""
    inputs = keras.Input((32, 32, 3))
    x = inputs
    for stage in stages:
        for channels in stage:
            x = keras.layers.Conv2D(channels, 3, padding="same", use_bias=False)(x)
            x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
        x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Reshape((x.shape[1] * x.shape[2], x.shape[3]))(x)
    x = ClassToken()(keras.layers.Dense(width)(x))
    for _ in range(blocks):
        x = TransformerEncoderBlock(heads, mlp, normalize_first=True, activation="gelu")(x)
    outputs = keras.layers.Dense(10)(keras.layers.LayerNormalization()(x[:, 0]))
    return keras.Model(inputs, outputs)


def main(filters: list[str]) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(BATCH * 4, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, BATCH * 4)
    rows = []
    for name, shape in SHAPES.items():
        if filters and not any(f in name for f in filters):
            continue
        model = build(*shape)
        model.compile(keras.optimizers.AdamW(1e-3),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        rate = measure(lambda: model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0),
                       len(x), 0.0, warmup=1, min_calls=2)
        print(f"{name:40s} parameters {model.count_params():>9,d}  {rate:6.1f} images/s",
              flush=True)
        rows.append({"shape": name, "parameters": int(model.count_params()),
                     "images_per_second": round(rate, 1)})
    write_benchmark(__file__, {"settings": {"batch": BATCH, "steps_per_epoch": 4,
                                            "timed_epochs": 2, "filters": filters},
                               "results": rows}, variant=keras.backend.backend())


if __name__ == "__main__":
    main(sys.argv[1:])
