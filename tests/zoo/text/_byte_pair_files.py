"""A tiny GPT-2 byte-level BPE vocabulary, trained by Hugging Face's `tokenizers` library on a
varied sample (accents, CJK, emoji, runs of spaces, newlines, tabs, digits, contractions), and
written as a checkpoint has it: `vocab.json` and `merges.txt`."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = [
    "Hello world! The quick brown fox jumps over the lazy dog.",
    "naïve café über straße — 東京タワー 🤗🎉 Ünïcödé",
    "  two  spaces\nnew line\n\n tabs\tand 123 numbers 4567, 3.14",
    "It's don't we'll I'm you've they'd",
    "Once upon a time there was a little cat. The cat sat on the mat.",
]
# Texts the tokenizers must agree on; some hold what the corpus never had (so bytes).
SAMPLE = [
    "Hello world!", "naïve café über straße — 東京 🤗🎉 new emoji 🧑‍🚀 ok",
    "  two  spaces\nnew line\n\n tabs\tand 123", "It's don't<|endoftext|>x", "", " ", "\n",
    "Ünïcödé ﬁ 𝔘 \u00a0nbsp\u3000wide", "trailing   ", "ALL CAPS 999999 ½ ① x²",
    "Ελληνικά русский عربى हिन्दी", "a\r\nb\x00c\u200bd",
]
VOCABULARY_SIZE = 400


def write_tiny_bpe(folder: Path, size: int = VOCABULARY_SIZE) -> Path:
    """Trains the tiny vocabulary (`<|endoftext|>` last, as GPT-2's) into `folder`."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=size - 1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.model.save(str(folder))
    import json

    vocabulary = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    vocabulary["<|endoftext|>"] = len(vocabulary)
    (folder / "vocab.json").write_text(json.dumps(vocabulary), encoding="utf-8")
    return folder


def saved_tiny_lm(folder: Path, max_positions: int, sequence_length: int,
                  **backbone_args) -> tuple:
    """A tiny untrained `CausalLM` with the tiny tokenizer, built and saved as
    `folder/lm.keras`: `(model, path as str)`. The caller seeds Keras if it needs to."""
    from zoo.models.causal_lm.causal_lm import CausalLM
    from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor
    from zoo.text.byte_pair import BytePairTokenizer

    tokenizer = BytePairTokenizer.from_folder(write_tiny_bpe(folder / "bpe"))
    lm = CausalLM.from_architecture("gpt2-tiny", vocabulary_size=VOCABULARY_SIZE,
                                    max_positions=max_positions, **backbone_args)
    lm.preprocessor = CausalLMPreprocessor(tokenizer, sequence_length)
    lm.ensure_built()
    lm.save(folder / "lm.keras")
    return lm, str(folder / "lm.keras")
