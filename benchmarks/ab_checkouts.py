"""Two checkouts of the zoo, one piece of `zoo bench` work, in one process, alternating.

    python benchmarks/ab_checkouts.py OLD_CHECKOUT NEW_CHECKOUT [--work vit-tiny-train]
        [--rounds 10] [--calls 3]

Separate processes on a shared 2-core host differ by a fifth from one run to the next, more
than most changes are worth. Here each checkout's model is built in the same process (the
`layers`, `zoo` and `training` packages imported from one checkout, then dropped from
`sys.modules` and imported from the other), warmed up, and then their calls alternate, the
order swapped every round, so that the host's slow and fast moments fall on both. Works:
`vit-tiny-train` (AdamW `train_on_batch`, batch 128), `vit-tiny-infer` (`predict_on_batch`,
batch 256), `mt-greedy` and `mt-beam4` (`Translator.search`, beam 1 or 4, the end token
suppressed), each with `zoo bench`'s shapes. Set `KERAS_BACKEND` to choose the backend;
TensorFlow runs with oneDNN on, as the `zoo` command has it. Prints each round's rate, the
means, and the ratio NEW / OLD on the means and as the median of the rounds' ratios. Both
checkouts must have the package layout of 2026-11-26 (zoo.bench.works, zoo.models). The
rounds are timed by the harness (`zoo.bench.steps.interleaved`, imported before either
checkout) and written to benchmarks/results/ab_checkouts-WORK-HOST-DATE.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Callable

# The harness's timing and naming, imported from wherever `zoo` is installed; `import_from`
# then drops that `zoo` from `sys.modules`, and these functions keep working.
from zoo.bench.report import write_benchmark
from zoo.bench.steps import interleaved

# `zoo.cli.main.OWN_PACKAGES`, written out: importing it would load one checkout's `zoo` first.
PACKAGES = ("layers", "zoo", "training")
WORKS = ("vit-tiny-train", "vit-tiny-infer", "mt-greedy", "mt-beam4")


def import_from(checkout: Path) -> None:
    """Makes the next `import zoo` (and `layers`, `training`) read `checkout`."""
    for name in list(sys.modules):
        if name.split(".")[0] in PACKAGES:
            del sys.modules[name]
    sys.path.insert(0, str(checkout))


def build_call(checkout: Path, work: str) -> tuple[Callable[[], object], int]:
    """`(call, items)`: one call of `work` with `checkout`'s code, and the items it does."""
    import keras
    import numpy as np

    import_from(checkout)
    try:
        from zoo.bench.workers import MT, VIT_TINY, random_source
        from zoo.bench.works import SETTINGS

        keras.utils.set_random_seed(0)
        if work in ("mt-greedy", "mt-beam4"):
            from zoo.training.text_batches import END_ID
            from zoo.models.translator.model import Translator

            model = Translator(dropout=0.0, suppressed_token_ids=[END_ID], **MT)
            model.ensure_built()
            source = random_source(np.random.default_rng(0), END_ID).astype("int32")
            new = SETTINGS["mt_new_tokens"]
            beam = 4 if work == "mt-beam4" else 1
            return (lambda: model.search(source, beam_size=beam, max_length=new),
                    source.shape[0] * new)
        from zoo.models.vit.model import VisionTransformer

        model = VisionTransformer(dropout=0.0, **VIT_TINY)
    finally:
        sys.path.remove(str(checkout))
    batch = SETTINGS["vit_train_batch" if work == "vit-tiny-train" else "vit_infer_batch"]
    images = np.random.default_rng(0).uniform(0, 255, (batch, 32, 32, 3)).astype("float32")
    if work == "vit-tiny-infer":
        return lambda: np.asarray(model.predict_on_batch(images)), batch
    labels = np.random.default_rng(1).integers(0, VIT_TINY["num_classes"], batch)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return lambda: model.train_on_batch(images, labels), batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--work", choices=WORKS, default="vit-tiny-train")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=3, help="calls timed per round")
    args = parser.parse_args()
    for checkout in (args.old, args.new):
        if not (checkout / "zoo" / "__init__.py").is_file():
            parser.error(f"{checkout} is not a checkout of the zoo (no zoo/__init__.py)")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # before TensorFlow loads
    calls, items = [], 0  # both checkouts do the same items a call (the bench's shapes)
    for checkout in (args.old, args.new):
        call, items = build_call(checkout.resolve(), args.work)
        call()  # compile
        calls.append(call)
    # Warm-up after both are built: the first checkout's first calls after the second one's
    # compilation ran up to 40% slow, which weighed on its mean alone.
    for _ in range(args.calls):
        for call in calls:
            call()
    seconds = interleaved({"old": calls[0], "new": calls[1]}, args.rounds, args.calls)
    rates = [[items / s for s in seconds[label]] for label in ("old", "new")]
    means = [sum(r) / len(r) for r in rates]
    for label, checkout, r, mean in zip(("old", "new"), (args.old, args.new), rates, means):
        print(f"{label} {checkout}: " + " ".join(f"{x:.0f}" for x in r) + f" | mean {mean:.1f}")
    ratios = [n / o for o, n in zip(*rates)]
    print(f"{args.work}: new / old {means[1] / means[0]:.3f} on the means, "
          f"{statistics.median(ratios):.3f} the median of the rounds' ratios")
    write_benchmark(__file__, {
        "settings": {"work": args.work, "rounds": args.rounds, "calls": args.calls,
                     "items_per_call": items},
        "checkouts": {"old": str(args.old.resolve()), "new": str(args.new.resolve())},
        "rates": {"old": rates[0], "new": rates[1]},
        "new_over_old": {"means": means[1] / means[0], "median": statistics.median(ratios)},
    }, variant=args.work)


if __name__ == "__main__":
    main()
