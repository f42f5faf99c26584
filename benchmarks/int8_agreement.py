"""How often an int8 translator writes exactly the float32 model's greedy translation.

    python benchmarks/int8_agreement.py [--model translator-multi30k-en-de] \
        [--source ../shared/data/multi30k/test_2016_flickr.en.gz] [--sentences 300]

Loads `--model` twice, quantizes one copy (`zoo.quantize`), translates the first
`--sentences` lines of `--source` greedily with both, and writes the share of identical
outputs to benchmarks/results/int8_agreement-<model>.json. The issue's mark for a converted
OPUS-MT is 95%; any translator `zoo.load` takes (a path, `hf://Helsinki-NLP/opus-mt-en-de`
where it is cached) can be measured.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import zoo


def read_lines(path: str, count: int) -> list[str]:
    """The first `count` lines of a text file, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(count), f)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="translator-multi30k-en-de")
    parser.add_argument("--source",
                        default="../shared/data/multi30k/test_2016_flickr.en.gz")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()

    texts = read_lines(args.source, args.sentences)
    float_model = zoo.load(args.model)
    int8_model = zoo.quantize(zoo.load(args.model))
    expected = float_model.translate(texts, beam_size=1)
    found = int8_model.translate(texts, beam_size=1)
    equal = sum(a == b for a, b in zip(expected, found))
    result = {"benchmark": "int8_agreement", "model": args.model, "source": Path(args.source).name,
              "sentences": len(texts), "equal_greedy": equal,
              "share": round(equal / len(texts), 4)}
    name = Path(args.model).name.replace(":", "_").replace("/", "_")
    output = Path(args.output or Path(__file__).parent / "results" /
                  f"int8_agreement-{name}.json")
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
