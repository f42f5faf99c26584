"""Accuracy of a trained ViT against the number of attention heads pruned away.

    python benchmarks/studies/head_pruning.py --model vit-cifar10 \
        --data ../shared/data/cifar10/cifar10-train-jpg.tar.gz [--limit-per-class 100]

The images are the recipe's held-out validation split of `--data` (`--validation-size` and
`--seed` as in `zoo train vit`), never the images the model was trained on.

Each head's importance is the validation accuracy left when that head alone is switched off
(its rows of the output projection zeroed). Heads are then removed with
`VisionTransformer.prune_heads`, least important first, keeping at least one head per block,
and the pruned model is evaluated after each removal: the seed notes' observation that many
heads can go at little cost, measured. Writes
benchmarks/results/head_pruning-MODEL-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import zoo
from zoo.bench.report import write_benchmark
from zoo.training.image_data import train_validation_split
from zoo.recipes.vit import ViTRecipe, load_images


def accuracy(model, images: np.ndarray, labels: np.ndarray) -> float:
    logits = model.predict(images, batch_size=256, verbose=0)
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def head_importance(model, images, labels) -> dict[tuple[int, int], float]:
    """Accuracy with each single head switched off."""
    result = {}
    for b, block in enumerate(model.encoder_blocks):
        output = block.self_attention.output_dense
        kernel = output.kernel.numpy() if hasattr(output.kernel, "numpy") else np.asarray(
            output.kernel)
        for h in range(block.self_attention.num_heads):
            switched_off = kernel.copy()
            switched_off[h] = 0.0
            output.kernel.assign(switched_off)
            result[(b, h)] = accuracy(model, images, labels)
        output.kernel.assign(kernel)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="vit-cifar10")
    parser.add_argument("--data", required=True,
                        help="the training data (a folder of class folders or a .tar.gz)")
    parser.add_argument("--validation-size", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-per-class", type=int, default=100)
    parser.add_argument("--workdir", default="runs/head_pruning",
                        help="where an archive is extracted")
    parser.add_argument("--output", help="default: benchmarks/results/head_pruning-MODEL-"
                                          "HOST-DATE.json")
    args = parser.parse_args()

    model = zoo.load(args.model)
    names = list(model.class_names)
    recipe = ViTRecipe(data=args.data, output=args.workdir, image_size=model.image_size,
                       seed=args.seed)
    all_images, folder_labels, folder_classes = load_images(recipe)
    _, valid = train_validation_split(len(all_images), args.validation_size, seed=args.seed,
                                      labels=folder_labels)
    valid = np.concatenate([valid[folder_labels[valid] == c][:args.limit_per_class]
                            for c in range(len(folder_classes))])
    images = all_images[valid]
    labels = np.array([names.index(folder_classes[i]) for i in folder_labels[valid]])
    baseline = accuracy(model, images, labels)
    importance = head_importance(model, images, labels)
    order = sorted(importance, key=lambda bh: -importance[bh])  # least harmful first
    heads_per_block = {b: model.encoder_blocks[b].self_attention.num_heads
                       for b in range(len(model.encoder_blocks))}
    rows = [{"heads_removed": 0, "accuracy": baseline}]
    removed: dict[int, list[int]] = {}
    for block, head in order:
        if len(removed.get(block, [])) + 1 >= heads_per_block[block]:
            continue  # keep one head per block
        removed.setdefault(block, []).append(head)
        pruned = model.prune_heads(removed)  # a new model; `model` stays unpruned
        rows.append({"heads_removed": sum(len(h) for h in removed.values()),
                     "accuracy": accuracy(pruned, images, labels),
                     "parameters": int(pruned.count_params())})
        print(rows[-1])
    result = {"model": args.model, "images": int(len(labels)),
              "total_heads": int(sum(heads_per_block.values())),
              "single_head_importance": {f"block{b}/head{h}": a
                                         for (b, h), a in importance.items()},
              "curve": rows}
    print(json.dumps(rows, indent=2))
    write_benchmark(__file__, result, variant=args.model, output=args.output)


if __name__ == "__main__":
    main()
