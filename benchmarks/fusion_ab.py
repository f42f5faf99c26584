"""The ViT-tiny step with and without one of the zoo's TensorFlow step changes, in one process.

    python benchmarks/fusion_ab.py
        --change gelu-fusion|layernorm-fusion|scores-bfloat16-backward|bias-apart
        [--work vit-tiny-train|vit-tiny-infer] [--precision float32|bfloat16] [--rounds 6]

Builds `zoo bench`'s ViT-tiny step twice (`zoo.bench.workers.keras_vit_step`, TensorFlow with
oneDNN, random weights): "without" traced with the change turned off, "with" as the zoo runs.
The changes:
- `gelu-fusion`: the exact GELU as one XLA call in the step (`zoo.layers.xla_fusion.fusing`
  answers False for "without"; this turns off the LayerNorm's fusion too);
- `layernorm-fusion`: the LayerNorm's forward as one XLA call in predict and test steps
  (`zoo.layers.layer_normalization._normalize` is its plain form for "without");
- `scores-bfloat16-backward`: in bfloat16 training, the gradient of the attention scores'
  product as two bfloat16 products (`zoo.layers.attention.gradient_recording` answers False
  for "without": the float32 products of the plain form);
- `bias-apart`: the attention projections' bias added after the reshape, apart from the
  product, in bfloat16 (`zoo.layers.einsum_projection._bias_apart` answers False for
  "without").
Both are warmed up, then timed in alternating rounds of 5 steps
(`zoo.bench.steps.interleaved`); prints each one's images/s a
round and the medians, and writes them to
benchmarks/results/fusion_ab-CHANGE-WORK-PRECISION-HOST-DATE.json.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["KERAS_BACKEND"] = "tensorflow"
from zoo.runtime import use_onednn  # noqa: E402

use_onednn()  # before TensorFlow loads
import zoo.layers.attention as attention  # noqa: E402
import zoo.layers.einsum_projection as einsum_projection  # noqa: E402
import zoo.layers.layer_normalization as layer_normalization  # noqa: E402
import zoo.layers.xla_fusion as xla_fusion  # noqa: E402
from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.steps import interleaved  # noqa: E402
from zoo.bench.workers import keras_vit_step, vit_step_parser  # noqa: E402


def _never(*_: object) -> bool:
    return False


# change: (module, name, what the name is set to for "without")
SWITCHES = {"gelu-fusion": (xla_fusion, "fusing", _never),
            "layernorm-fusion": (layer_normalization, "_normalize",
                                 layer_normalization._in_dtype),
            "scores-bfloat16-backward": (attention, "gradient_recording", _never),
            "bias-apart": (einsum_projection, "_bias_apart", _never)}


def main() -> None:
    parser = vit_step_parser(__doc__.splitlines()[0])
    parser.add_argument("--change", choices=sorted(SWITCHES), required=True)
    args = parser.parse_args()
    os.environ["ZOO_BENCH_PRECISION"] = args.precision  # read by keras_vit_step's policy
    module, name, without = SWITCHES[args.change]
    switch = getattr(module, name)
    steps = {}
    for variant in ("without", "with"):
        setattr(module, name, switch if variant == "with" else without)
        step, batch = keras_vit_step(args.work, "zoo")
        for _ in range(3):  # traced (with the switch as set) and warmed up
            step()
        steps[variant] = step
    setattr(module, name, switch)
    rates = {variant: [batch / seconds for seconds in found]
             for variant, found in interleaved(steps, args.rounds, calls=5).items()}
    for variant, found in rates.items():
        print(f"{variant:8s} median {statistics.median(found):8.1f} images/s; rounds: "
              + ", ".join(f"{rate:.1f}" for rate in found))
    write_benchmark(__file__, {
        "change": args.change, "work": args.work, "precision": args.precision,
        "batch": batch, "rounds": args.rounds,
        "images_per_second": {variant: [round(rate, 1) for rate in found]
                              for variant, found in rates.items()},
        "median": {variant: round(statistics.median(found), 1)
                   for variant, found in rates.items()}},
        variant=f"{args.change}-{args.work}-{args.precision}", output=args.output)


if __name__ == "__main__":
    main()
