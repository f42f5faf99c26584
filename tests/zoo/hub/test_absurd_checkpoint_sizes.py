"""Hub checkpoints whose config does not fit: absurd sizes, refused in one line naming the file
before anything is built, through `zoo.load("hf://...")` and `zoo convert`
(`_damaged_folders.py`), and labels that do not fit the head, dropped with a warning that
names them.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import zoo  # noqa: E402
from tests.zoo.hub._damaged_folders import (  # noqa: E402
    CONVERT,
    cases,
    damaged_copy,
    refusal_test,
    rewrite_json,
)
from tests.zoo.hub._hub_helpers import CIFAR_LABELS, publish  # noqa: E402

# id, kind, damaged file, damage, what the message says, surfaces.
ABSURD = [
    # Absurd magnitudes. A ViT's config is bounded by the machine's memory before its weights
    # are read or downloaded (10^9 wide or 10^9 layers would allocate terabytes); sizes that
    # would fit but belong to no weights are checked against the tensors before anything is
    # built (a width of 10^9 was a ResourceExhaustedError traceback; 10^6 layers built until
    # killed). Each value is on one side of any machine's memory, so the message is the same
    # everywhere.
    ("vit-width-10-to-the-9", "vit", "config.json",
     rewrite_json("config.json", intermediate_size=10 ** 9),
     "the Vision Transformer would allocate", ("load", "convert")),
    ("vit-10-to-the-9-layers", "vit", "config.json",
     rewrite_json("config.json", num_hidden_layers=10 ** 9),
     "the Vision Transformer would allocate", ("load", "convert")),
    ("vit-width-of-no-tensor", "vit", "config.json",
     rewrite_json("config.json", intermediate_size=97),
     "intermediate_size 97 is the size of no tensor", ("load", "convert")),
    ("vit-1000-layers", "vit", "config.json",
     rewrite_json("config.json", num_hidden_layers=1000),
     "num_hidden_layers 1000 is more layers than", ("load", "convert")),
    # An image size of 10^6 passed every type check and was a ResourceExhaustedError.
    ("vit-image-size-10-to-the-6", "vit", "config.json",
     rewrite_json("config.json", image_size=10 ** 6),
     "the Vision Transformer would allocate", ("load", "convert")),
    ("marian-width-10-to-the-9", "marian", "config.json",
     rewrite_json("config.json", encoder_ffn_dim=10 ** 9, decoder_ffn_dim=10 ** 9),
     "encoder_ffn_dim 1000000000 is the size of no tensor", ("load", "convert")),
    ("marian-10-to-the-6-layers", "marian", "config.json",
     rewrite_json("config.json", encoder_layers=10 ** 6),
     "encoder_layers 1000000 is more layers than", ("load", "convert")),
    ("bert-width-10-to-the-9", "bert", "config.json",
     rewrite_json("config.json", intermediate_size=10 ** 9),
     "intermediate_size 1000000000 is the size of no tensor", ("load", "convert")),
    ("bert-10-to-the-6-layers", "bert", "config.json",
     rewrite_json("config.json", num_hidden_layers=10 ** 6),
     "num_hidden_layers 1000000 is more layers than", ("load", "convert")),
]


test_a_damaged_checkpoint_is_one_line_naming_the_file = refusal_test(ABSURD)


# ---------------------------------------------------------------------- labels
# id, kind, config.json's labels, what the warning names, surfaces (`zoo convert timm-vit`
# reads no config.json, so no labels).
LABELS = [
    ("two-labels-for-ten-classes", "vit", {"id2label": {"0": "cat", "1": "dog"}},
     ["0: 'cat'", "1: 'dog'", "8 of the head's ids have no label"], ("load", "convert")),
    ("an-eleventh-label", "vit",
     {"id2label": {**{str(i): name for i, name in enumerate(CIFAR_LABELS)}, "10": "zebra"}},
     ["0: 'airplane'", "9: 'truck'", "10: 'zebra' not among ids 0..9"],
     ("load", "convert")),
    ("ids-that-are-not-numbers", "vit",
     {"id2label": {name: name for name in CIFAR_LABELS}},
     ["'airplane': 'airplane'", "'truck': 'truck'", "not among ids 0..9"], ("load", "convert")),
    ("timm-nine-label-names", "timm", {"label_names": CIFAR_LABELS[:9]},
     ["0: 'airplane'", "8: 'ship'", "1 of the head's ids have no label"], ("load",)),
]


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python's default `warnings.showwarning` (which pytest replaces to record warnings)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@pytest.mark.parametrize("case, kind, config, named, surface", cases(LABELS))
def test_labels_that_do_not_fit_the_head_are_dropped_with_a_warning_naming_them(
        good, hub_cache, tmp_path, capsys, case, kind, config, named, surface):
    from zoo.cli.main import main

    folder = damaged_copy(good, kind, tmp_path, rewrite_json("config.json", **config))
    if surface == "load":
        publish(hub_cache, f"org/labels-{case}", folder)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = zoo.load(f"hf://org/labels-{case}")
        said = [str(w.message) for w in caught if "does not fit the head" in str(w.message)]
        assert model.class_names is None and len(said) == 1
        assert [top[0][0] for top in model.classify(
            np.zeros((1, 32, 32, 3), "uint8"), top_k=1)][0].startswith("class_")
    else:
        capsys.readouterr()
        with warnings.catch_warnings():  # the zoo's own, shown as Python shows them
            warnings.simplefilter("ignore")
            warnings.filterwarnings("always", module=r"zoo\.")
            warnings.showwarning = show_warning
            assert main(["convert", CONVERT[kind][0], str(folder), "--output",
                         str(tmp_path / "out")]) == 0
        lines = capsys.readouterr().err.strip().splitlines()
        said = [line for line in lines if line.startswith("zoo: warning: ")]
        assert len(lines) == 1 and len(said) == 1, lines
        assert zoo.load(str(tmp_path / "out")).class_names is None
    assert "does not fit the head's 10 classes" in said[0] and "dropped" in said[0]
    assert all(text in said[0] for text in named), said[0]
