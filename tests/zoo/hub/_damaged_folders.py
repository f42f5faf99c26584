"""Checkpoint folders to damage, and the two ways a damaged one is refused, for the tests of
damaged, absurd and hostile hub checkpoints (test_damaged_checkpoints.py,
test_absurd_checkpoint_sizes.py, test_damaged_weights.py).

`write_good_folders` writes one intact folder per kind: tiny random checkpoints written by
`transformers` (ViT, Marian, BERT), a timm layout renamed from the ViT's tensors, and
SentencePiece models trained here; `damaged_copy` damages a copy of one file, and
`refused_by_load` (`zoo.load("hf://...")`, through an offline Hugging Face cache built by
`_hub_helpers.py`) and `refused_by_convert` (`zoo convert`: status 2, one `zoo: error:` line, no
traceback) check that it is refused in one line naming the file, leaving nothing in the zoo's
cache or output folder. The modules that use it skip without torch, transformers,
huggingface_hub or sentencepiece.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import zoo
import zoo.hub.handles as hub
from tests.zoo.conftest import train_unigram_spm
from tests.zoo.hub._hub_helpers import (
    CIFAR_LABELS,
    COMMIT,
    kept_files,
    one_line_error,
    publish,
    timm_state_dict,
    vit_folder,
)
from zoo.training.errors import UserError

ST = "model.safetensors"


# ---------------------------------------------------------------------- good checkpoints
def write_good_folders(root: Path) -> dict[str, Path]:
    """One intact folder per kind under `root`: "vit" (ViTForImageClassification with
    CIFAR-10 labels), "timm" (its tensors in timm's layout), "marian" (OPUS-MT layout) and
    "bert" (a sentence-transformers BertModel)."""
    from safetensors.numpy import save_file

    vit_folder(root / "vit", (0.5,) * 3, (0.5,) * 3, heads=3, hidden=48)
    (root / "timm").mkdir()
    save_file(timm_state_dict(root / "vit"), root / "timm" / ST)
    (root / "timm" / "config.json").write_text(json.dumps({
        "architecture": "vit_tiny_patch8_32", "num_classes": 10, "global_pool": "token",
        "label_names": CIFAR_LABELS, "pretrained_cfg": {"mean": [0.5] * 3, "std": [0.5] * 3}}))
    _marian_folder(root / "marian")
    _bert_folder(root / "bert")
    return {kind: root / kind for kind in ("vit", "timm", "marian", "bert")}


def _marian_folder(folder: Path) -> None:
    import torch
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
    import torch
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


def poison(path: Path, value: float) -> None:
    """Rewrites a safetensors file with every value of its first tensor set to `value`."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(path)
    first = sorted(tensors)[0]
    tensors[first] = np.full_like(tensors[first], value)
    save_file(tensors, path)


def cases(table: list) -> list:
    """A table's rows as test parameters, one per surface of the row's last item."""
    return [pytest.param(*row[:-1], surface, id=f"{row[0]}-{surface}")
            for row in table for surface in row[-1]]



def refusal_test(table: list) -> Callable[..., None]:
    """The test that every row of `table` (id, kind, damaged file, damage, what the message
    says, surfaces) is refused in one line naming the file, on each of its surfaces ("load":
    `refused_by_load`, as the repository org/KIND-ID; "convert": `refused_by_convert`). A test
    module assigns it to a `test_` name, which pytest collects."""

    @pytest.mark.parametrize("case, kind, damaged_file, damage, expected, surface",
                             cases(table))
    def test(good, hub_cache, tmp_path, capsys, case, kind, damaged_file, damage, expected,
             surface) -> None:
        folder = damaged_copy(good, kind, tmp_path, damage)
        if surface == "load":
            message = refused_by_load(hub_cache, folder, damaged_file, f"org/{kind}-{case}")
        else:
            message = refused_by_convert(kind, folder, damaged_file, tmp_path / "out", capsys)
        assert expected in message

    return test
