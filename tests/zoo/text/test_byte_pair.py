"""GPT-2's byte-level BPE (`zoo.text.byte_pair`) against Hugging Face's `GPT2Tokenizer` built
from the same files: the same ids on a varied sample, in Python and inside a `tf.function`;
decoding exact to the byte, streaming included; bad input refused in one line."""

from __future__ import annotations

import pytest

from tests.zoo.text._byte_pair_files import SAMPLE, write_tiny_bpe
from zoo.text.byte_pair import BytePairTokenizer
from zoo.training.errors import UserError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_tiny_bpe(tmp_path_factory.mktemp("bpe"))


def test_ids_equal_hugging_faces_in_python_and_in_a_graph(files):
    import tensorflow as tf

    reference = transformers.GPT2Tokenizer(str(files / "vocab.json"), str(files / "merges.txt"))
    tokenizer = BytePairTokenizer.from_folder(files)
    expected = [reference.encode(text) for text in SAMPLE]
    assert tokenizer.encode(SAMPLE) == expected
    # TF Text's regex ops end a string at a NUL byte (documented in zoo.text.byte_pair).
    graph_sample = [text for text in SAMPLE if "\x00" not in text]
    graph = tf.function(lambda texts: tokenizer.layer(texts).to_tensor(-1))
    padded = graph(tf.constant(graph_sample)).numpy().tolist()
    assert [[i for i in row if i != -1] for row in padded] == [
        reference.encode(text) for text in graph_sample]
    assert tokenizer.end_id == reference.eos_token_id == tokenizer.vocabulary_size - 1


def test_decode_and_stream_are_exact(files):
    tokenizer = BytePairTokenizer.from_folder(files)
    ids = tokenizer.encode(SAMPLE)
    assert tokenizer.decode(ids, skip_end=False) == SAMPLE
    reference = transformers.GPT2Tokenizer(str(files / "vocab.json"), str(files / "merges.txt"))
    assert tokenizer.decode(ids[:4], skip_end=False) == [reference.decode(i) for i in ids[:4]]
    decoder = tokenizer.stream_decoder()
    pieces = [decoder.add(i) for i in ids[1]] + [decoder.finish()]
    assert "".join(pieces) == SAMPLE[1]
    assert "\ufffd" not in "".join(pieces)  # an emoji's bytes come out only once complete


def test_save_and_bad_input(files, tmp_path):
    tokenizer = BytePairTokenizer.from_folder(files)
    tokenizer.save(tmp_path)
    assert BytePairTokenizer.from_folder(tmp_path).encode(SAMPLE) == tokenizer.encode(SAMPLE)
    with pytest.raises(TypeError, match="single str"):
        tokenizer.encode("one string")
    with pytest.raises(UserError, match="outside the vocabulary"):
        tokenizer.decode([[tokenizer.vocabulary_size]])
    with pytest.raises(FileNotFoundError, match="vocab.json; there is none"):
        BytePairTokenizer.from_folder(tmp_path / "nothing")
    with pytest.raises(UserError, match="merge rule"):
        BytePairTokenizer(tokenizer.vocabulary, ["no such-pieces"])
