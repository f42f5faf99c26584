"""CLIP's tokenizer against transformers' `CLIPTokenizer` on the same tiny files."""

from __future__ import annotations

import pytest

from tests.zoo.clip_checkpoint import write_tokenizer_files
from zoo.text.clip_tokenizer import CLIPTokenizer
from zoo.training.errors import UserError

SAMPLE = [
    "a photo of a red square", "A Photo OF a RED Square!", "it's the cat's café!!",
    "  several   spaces\tand\ttabs\n", "numbers 2024 and 3.14", "emoji 🐱🐶 ok 👨‍👩‍👧",
    "Ünïcödé ÀÉÎ straße İstanbul", "日本語のテキスト", "", "rock'n'roll don't I'M",
    "e\u0301 decomposed", "nbsp\u00a0here\u2003em\u3000wide", "ΟΔΟΣ Σίσυφος", "हिन्दी नमस्ते",
    "½ ² ٣ Ⅻ", "a<|endoftext|>b", "ＦＵＬＬＷＩＤＴＨ", "..., ;;; !!!", "x" * 40,
    "a blue ship and a green circle",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_tokenizer_files(tmp_path_factory.mktemp("clip_tokenizer"))


@pytest.fixture(scope="module")
def tokenizer(files):
    return CLIPTokenizer.from_folder(files)  # one: each new one traces keras-hub's graph


@pytest.mark.slow  # keras-hub's BPE graph takes ~10 s to trace on 2 busy cores
def test_ids_equal_the_reference_with_padding_and_truncation(files, tokenizer):
    from transformers import CLIPTokenizer as Reference

    reference = Reference.from_pretrained(str(files))
    for length in (77, 12):
        expected = reference(SAMPLE, padding="max_length", truncation=True, max_length=length)
        token_ids, mask = tokenizer.pack(SAMPLE, sequence_length=length)
        assert token_ids.numpy().tolist() == expected["input_ids"]
        assert mask.numpy().astype(int).tolist() == expected["attention_mask"]
    unpadded = reference(SAMPLE, truncation=True, max_length=77)["input_ids"]
    assert tokenizer.encode(SAMPLE) == unpadded
    assert tokenizer.decode(unpadded[:3]) == [
        "a photo of a red square", "a photo of a red square !", "it 's the cat 's café !!"]


def test_pad_token_from_the_checkpoint_and_save_round_trip(tmp_path):
    folder = write_tokenizer_files(tmp_path / "in", pad_token="!")
    tokenizer = CLIPTokenizer.from_folder(folder, sequence_length=8)
    assert tokenizer.pad_id == tokenizer.vocabulary["!"] != tokenizer.end_id
    (tmp_path / "out").mkdir()
    tokenizer.save(tmp_path / "out")
    again = CLIPTokenizer.from_folder(tmp_path / "out", sequence_length=8)
    assert (again.vocabulary, again.merges, again.pad_token) == (
        tokenizer.vocabulary, tokenizer.merges, "!")


def test_bad_files_and_arguments(tmp_path, tokenizer):
    with pytest.raises(FileNotFoundError, match="merges.txt"):
        (tmp_path / "vocab.json").write_text("{}")
        CLIPTokenizer.from_folder(tmp_path)
    with pytest.raises(UserError, match="special token"):
        CLIPTokenizer({"a": 0}, [])
    with pytest.raises(UserError, match="merge rule 'zz q'"):
        CLIPTokenizer(tokenizer.vocabulary, ["zz q"])
    with pytest.raises(UserError, match="sequence_length"):
        CLIPTokenizer(tokenizer.vocabulary, [], sequence_length=1)
    with pytest.raises(TypeError, match="wrap it"):
        tokenizer.encode("one string")
    with pytest.raises(UserError, match="outside the vocabulary"):
        tokenizer.decode([[10 ** 6]])
