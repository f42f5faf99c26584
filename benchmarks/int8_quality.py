"""int8 against float32 for a shipped ViT: held-out top-1 and the file sizes.

    python benchmarks/int8_quality.py --data ../shared/data/cifar10/cifar10-train-jpg.tar.gz

Quantizes `--model` (`zoo.models.quantization.quantize_model`), scores both models on the
held-out validation split exactly as benchmarks/studies/vit_overfit.py scores it (`--validation-size`
5,000 and `--seed` 0, as `zoo train vit` splits), and writes
benchmarks/results/int8_quality-<model>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import zoo
from zoo.models.quantization import quantize_model
from zoo.recipes.vit import ViTRecipe, evaluate_arrays, load_images
from zoo.training.image_data import train_validation_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit-cifar10")
    parser.add_argument("--data", required=True)
    parser.add_argument("--validation-size", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()

    recipe = ViTRecipe(data=args.data, validation_size=args.validation_size, seed=args.seed,
                       output="runs/int8-quality")
    images, labels, _ = load_images(recipe)
    _, valid_rows = train_validation_split(len(images), args.validation_size, seed=args.seed,
                                           labels=labels)
    x, y = images[valid_rows], labels[valid_rows]
    result = {"benchmark": "int8_quality", "model": args.model,
              "settings": {"validation_size": args.validation_size, "seed": args.seed}}
    with tempfile.TemporaryDirectory() as folder:
        model = zoo.load(args.model)
        model.save(Path(folder) / "float.keras")
        for name, file in (("float32", "float.keras"), ("int8", "int8.keras")):
            if name == "int8":
                quantize_model(model)
                model.save(Path(folder) / "int8.keras")
            started = time.perf_counter()
            scores = evaluate_arrays(model, x, y, batch_size=250)
            result[name] = {"top1": round(scores["top1"], 4), "top5": round(scores["top5"], 4),
                            "seconds": round(time.perf_counter() - started, 1),
                            "file_bytes": os.path.getsize(Path(folder) / file)}
            print(f"{name:8s} top-1 {100 * scores['top1']:.2f}%  top-5 "
                  f"{100 * scores['top5']:.2f}%  {result[name]['file_bytes']:,} bytes")
    output = Path(args.output or Path(__file__).parent / "results"
                  / f"int8_quality-{args.model}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
