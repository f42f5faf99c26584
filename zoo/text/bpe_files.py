"""The files of a byte-level BPE tokenizer as checkpoints hold them: `vocab.json` and
`merges.txt`.

GPT-2's tokenizer (`zoo.text.byte_pair`) and CLIP's (`zoo.text.clip_tokenizer`) read and write
the same two files and check them the same way: the vocabulary maps each piece to one id of
0..n-1, and each merge rule joins two pieces of the vocabulary, in rank order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zoo.training.errors import UserError
from zoo.training.files.json_files import read_json_file

VOCABULARY_FILE, MERGES_FILE = "vocab.json", "merges.txt"


def check_vocabulary(vocabulary: Any) -> None:
    """Raises UserError unless `vocabulary` maps pieces (str) to the ids 0..n-1, each once."""
    if not isinstance(vocabulary, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in vocabulary.items()):
        raise UserError("vocabulary must map pieces (str) to ids (int); got "
                        f"{type(vocabulary).__name__}")
    if sorted(vocabulary.values()) != list(range(len(vocabulary))):
        raise UserError(f"vocabulary ids must be 0..{len(vocabulary) - 1}, each once")


def merge_rules(lines: Iterable[str], vocabulary: dict[str, int]) -> list[str]:
    """The merge rules of `lines` (their line ends already cut), blank lines and the
    `#version` line dropped.

    Raises:
        UserError: a rule is not two pieces of `vocabulary` (the message quotes it).
    """
    merges = [line for line in lines if line and not line.startswith("#version")]
    for merge in merges:
        parts = merge.split(" ")
        if len(parts) != 2 or not all(p in vocabulary for p in parts):
            raise UserError(f"merge rule {merge!r} is not two pieces of the vocabulary")
    return merges


def read_bpe_files(folder: Path, owner: str) -> tuple[Any, list[str]]:
    """`(vocabulary, merge lines)` of `folder`'s `vocab.json` (size-limited JSON object) and
    `merges.txt`, unchecked.

    Raises:
        FileNotFoundError: a file is missing; the message says `owner` needs it.
        UserError: `vocab.json` is damaged or not a JSON object.
    """
    for name in (VOCABULARY_FILE, MERGES_FILE):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{owner} needs {name}; there is none in {folder}")
    vocabulary = read_json_file(folder / VOCABULARY_FILE, expect=dict)
    merges = (folder / MERGES_FILE).read_text(encoding="utf-8").splitlines()
    return vocabulary, merges


def write_bpe_files(folder: Path, vocabulary: dict[str, int], merges: Iterable[str]) -> None:
    """Writes `vocab.json` and `merges.txt` (with GPT-2's `#version` line) into `folder`."""
    (folder / VOCABULARY_FILE).write_text(
        json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    (folder / MERGES_FILE).write_text(
        "#version: 0.2\n" + "".join(m + "\n" for m in merges), encoding="utf-8")
