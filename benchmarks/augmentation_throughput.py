"""Images per second of the CIFAR augmentation on the current Keras backend (a measurement).

    KERAS_BACKEND=jax .venv/bin/python benchmarks/augmentation_throughput.py [--batch-size 256]

Compares, on batches of real CIFAR-10 images (random ones when ../shared/data is absent):
crop + flip alone, `cifar_augmentation` (crop + flip + our per-image RandAugment), the same
compiled (`compiled_augmentation`: `jax.jit` / `tf.function`), and `keras.layers.RandAugment`
with its default factor, eager and compiled. Each is timed by the harness (`zoo.bench.steps`:
its first call, which traces or compiles, apart), and the rates are written to
benchmarks/results/augmentation_throughput-BACKEND-HOST-DATE.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.steps import Stopwatch, measure  # noqa: E402
from zoo.training.augmentation import cifar_augmentation, compiled_augmentation  # noqa: E402
from zoo.training.files.archives import extract_archive  # noqa: E402
from zoo.training.image_data import load_image_folder_numpy  # noqa: E402

ARCHIVE = Path(__file__).resolve().parents[2] / "shared/data/cifar10/cifar10-train-jpg.tar.gz"


def cifar_batch(batch_size: int) -> np.ndarray:
    if not ARCHIVE.is_file():
        print(f"{ARCHIVE} absent: random images")
        return np.random.default_rng(0).integers(0, 256, (batch_size, 32, 32, 3), "uint8")
    per_class = -(-batch_size // 10)
    folder = extract_archive(ARCHIVE, Path(tempfile.gettempdir()) / "zoo-bench-cifar", per_class)
    images, _, _ = load_image_folder_numpy(folder / "train")
    return images[np.random.default_rng(0).permutation(len(images))[:batch_size]]


def throughput(name: str, augment, images, seconds: float) -> dict:
    """Images per second of `augment` on `images` (its first call, tracing or compiling,
    timed apart); prints a line and returns the row."""
    def call() -> None:
        keras.ops.convert_to_numpy(augment(images))

    with Stopwatch() as first:
        call()
    rate = measure(call, len(images), seconds, warmup=0, min_calls=3)
    print(f"{name:40s} {len(images) / rate * 1e3:8.1f} ms/batch {rate:8.0f} images/s  "
          f"(first {first.seconds:5.1f} s)")
    return {"augmentation": name, "images_per_second": round(rate, 1),
            "first_call_seconds": round(first.seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--skip-keras-randaugment", action="store_true")
    args = parser.parse_args()
    images = cifar_batch(args.batch_size)
    print(f"backend {keras.backend.backend()}, batch {images.shape}, devices "
          f"{keras.distribution.list_devices()}")
    crop_flip = cifar_augmentation(rand_augment=False, seed=0)
    full = cifar_augmentation(seed=0)
    augmentations = {"crop + flip (eager)": crop_flip,
                     "crop + flip (compiled)": compiled_augmentation(crop_flip),
                     "cifar_augmentation (eager)": full,
                     "cifar_augmentation (compiled)": compiled_augmentation(full)}
    if not args.skip_keras_randaugment:
        keras_ra = keras.layers.RandAugment(seed=0)
        augmentations["keras.layers.RandAugment (eager)"] = keras_ra
        augmentations["keras.layers.RandAugment (compiled)"] = compiled_augmentation(keras_ra)
    rows = [throughput(name, augment, images, args.seconds)
            for name, augment in augmentations.items()]
    write_benchmark(__file__, {
        "settings": {"batch_size": args.batch_size, "seconds": args.seconds,
                     "backend": keras.backend.backend(),
                     "images": "CIFAR-10" if ARCHIVE.is_file() else "random"},
        "results": rows}, variant=keras.backend.backend())


if __name__ == "__main__":
    main()
