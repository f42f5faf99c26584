"""Train-step time of `zoo train vit`'s two data placements, with and without augmentation.

Issue 35, section 2: with `--data-placement device` the training set sits on the device and
crop, flip, RandAugment, random erasing and CutMix run inside the compiled train step; with
`host` (the default) every batch is gathered, augmented by a separately compiled call and
handed to `fit` by a PyDataset. This measures, on one machine in one process, the seconds a
step takes in `fit` (the median of `--rounds` epochs, taken in turn with the others after a
warm-up epoch of each that compiles), and the host path's data work alone
(`AugmentedBatches.__getitem__`: the gather, the one-hot labels and the augmentation call),
for:

    device, no augmentation     the model's step alone, fed from the device
    device, augmentation        + the augmentation inside the step
    host, augmentation          the default path

    python benchmarks/device_resident_step.py --architecture vit-cifar-tiny --batch-size 256

Random uint8 images (the step's cost does not depend on what they show). The rounds are the
harness's (`zoo.bench.steps.interleaved`); the figures, which compare only within one run,
go to benchmarks/results/device_resident_step-BACKEND-HOST-DATE.json (or `--output`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Callable

import keras
import numpy as np

from zoo.bench.report import write_benchmark
from zoo.bench.steps import interleaved
from zoo.recipes.settings import ViTRecipe
from zoo.recipes.vit import (AugmentedBatches, compile_vit, new_vit, recipe_augmentation,
                             recipe_mix)
from zoo.training.augmentation import compiled_augmentation
from zoo.training.device_resident import DeviceResidentTraining


def fit_epoch(trained: keras.Model, data, steps: int, **options) -> Callable[[], None]:
    """A function that runs one `fit` epoch of `steps` steps (`fit` waits for the last step
    before it returns)."""
    def run() -> None:
        trained.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, **options)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architecture", default="vit-cifar-tiny")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=4, help="steps a timed epoch")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed epochs of each (the median is reported)")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--held-images", type=int,
                        help="training images held (default: STEPS x BATCH_SIZE); CIFAR-10's "
                             "45,000 checks that holding them costs a step nothing")
    parser.add_argument("--output", help="JSON file for the figures (default: "
                        "benchmarks/results/device_resident_step-BACKEND-HOST-DATE.json)")
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy(args.precision)
    recipe = ViTRecipe(architecture=args.architecture, batch_size=args.batch_size,
                       rand_augment_magnitude=0.5, random_erasing=0.25, mix="cutmix",
                       epochs=2)
    count = args.held_images or args.steps * args.batch_size
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (count, 32, 32, 3)).astype("uint8")
    labels = rng.integers(0, 10, count)
    names = [str(i) for i in range(10)]

    def vit() -> keras.Model:
        model = new_vit(recipe, names)
        model(images[:1])
        return model

    runs: dict[str, Callable[[], None]] = {}
    for name, augmented in (("device, no augmentation", False), ("device, augmentation", True)):
        model = vit()
        trained = DeviceResidentTraining(
            model, images, labels, 10, args.batch_size,
            augment=recipe_augmentation(recipe) if augmented else None,
            mix=recipe_mix(recipe) if augmented else None)
        compile_vit(trained, model, recipe, args.steps)
        runs[name] = fit_epoch(trained, trained.step_numbers(), args.steps, batch_size=1,
                               shuffle=False, callbacks=[trained.new_order_every_epoch()])
    model = vit()
    compile_vit(model, model, recipe, args.steps)
    batches = AugmentedBatches(images, labels, 10, args.batch_size,
                               compiled_augmentation(recipe_augmentation(recipe)),
                               compiled_augmentation(recipe_mix(recipe)), seed=0)
    runs["host, augmentation"] = fit_epoch(model, batches, args.steps)

    def data_work() -> None:
        for index in range(args.steps):  # waiting for the results (JAX dispatches async)
            keras.tree.map_structure(keras.ops.convert_to_numpy, batches[index])

    runs["host, its data work alone"] = data_work
    for run in runs.values():
        run()  # compiles
    # Rounds over all four, so that a slow minute of the machine touches each alike; each
    # call is one epoch (or the data work) of `steps` steps.
    times = {name: [t / args.steps for t in each]
             for name, each in interleaved(runs, args.rounds).items()}
    results = {name: statistics.median(t) for name, t in times.items()}
    report = {
        "backend": keras.backend.backend(),
        "architecture": args.architecture,
        "batch_size": args.batch_size,
        "held_images": count,
        "precision": args.precision,
        "augmentation": "crop + flip, RandAugment 2 x 0.5, random erasing 0.25, CutMix",
        "rounds": args.rounds,
        "seconds_per_step": {k: round(v, 4) for k, v in results.items()},
        "seconds_per_step_each_round": {k: [round(x, 4) for x in v] for k, v in times.items()},
        "images_per_second": {k: round(args.batch_size / v, 1) for k, v in results.items()
                              if "alone" not in k},
        "command": "python benchmarks/device_resident_step.py --architecture "
                   f"{args.architecture} --batch-size {args.batch_size} --steps {args.steps} "
                   f"--rounds {args.rounds} --precision {args.precision}"
                   + (f" --held-images {args.held_images}" if args.held_images else ""),
    }
    print(json.dumps(report, indent=2))
    write_benchmark(__file__, report, variant=keras.backend.backend(), output=args.output)


if __name__ == "__main__":
    main()
