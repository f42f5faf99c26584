"""Damaged, foreign and hostile files in hub checkpoints: each is one line that names the file
and what is wrong, through `zoo.load("hf://...")` (an offline Hugging Face cache built here,
`tests/zoo/hub/_hub_helpers.py`'s) and through `zoo convert` (status 2, one `zoo: error:` line, no
traceback), and a refused conversion leaves nothing in the zoo's cache or output folder.

The checkpoints are tiny random ones written by `transformers` (ViT, Marian, BERT), a timm
layout renamed from the ViT's tensors, and SentencePiece models trained here; each case damages
a copy of one file.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import zoo  # noqa: E402
import zoo.hub.handles as hub  # noqa: E402
from tests.zoo.conftest import train_unigram_spm  # noqa: E402
from tests.zoo.hub._hub_helpers import (  # noqa: E402
    CIFAR_LABELS,
    COMMIT,
    kept_files,
    one_line_error,
    publish,
    timm_state_dict,
    vit_folder,
)
from zoo.training.errors import UserError  # noqa: E402


# ---------------------------------------------------------------------- good checkpoints
@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict[str, Path]:
    """One intact folder per kind: "vit" (ViTForImageClassification with CIFAR-10 labels),
    "timm" (its tensors in timm's layout), "marian" (OPUS-MT layout) and "bert" (a
    sentence-transformers BertModel)."""
    from safetensors.numpy import save_file

    root = tmp_path_factory.mktemp("good")
    vit_folder(root / "vit", (0.5,) * 3, (0.5,) * 3, heads=3, hidden=48)
    (root / "timm").mkdir()
    save_file(timm_state_dict(root / "vit"), root / "timm" / "model.safetensors")
    (root / "timm" / "config.json").write_text(json.dumps({
        "architecture": "vit_tiny_patch8_32", "num_classes": 10, "global_pool": "token",
        "label_names": CIFAR_LABELS, "pretrained_cfg": {"mean": [0.5] * 3, "std": [0.5] * 3}}))
    _marian_folder(root / "marian")
    _bert_folder(root / "bert")
    return {kind: root / kind for kind in ("vit", "timm", "marian", "bert")}


def _marian_folder(folder: Path) -> None:
    from transformers import MarianConfig, MarianMTModel

    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghiklmnoprstuwyz"), rng.integers(2, 7)))
             for _ in range(120)]
    proto = train_unigram_spm([" ".join(rng.choice(words, 6)) for _ in range(600)], 100)
    folder.mkdir()
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(proto)
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(processor.get_piece_size()):
        if not (processor.is_control(i) or processor.is_unknown(i)):
            vocab.setdefault(processor.id_to_piece(i), len(vocab))
    vocab["<pad>"] = pad = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en"}))
    torch.manual_seed(0)
    MarianMTModel(MarianConfig(
        vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=pad,
        decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
        bad_words_ids=[[pad]], architectures=["MarianMTModel"])).save_pretrained(folder)


def _bert_folder(folder: Path) -> None:
    from transformers import BertConfig, BertModel

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokens), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=32), add_pooling_layer=False
              ).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 16, "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))


# ---------------------------------------------------------------------- damage and surfaces
# `zoo convert` format and extra flags of each kind.
CONVERT = {"vit": ["hf-vit"], "timm": ["timm-vit", "--num-heads", "3"], "marian": ["marian"],
           "bert": ["minilm"]}


def damaged_copy(good: dict[str, Path], kind: str, where: Path,
                 damage: Callable[[Path], None]) -> Path:
    folder = where / f"{kind}-damaged"
    shutil.copytree(good[kind], folder)
    damage(folder)
    return folder


def publish_with_links(cache: Path, repo: str, folder: Path) -> Path:
    """`publish`, and the folder's links to what is not a file (/dev/zero) linked as they
    are; returns the snapshot folder."""
    publish(cache, repo, folder)
    snapshot = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / COMMIT
    for path in folder.rglob("*"):
        if path.is_symlink() and not path.is_file():
            link = snapshot / path.relative_to(folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.readlink(path))
    return snapshot


def refused_by_load(cache: Path, folder: Path, damaged_file: str, repo: str) -> str:
    """The one-line message of `zoo.load` for the folder published as `repo`, after checking
    that it names the handle and the snapshot's damaged file, and that nothing was kept."""
    snapshot = publish_with_links(cache, repo, folder)
    with pytest.raises(UserError) as error:
        zoo.load(f"hf://{repo}")
    message = one_line_error(error)
    assert message.startswith(f"hf://{repo}: ")
    assert str(snapshot / damaged_file) in message
    assert kept_files(hub.hub_cache_dir()) == []
    return message


