"""Fixtures for the model tests: a small tokenizer trained on real Multi30k text."""

from __future__ import annotations

import gzip

import pytest

from zoo.tokenizer import SubwordTokenizer


def train_unigram_spm(texts: list[str], size: int) -> bytes:
    """A serialized SentencePiece unigram model trained on `texts`, deterministic, laid out as
    OPUS-MT ships its `source.spm` / `target.spm` (</s> 0, <unk> 1 by SentencePiece's
    defaults for unigram)."""
    import io

    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=size,
        model_type="unigram", character_coverage=1.0, input_sentence_size=0,
        shuffle_input_sentence=False, num_threads=1, minloglevel=2)
    return model.getvalue()


def run_like_a_server(code: str) -> list:
    """Runs `code` in a fresh process that imports only TensorFlow and TF Text (as TF Serving
    links them), checks that nothing of ours, nor keras-hub or SentencePiece's Python package,
    was needed, and returns the JSON lines `code` printed."""
    import json
    import os
    import subprocess
    import sys

    code = ("import tensorflow as tf, tensorflow_text, json, sys\n" + code
            + "\nours = sorted(m for m in sys.modules if m.split('.')[0] in "
              "('zoo', 'layers', 'training', 'keras_hub', 'sentencepiece'))\n"
              "assert not ours, ours\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.strip().splitlines()
            if line.startswith(("[", "{"))]


def read_gz(path, limit: int | None = None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


@pytest.fixture(scope="session")
def multi30k_pairs(shared_data) -> list[tuple[str, str]]:
    """The first 2,000 real English-German training pairs."""
    folder = shared_data / "multi30k"
    en = read_gz(folder / "train.en.gz", 2000)
    de = read_gz(folder / "train.de.gz", 2000)
    return list(zip(en, de))


@pytest.fixture(scope="session")
def small_tokenizer(multi30k_pairs) -> SubwordTokenizer:
    texts = [s for pair in multi30k_pairs for s in pair]
    return SubwordTokenizer.train(texts, vocabulary_size=1000)
