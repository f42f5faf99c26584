"""What int8 weights cost in quality: a ViT's held-out top-1, a translator's greedy output.

    python benchmarks/studies/int8_quality.py vit-cifar10 \
        --data ../shared/data/cifar10/cifar10-train-jpg.tar.gz
    python benchmarks/studies/int8_quality.py translator-multi30k-en-de \
        [--source ../shared/data/multi30k/test_2016_flickr.en.gz] [--sentences 300]

Loads MODEL (anything `zoo.load` takes: a shipped name, a path, `hf://Helsinki-NLP/opus-mt-en-de`
where it is cached) and a copy quantized by `zoo.models.quantization.quantize_model`, and
scores both:

- a ViT on the held-out validation split of `--data`, exactly as
  benchmarks/studies/vit_overfit.py scores it (`--validation-size` 5,000 and `--seed` 0, as
  `zoo train vit` splits; `--limit-per-class` reads fewer images, for a quick try): top-1,
  top-5 and the `.keras` file's size;
- a translator on the first `--sentences` lines of `--source`, greedily: how many of the
  int8 model's translations equal the float32 model's exactly (the issue's mark for a
  converted OPUS-MT was 95%).

Speed is not scored here: `zoo bench --work int8` and benchmarks/serving_latency.py time int8.
Writes benchmarks/results/int8_quality-MODEL-HOST-DATE.json (`zoo.bench.report.result_name`;
`--output`: a folder or a file).
"""

from __future__ import annotations

import argparse
import gzip
import os
import tempfile
from pathlib import Path

import zoo
from zoo.bench.report import write_benchmark
from zoo.models.quantization import quantize_model


def read_lines(path: str, count: int) -> list[str]:
    """The first `count` lines of a text file, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(count), f)]


def translator_agreement(args: argparse.Namespace, model) -> dict:
    """How often the int8 copy's greedy translation equals the float32 model's."""
    texts = read_lines(args.source, args.sentences)
    expected = model.translate(texts, beam_size=1)
    found = quantize_model(zoo.load(args.model)).translate(texts, beam_size=1)
    equal = sum(a == b for a, b in zip(expected, found))
    print(f"int8 greedy output equal to float32's on {equal} of {len(texts)} sentences")
    return {"settings": {"source": Path(args.source).name, "sentences": len(texts)},
            "equal_greedy": equal, "share": round(equal / len(texts), 4)}


def vit_scores(args: argparse.Namespace, model) -> dict:
    """Top-1 and top-5 on the held-out split, and the file size, of both models."""
    import numpy as np

    from zoo.recipes.vit import ViTRecipe, evaluate_arrays, load_images
    from zoo.training.image_data import train_validation_split

    if not args.data:
        raise SystemExit("a ViT is scored on --data (the training data, as `zoo train vit`)")
    recipe = ViTRecipe(data=args.data, validation_size=args.validation_size, seed=args.seed,
                       limit_per_class=args.limit_per_class, output="runs/int8-quality")
    images, labels, _ = load_images(recipe)
    _, valid_rows = train_validation_split(len(images), args.validation_size, seed=args.seed,
                                           labels=labels)
    x, y = images[valid_rows], np.asarray(labels)[valid_rows]
    result = {"settings": {"validation_size": args.validation_size, "seed": args.seed,
                           "limit_per_class": args.limit_per_class}}
    with tempfile.TemporaryDirectory() as folder:
        for name in ("float32", "int8"):
            if name == "int8":
                quantize_model(model)
            model.save(Path(folder) / f"{name}.keras")
            scores = evaluate_arrays(model, x, y, batch_size=250)
            result[name] = {"top1": round(scores["top1"], 4),
                            "top5": round(scores["top5"], 4),
                            "file_bytes": os.path.getsize(Path(folder) / f"{name}.keras")}
            print(f"{name:8s} top-1 {100 * scores['top1']:.2f}%  top-5 "
                  f"{100 * scores['top5']:.2f}%  {result[name]['file_bytes']:,} bytes")
    return result


def main(argv: list[str] | None = None) -> None:
    """Scores MODEL and its int8 copy; writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="vit-cifar10")
    parser.add_argument("--data", help="a ViT's training data (its held-out split is scored)")
    parser.add_argument("--validation-size", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-per-class", type=int, help="read fewer images (a quick try)")
    parser.add_argument("--source", default="../shared/data/multi30k/test_2016_flickr.en.gz",
                        help="a translator's source sentences")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)

    model = zoo.load(args.model)
    scored = (translator_agreement(args, model) if hasattr(model, "translate")
              else vit_scores(args, model))
    write_benchmark(__file__, {"model": args.model, **scored},
                    variant=Path(args.model).stem, output=args.output)


if __name__ == "__main__":
    main()
