"""Full fine-tuning against LoRA: trainable parameters, accuracy, step time and memory.

    python benchmarks/studies/lora_finetune.py [--model vit-cifar10]
        [--data /usr/share/datasets/fashion-mnist] [--limit-per-class 500]
        [--validation-size 1000] [--epochs 3] [--ranks 4 8 16]

Fine-tunes the shipped `vit-cifar10` on Fashion-MNIST (or any `--data` that `zoo finetune
vit` reads), once with every weight trainable and once per LoRA rank (`enable_lora(rank)`:
factors of the query and value projections, and the head), for the same number of epochs.
Every run starts from the same model with a new head for the new classes, and trains on the
same images in the same order (AdamW, no augmentation); the learning rates are flags, since
LoRA usually wants a higher one.

Each run is its own process, so that its peak resident memory (`resource.getrusage` max
RSS) is its own: it counts the interpreter, Keras and the images too, which every run shares,
so compare differences. Step time is the median of the timed steps (the first step of each
epoch, which compiles, is left out). Validation accuracy is top-1 on `--validation-size`
images held out from `--data` as `zoo finetune` holds them out (stratified, `--seed`).
Writes benchmarks/results/lora_finetune-HOST-DATE.json (`zoo.bench.report.result_name`),
or `--output`; step times by the harness's clock (`zoo.bench.steps.Stopwatch`).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def fine_tune(args: argparse.Namespace, rank: int | None) -> dict:
    """One run (in a worker process): full fine-tuning when `rank` is None, else LoRA."""
    import keras
    import numpy as np

    import zoo
    from zoo.bench.steps import Stopwatch
    from zoo.recipes.vit import load_images
    from zoo.recipes.settings import ViTFinetuneRecipe
    from zoo.training.image_data import train_validation_split
    from zoo.training.optimizers import adamw_no_decay_on_norms

    keras.utils.set_random_seed(args.seed)
    model = zoo.load(args.model)
    images, labels, names = load_images(ViTFinetuneRecipe(
        data=args.data, limit_per_class=args.limit_per_class, image_size=model.image_size,
        seed=args.seed))
    train, valid = train_validation_split(len(images), args.validation_size, seed=args.seed,
                                          labels=labels)
    model = model.with_new_head(len(names), names)
    if rank is not None:
        model.enable_lora(rank, args.lora_alpha)
    learning_rate = args.learning_rate if rank is None else args.lora_learning_rate
    model.compile(optimizer=adamw_no_decay_on_norms(learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    step_ms: list[float] = []

    class StepTimes(keras.callbacks.Callback):
        watch = Stopwatch()

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.watch.start()

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            seconds = self.watch.stop()
            if batch > 0:  # the first step of an epoch may compile
                step_ms.append(1000 * seconds)

    model.fit(images[train], labels[train], batch_size=args.batch_size, epochs=args.epochs,
              shuffle=True, callbacks=[StepTimes()], verbose=0)
    logits = model.predict(images[valid], batch_size=256, verbose=0)
    return {
        "setting": "full" if rank is None else f"lora-{rank}",
        "rank": rank,
        "learning_rate": learning_rate,
        "trainable_parameters": int(sum(np.prod(v.shape) for v in model.trainable_weights)),
        "parameters": int(model.count_params()),
        "validation_top1": round(float(np.mean(np.argmax(logits, 1) == labels[valid])), 4),
        "step_ms": round(float(np.median(step_ms)), 1) if step_ms else None,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "training_images": int(len(train)),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit-cifar10")
    parser.add_argument("--data", default=FASHION_MNIST)
    parser.add_argument("--limit-per-class", type=int, default=500)
    parser.add_argument("--validation-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--ranks", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--lora-alpha", type=float, default=None,
                        help="the factors' scale is ALPHA / rank (default: rank, a scale of 1)")
    parser.add_argument("--learning-rate", type=float, default=3e-4,
                        help="of full fine-tuning")
    parser.add_argument("--lora-learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", help="default: benchmarks/results/lora_finetune-HOST-"
                                          "DATE.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # "full" or a rank
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.worker:
        rank = None if args.worker == "full" else int(args.worker)
        print(json.dumps(fine_tune(args, rank)))
        return
    if not Path(args.data).exists():
        sys.exit(f"no data at {args.data}: give --data (Fashion-MNIST's IDX folder, or a "
                 "folder of class folders)")
    import keras

    from zoo.bench.report import write_benchmark

    passed = [flag for flag in sys.argv[1:]]  # every worker gets the same settings
    runs = []
    for setting in ["full", *map(str, args.ranks)]:
        done = subprocess.run([sys.executable, __file__, *passed, "--worker", setting],
                              capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"the {setting} run failed:\n{done.stderr[-3000:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        run = runs[-1]
        print(f"{run['setting']:8s} trainable {run['trainable_parameters']:>10,}  "
              f"top-1 {run['validation_top1']:.4f}  step {run['step_ms']} ms  "
              f"peak RSS {run['peak_rss_mib']:,.0f} MiB", flush=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("worker", "output")}
    result = {"benchmark": "lora_finetune", "backend": keras.backend.backend(),
              "settings": settings, "runs": runs}
    write_benchmark(__file__, result, output=args.output)


if __name__ == "__main__":
    main()
