"""Damaged and foreign files in hub checkpoints: each is one line that names the file and what
is wrong, through `zoo.load("hf://...")` and through `zoo convert`, and a refused conversion
leaves nothing in the zoo's cache or output folder (`_damaged_folders.py`: the checkpoints, the
damage, both surfaces). Here: truncated, random or inconsistent safetensors files and JSON
files, and JSON files past the size limit. Absurd sizes: test_absurd_checkpoint_sizes.py;
damaged weights and pickles: test_damaged_weights.py.
"""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from tests.zoo.hub._damaged_folders import (  # noqa: E402
    ST,
    damaged_copy,
    link_to_dev_zero,
    refusal_test,
    refused_by_convert,
    refused_by_load,
    rewrite_bytes,
    rewrite_json,
    safetensors_bytes,
)
from zoo.training.errors import UserError  # noqa: E402

# id, kind, damaged file, damage, what the message says, surfaces.
DAMAGED = [
    ("truncated-in-header", "vit", ST, rewrite_bytes(ST, lambda b: b[:300]),
     "truncated or not a safetensors file", ("load", "convert")),
    ("truncated-in-data", "vit", ST, rewrite_bytes(ST, lambda b: b[:-100]),
     "past its end", ("load", "convert")),
    ("random-bytes", "vit", ST,
     rewrite_bytes(ST, lambda b: np.random.default_rng(1).bytes(4096)),
     "truncated or not a safetensors file", ("load", "convert")),
    ("header-length-2-to-the-62", "vit", ST,
     rewrite_bytes(ST, lambda b: struct.pack("<Q", 2 ** 62) + b[8:]),
     "give a header of 4,611,686,018,427,387,904 bytes", ("load", "convert")),
    ("header-not-json", "vit", ST,
     rewrite_bytes(ST, lambda b: struct.pack("<Q", 16) + b"this is not JSON" + bytes(64)),
     "header is not JSON", ("load", "convert")),
    ("offsets-past-the-end", "vit", ST, rewrite_bytes(ST, lambda b: safetensors_bytes(
        {"x": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}, bytes(16))),
     "tensor 'x' ends at byte 4,000 of the data, past its end", ("load", "convert")),
    ("heads-do-not-divide", "vit", "config.json", rewrite_json("config.json",
                                                                num_attention_heads=5),
     "num_attention_heads 5 does not divide hidden_size 48", ("load", "convert")),
    ("patch-size-0", "vit", "config.json", rewrite_json("config.json", patch_size=0),
     "patch_size must be a positive integer; got 0", ("load", "convert")),
    ("patch-size-negative", "vit", "config.json", rewrite_json("config.json", patch_size=-8),
     "patch_size must be a positive integer; got -8", ("load", "convert")),
    ("patch-size-not-an-int", "vit", "config.json",
     rewrite_json("config.json", patch_size="8px"),
     "patch_size must be a positive integer; got '8px'", ("load", "convert")),
    ("config-not-json", "vit", "config.json",
     rewrite_bytes("config.json", lambda b: b[:-5]), "is not valid JSON", ("load", "convert")),
    # `zoo convert hf-vit` does not read the image processor: `zoo.load` only.
    ("preprocessor-not-json", "vit", "preprocessor_config.json",
     rewrite_bytes("preprocessor_config.json", lambda b: b"{'image_mean': 0.5}"),
     "is not valid JSON", ("load",)),
    ("marian-heads-do-not-divide", "marian", "config.json", rewrite_json(
        "config.json", encoder_attention_heads=3, decoder_attention_heads=3),
     "encoder_attention_heads 3 does not divide d_model 16", ("load", "convert")),
    ("marian-vocab-not-json", "marian", "vocab.json",
     rewrite_bytes("vocab.json", lambda b: b[: len(b) // 2]), "is not valid JSON",
     ("load", "convert")),
    ("marian-truncated-weights", "marian", ST, rewrite_bytes(ST, lambda b: b[:-8]),
     "past its end", ("load", "convert")),
    ("timm-random-weights", "timm", ST,
     rewrite_bytes(ST, lambda b: np.random.default_rng(2).bytes(len(b))),
     "truncated or not a safetensors file", ("load", "convert")),
    ("bert-heads-do-not-divide", "bert", "config.json",
     rewrite_json("config.json", num_attention_heads=3),
     "num_attention_heads 3 does not divide hidden_size 16", ("load", "convert")),
]


test_a_damaged_checkpoint_is_one_line_naming_the_file = refusal_test(DAMAGED)


# ---------------------------------------------------------------------- JSON size limit
LINKED = [
    ("vit", "config.json", ("load", "convert")),
    ("vit", "preprocessor_config.json", ("load",)),
    ("vit", "model.safetensors.index.json", ("load", "convert")),
    ("marian", "vocab.json", ("load", "convert")),
    ("marian", "tokenizer_config.json", ("load", "convert")),
    ("bert", "sentence_bert_config.json", ("load", "convert")),
    ("bert", "1_Pooling/config.json", ("load", "convert")),
]


@pytest.mark.parametrize("kind, linked_file, surface", [
    pytest.param(kind, name, surface, id=f"{kind}-{name}-{surface}")
    for kind, name, surfaces in LINKED for surface in surfaces])
def test_a_hub_json_file_linked_to_dev_zero_is_refused_at_the_size_limit(
        good, hub_cache, tmp_path, capsys, kind, linked_file, surface):
    """Read without a limit, /dev/zero fills memory (4 GB in 14 s); with it, at most 16 MiB
    and one byte are read, at once."""
    import zoo.converters  # noqa: F401  (Keras imported before the clock starts)

    folder = damaged_copy(good, kind, tmp_path, link_to_dev_zero(linked_file))
    start = time.monotonic()
    if surface == "load":
        message = refused_by_load(hub_cache, folder, linked_file,
                                  f"org/{kind}-{linked_file.replace('/', '-')}")
    else:
        message = refused_by_convert(kind, folder, linked_file, tmp_path / "out", capsys)
    assert time.monotonic() - start < 10
    assert "is larger than the 16 MiB a JSON file may have" in message


@pytest.mark.parametrize("extra, refused", [(0, False), (1, True)])
def test_the_json_size_limit_is_exact(tmp_path, extra, refused):
    from zoo.training.files.json_files import JSON_FILE_LIMIT, read_json_file

    path = tmp_path / "config.json"
    path.write_bytes(b'{"patch_size": 16}'.ljust(JSON_FILE_LIMIT + extra, b" "))
    if refused:
        with pytest.raises(UserError, match="config.json is larger than the 16 MiB"):
            read_json_file(path)
    else:
        assert read_json_file(path, expect=dict) == {"patch_size": 16}
