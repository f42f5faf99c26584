"""What a bfloat16 export costs in answers: a model's float32 and bfloat16 exports, served.

    python benchmarks/studies/bfloat16_quality.py vit-cifar10 \
        --data ../shared/data/cifar10/cifar10-train-jpg.tar.gz      # top-1 on 1,000 held out
    python benchmarks/studies/bfloat16_quality.py translator-multi30k-en-de \
        --source ../shared/data/multi30k/val.en.gz --reference ../shared/data/multi30k/val.de.gz

Exports MODEL (anything `zoo export` takes) twice, `precision="float32"` and `"bfloat16"`
(`zoo.serving.export.export_model`), and serves each as the stock model server does (a TF1
session, warm-up replayed, XLA off: `zoo.serving.session.ServedModel`). Both get the same
requests of `--batch` items:

- a ViT: the JPEG files of `--images` images drawn (`--seed`) from the held-out split of
  `--data`, the split `zoo train vit` holds out (`--validation-size` 5,000, `--seed` 0);
  scored: each export's top-1 and how many top-1 labels the two share;
- a translator: the lines of `--source` (beam 4, the export's default search); scored:
  each export's sacreBLEU and chrF against `--reference`, and how many translations are equal.

The bfloat16 export is meant to stay within 0.3 points of float32 (issue 64). Speed is
`benchmarks/serving_latency.py`'s. Writes benchmarks/results/bfloat16_quality-MODEL-HOST-DATE.json
(`--output`: a folder or a file).
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
from pathlib import Path

import numpy as np

from zoo.bench.report import write_benchmark

PRECISIONS = ("float32", "bfloat16")


def read_lines(path: str) -> list[str]:
    """The lines of a text file, gzipped or not, without their line ends."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def held_out_jpegs(args: argparse.Namespace, folder: Path) -> tuple[list[bytes], np.ndarray,
                                                                     list[str]]:
    """`args.images` held-out images' file bytes, their labels and the class names."""
    from zoo.recipes.vit import extracted_class_folder
    from zoo.training.image_data import train_validation_split
    from zoo.training.image_files import scan_image_folder

    data = Path(args.data)
    if data.name.endswith((".tar.gz", ".tgz", ".tar")):
        data = extracted_class_folder(data, folder / "data")
    paths, labels, names = scan_image_folder(data)
    _, rows = train_validation_split(len(paths), args.validation_size, seed=args.seed,
                                     labels=labels)
    rows = np.random.default_rng(args.seed).permutation(rows)[:args.images]  # all classes
    return [paths[row].read_bytes() for row in rows], np.asarray(labels)[rows], names


def answers(export: Path, key: str, items: list, output: str, batch: int) -> list:
    """`output` of the served export for every item, `batch` items a request."""
    from zoo.bench.real_inputs import as_request
    from zoo.serving.session import ServedModel

    served, found = ServedModel(export), []
    for start in range(0, len(items), batch):
        found.extend(served(**{key: as_request(items[start:start + batch])})[output])
    return found


def vit_scores(args: argparse.Namespace, exports: dict[str, Path], folder: Path) -> dict:
    """Each export's top-1 on the held-out images, and their agreement."""
    if not args.data:
        raise SystemExit("a ViT is scored on --data (its training data, as `zoo train vit`)")
    jpegs, labels, names = held_out_jpegs(args, folder)
    top1 = {p: np.array([row[0].decode() for row in
                         answers(exports[p], "images", jpegs, "labels", args.batch)])
            for p in PRECISIONS}
    truth = np.array(names)[labels]
    result = {"settings": {"images": len(jpegs), "validation_size": args.validation_size,
                           "seed": args.seed}}
    for precision in PRECISIONS:
        result[precision] = {"top1": round(float(np.mean(top1[precision] == truth)), 4)}
    result["equal_top1"] = int(np.sum(top1["float32"] == top1["bfloat16"]))
    return result


def translator_scores(args: argparse.Namespace, exports: dict[str, Path]) -> dict:
    """Each export's sacreBLEU and chrF on the source lines, and their agreement."""
    from zoo.training.translation_metrics import corpus_scores

    sources, references = read_lines(args.source), read_lines(args.reference)
    texts = {p: [t.decode() for t in answers(exports[p], "sentences", sources,
                                             "translations", args.batch)]
             for p in PRECISIONS}
    result = {"settings": {"source": Path(args.source).name, "sentences": len(sources),
                           "beam_size": 4}}
    for precision in PRECISIONS:
        scores = corpus_scores(texts[precision], references)
        result[precision] = {"bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2)}
        result["signature"] = scores["signature"]
    result["equal_translations"] = sum(a == b for a, b in zip(*texts.values()))
    return result


def main(argv: list[str] | None = None) -> None:
    """Exports MODEL in both precisions, scores both served, writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="vit-cifar10")
    parser.add_argument("--data", help="a ViT's training data (its held-out split is scored)")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--validation-size", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", help="a translator's source sentences")
    parser.add_argument("--reference", help="their reference translations")
    parser.add_argument("--batch", type=int, default=32, help="items a request")
    parser.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)

    import zoo
    from zoo.serving.export import export_model

    model = zoo.load(args.model)
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        exports = {p: export_model(model, folder / "exports", name=p, precision=p)
                   for p in PRECISIONS}
        is_translator = hasattr(model, "translate")
        del model
        scored = (translator_scores(args, exports) if is_translator
                  else vit_scores(args, exports, folder))
    for precision in PRECISIONS:
        print(precision, scored[precision])
    write_benchmark(__file__, {"model": args.model, **scored},
                    variant=Path(args.model).stem, output=args.output)


if __name__ == "__main__":
    main()