def refused_by_convert(kind: str, folder: Path, damaged_file: str, out: Path, capsys) -> str:
    """The stderr line of `zoo convert` for the folder, after checking the status (2), that
    it is one `zoo: error:` line naming the damaged file, and that nothing was written."""
    from zoo.cli.main import main

    capsys.readouterr()
    status = main(["convert", CONVERT[kind][0], str(folder), "--output", str(out),
                   *CONVERT[kind][1:]])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("zoo: error: ") and str(folder / damaged_file) in err
    assert not out.exists() or list(out.iterdir()) == []
    return err


def rewrite_json(name: str, **changes: object) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / name
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return damage


def rewrite_bytes(name: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / name).write_bytes(change((folder / name).read_bytes()))
    return damage


def link_to_dev_zero(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to("/dev/zero")
    return damage


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


ST = "model.safetensors"
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
    # Weights that are all NaN answered nan probabilities with exit 0.
    ("vit-nan-weights", "vit", ST, lambda folder: _poison(folder / ST, np.nan),
     "NaN or infinite values; the weights are damaged", ("load", "convert")),
    ("marian-infinite-weights", "marian", ST, lambda folder: _poison(folder / ST, np.inf),
     "NaN or infinite values; the weights are damaged", ("load", "convert")),
]


def _poison(path: Path, value: float) -> None:
    """Rewrites a safetensors file with every value of its first tensor set to `value`."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(path)
    first = sorted(tensors)[0]
    tensors[first] = np.full_like(tensors[first], value)
    save_file(tensors, path)


def _cases(table: list) -> list:
    return [pytest.param(*row[:-1], surface, id=f"{row[0]}-{surface}")
            for row in table for surface in row[-1]]


@pytest.mark.parametrize("case, kind, damaged_file, damage, expected, surface",
                         _cases(DAMAGED))
def test_a_damaged_checkpoint_is_one_line_naming_the_file(good, hub_cache, tmp_path, capsys,
                                                          case, kind, damaged_file, damage,
                                                          expected, surface):
    folder = damaged_copy(good, kind, tmp_path, damage)
    if surface == "load":
        message = refused_by_load(hub_cache, folder, damaged_file, f"org/{kind}-{case}")
    else:
        message = refused_by_convert(kind, folder, damaged_file, tmp_path / "out", capsys)
    assert expected in message


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


# ---------------------------------------------------------------------- pytorch_model.bin
class RunsACommand:
    """What a hostile pickle holds: unpickling it runs a shell command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _bin_with_code(marker: Path, legacy: bool) -> Callable[[Path, dict], None]:
    def write(path: Path, state: dict) -> None:
        torch.save({**state, "payload": RunsACommand(f"touch {marker}")}, path,
                   _use_new_zipfile_serialization=not legacy)
    return write


PICKLES = [
    ("code-in-the-pickle", lambda marker: _bin_with_code(marker, legacy=False),
     "holds Python objects (posix.system) that a safe load refuses", ("load", "convert")),
    ("code-in-a-legacy-pickle", lambda marker: _bin_with_code(marker, legacy=True),
     "holds Python objects (posix.system) that a safe load refuses", ("load",)),
    ("random-bytes", lambda marker: lambda path, state: path.write_bytes(
        np.random.default_rng(3).bytes(5000)), "is not a PyTorch checkpoint", ("load",)),
    ("truncated", lambda marker: lambda path, state: (
        torch.save(state, path), path.write_bytes(path.read_bytes()[:2000])),
     "is not a readable PyTorch checkpoint (truncated or damaged?)", ("load",)),
    ("a-list", lambda marker: lambda path, state: torch.save(list(state.values()), path),
     "holds a list, not a state dict of tensors", ("load",)),
    ("a-training-checkpoint", lambda marker: lambda path, state: torch.save(
        {"model": state, "epoch": 3}, path), "holds 'model' (dict), not only tensors",
     ("load",)),
]


@pytest.mark.parametrize("case, writer, expected, surface", _cases(PICKLES))
def test_a_hostile_or_foreign_pytorch_bin_is_one_line(good, hub_cache, tmp_path, capsys, case,
                                                      writer, expected, surface):
    """A repository with only pytorch_model.bin: a pickle that would run code is refused
    without running it and without advice to turn the safety off; `zoo convert` reads
    safetensors only, so it never unpickles the file either."""
    from safetensors.numpy import load_file

    marker = tmp_path / "pwned"
    state = {k: torch.from_numpy(v) for k, v in load_file(good["vit"] / ST).items()}

    def damage(folder: Path) -> None:
        (folder / ST).unlink()
        writer(marker)(folder / "pytorch_model.bin", state)

    folder = damaged_copy(good, "vit", tmp_path, damage)
    if surface == "load":
        message = refused_by_load(hub_cache, folder, "pytorch_model.bin", f"org/bin-{case}")
        assert expected in message
    else:
        message = refused_by_convert("vit", folder, "", tmp_path / "out", capsys)
        assert "holds no model.safetensors" in message
    assert not marker.exists()
    assert "weights_only=False" not in message
    if "Python objects" in message:
        assert "safetensors" in message


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


@pytest.mark.parametrize("case, kind, config, named, surface", _cases(LABELS))
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
