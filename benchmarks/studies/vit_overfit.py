"""How far a trained ViT fits its own training images, against its held-out validation split.

    python benchmarks/studies/vit_overfit.py --model vit-cifar10 \
        --data ../shared/data/cifar10/cifar10-train-jpg.tar.gz [--images 2000]

Scores the model on `--images` images drawn at random (`--sample-seed`) from the recipe's
training split of `--data` (`--validation-size` and `--seed` as in `zoo train vit`): as they
are, after the recipe's crop and flip, and with RandAugment (2 operations) at magnitudes 0.5
and 0.9 added; and on the held-out validation split. A clean training score far above the
validation score says the model overfits, whatever its accuracy on augmented images was
during training. Writes benchmarks/results/vit_overfit-MODEL-HOST-DATE.json
(`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse

import numpy as np

import zoo
from zoo.bench.report import write_benchmark
from zoo.training.augmentation import compiled_augmentation
from zoo.training.image_data import train_validation_split
from zoo.recipes.vit import ViTRecipe, evaluate_arrays, load_images, recipe_augmentation

BATCH = 250


def accuracy(model, images: np.ndarray, labels: np.ndarray) -> float:
    return evaluate_arrays(model, images, labels, batch_size=BATCH)["top1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit-cifar10")
    parser.add_argument("--data", required=True)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--validation-size", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-seed", type=int, default=1)
    parser.add_argument("--output", help="default: benchmarks/results/vit_overfit-MODEL-"
                                          "HOST-DATE.json")
    args = parser.parse_args()

    recipe = ViTRecipe(data=args.data, validation_size=args.validation_size, seed=args.seed,
                       output="runs/vit-overfit")
    images, labels, _ = load_images(recipe)
    train_rows, valid_rows = train_validation_split(len(images), args.validation_size,
                                                    seed=args.seed, labels=labels)
    rows = np.random.default_rng(args.sample_seed).choice(train_rows, args.images,
                                                          replace=False)
    model = zoo.load(args.model)
    x, y = images[rows], labels[rows]
    scores = {"training images, as they are": accuracy(model, x, y)}
    for name, rand_augment, magnitude in (("crop and flip", False, 0.0),
                                          ("crop, flip, RandAugment 0.5", True, 0.5),
                                          ("crop, flip, RandAugment 0.9", True, 0.9)):
        augment = compiled_augmentation(recipe_augmentation(ViTRecipe(
            rand_augment=rand_augment, rand_augment_magnitude=magnitude, seed=args.seed)))
        augmented = np.concatenate([np.asarray(augment(x[i:i + BATCH]))
                                    for i in range(0, len(x), BATCH)])
        scores[f"training images, {name}"] = accuracy(model, augmented, y)
    scores["held-out validation"] = accuracy(model, images[valid_rows], labels[valid_rows])
    for name, score in scores.items():
        print(f"{name:45s} {100 * score:6.2f}%")
    result = {"benchmark": "vit_overfit", "model": args.model,
              "settings": {"images": args.images, "validation_size": args.validation_size,
                           "seed": args.seed, "sample_seed": args.sample_seed},
              "top1": {name: round(score, 4) for name, score in scores.items()}}
    write_benchmark(__file__, result, variant=args.model, output=args.output)


if __name__ == "__main__":
    main()
