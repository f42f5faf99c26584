"""Tests of zoo.text.tokenizer.SubwordTokenizer and zoo.text.marian.MarianTokenizer on real
Multi30k sentences."""

from __future__ import annotations

import gzip
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import sentencepiece

from tests.conftest import modules_imported_by
from tests.zoo.conftest import train_unigram_spm
from zoo.text.tokenizer import SubwordTokenizer

REPO = Path(__file__).resolve().parents[3]


def _lines(path: Path, count: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return [next(file).rstrip("\n") for _ in range(count)]


@pytest.fixture(scope="module")
def training_texts(shared_data) -> list[str]:
    folder = shared_data / "multi30k"
    return _lines(folder / "train.en.gz", 5000) + _lines(folder / "train.de.gz", 5000)


@pytest.fixture(scope="module")
def tokenizer(training_texts) -> SubwordTokenizer:
    return SubwordTokenizer.train(training_texts, vocabulary_size=2000)


@pytest.fixture(scope="module")
def held_out(shared_data) -> list[str]:
    """200 real sentences the tokenizer was not trained on (test set, both languages)."""
    folder = shared_data / "multi30k"
    return _lines(folder / "test_2016_flickr.en.gz", 100) + _lines(
        folder / "test_2016_flickr.de.gz", 100
    )


def test_special_ids_and_pieces(tokenizer):
    assert tokenizer.vocabulary_size == 2000
    assert (tokenizer.pad_id, tokenizer.unknown_id, tokenizer.start_id, tokenizer.end_id) == (
        0,
        1,
        2,
        3,
    )
    # Read the model back with SentencePiece itself, not through our class.
    processor = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.proto)
    assert [processor.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert processor.get_piece_size() == 2000


def test_round_trip_on_real_sentences(tokenizer, held_out, training_texts):
    sentences = held_out + training_texts[:100] + training_texts[-100:]
    decoded = tokenizer.decode(tokenizer.encode(sentences))
    # Reference normalisation from the standard library: NFKC, whitespace runs collapsed.
    expected = [" ".join(unicodedata.normalize("NFKC", s).split()) for s in sentences]
    assert decoded == expected
    assert tokenizer.normalize(sentences) == expected
    # Case is kept; sentences without odd whitespace come back byte for byte.
    plain = [s for s in sentences if s == " ".join(s.split())]
    assert len(plain) > 390
    assert tokenizer.decode(tokenizer.encode(plain)) == plain
    assert any(ch.isupper() for s in decoded for ch in s)


def test_normalisation_of_training_data_whitespace(tokenizer):
    # Real German train lines hold no-break spaces and doubled spaces.
    assert tokenizer.decode(tokenizer.encode(["Ein\u00a0Paar,  das  tanzt. "])) == [
        "Ein Paar, das tanzt."
    ]


def test_training_is_deterministic(training_texts, tokenizer):
    again = SubwordTokenizer.train(training_texts, vocabulary_size=2000)
    assert again.proto == tokenizer.proto
    smaller = SubwordTokenizer.train(training_texts, vocabulary_size=1000)
    assert smaller.proto != tokenizer.proto and smaller.vocabulary_size == 1000


def test_train_rejects_bad_input(training_texts):
    with pytest.raises(ValueError, match="empty"):
        SubwordTokenizer.train([], vocabulary_size=100)
    with pytest.raises(ValueError, match=r"texts\[1\] is a int"):
        SubwordTokenizer.train(["a b", 7, "c"], vocabulary_size=100)
    with pytest.raises(ValueError, match="vocabulary_size=5000"):
        SubwordTokenizer.train(training_texts[:20], vocabulary_size=5000)
    with pytest.raises(TypeError, match="single string"):
        SubwordTokenizer.train("one sentence", vocabulary_size=100)


def test_save_and_load(tokenizer, tmp_path):
    path = tmp_path / "subwords.model"
    tokenizer.save(path)
    loaded = SubwordTokenizer.from_file(path)
    assert loaded.proto == tokenizer.proto
    assert loaded.encode(["A dog."]) == tokenizer.encode(["A dog."])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        tokenizer.save(path)
    tokenizer.save(path, overwrite=True)
    with pytest.raises(FileNotFoundError, match="missing.model"):
        SubwordTokenizer.from_file(tmp_path / "missing.model")
    (tmp_path / "corrupt.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        SubwordTokenizer.from_file(tmp_path / "corrupt.model")


def test_train_writes_output_path(training_texts, tmp_path):
    path = tmp_path / "joint.model"
    trained = SubwordTokenizer.train(training_texts[:2000], vocabulary_size=500, output_path=path)
    assert path.read_bytes() == trained.proto
    with pytest.raises(FileExistsError, match="joint.model"):
        SubwordTokenizer.train(training_texts[:2000], vocabulary_size=500, output_path=path)


def test_encode_start_end_and_empty_text(tokenizer):
    body = tokenizer.encode(["A man sleeps."], add_end=False)[0]
    assert tokenizer.encode(["A man sleeps."]) == [body + [3]]
    assert tokenizer.encode(["A man sleeps."], add_start=True) == [[2] + body + [3]]
    assert tokenizer.encode([""]) == [[3]]
    assert tokenizer.encode([""], add_end=False) == [[]]
    assert tokenizer.encode([]) == []
    assert 1 not in body and all(4 <= i < 2000 for i in body)


def test_encode_truncates_with_a_warning(tokenizer, held_out):
    full = tokenizer.encode(held_out[:3], add_start=True)
    with pytest.warns(UserWarning, match=r"max_length=6 .*longest: \d+"):
        cut = tokenizer.encode(held_out[:3], max_length=6, add_start=True)
    for whole, short in zip(full, cut):
        assert len(short) == 6
        assert short[:5] == whole[:5] and short[-1] == tokenizer.end_id
    with pytest.raises(ValueError, match="max_length must be an int > 2"):
        tokenizer.encode(["a"], max_length=2, add_start=True)


def test_encode_bytes_and_bad_input(tokenizer):
    text = "Zwei Männer."
    assert tokenizer.encode([text.encode("utf-8")]) == tokenizer.encode([text])
    with pytest.raises(ValueError, match=r"text 1 is not valid UTF-8: byte 0xe4 at position 6"):
        tokenizer.encode(["ok", "Zwei M\xe4nner".encode("latin-1")])
    with pytest.raises(TypeError, match="single str"):
        tokenizer.encode("A dog.")
    with pytest.raises(TypeError, match="text 0 is a int"):
        tokenizer.encode([5])


def test_encode_batch_padded(tokenizer, held_out):
    encoded = tokenizer.encode(held_out[:5])
    batch = tokenizer.encode_batch_padded(held_out[:5])
    assert batch.dtype == np.int32
    assert batch.shape == (5, max(len(ids) for ids in encoded))
    for row, ids in zip(batch, encoded):
        assert row[: len(ids)].tolist() == ids and not row[len(ids) :].any()
    fixed = tokenizer.encode_batch_padded(["A dog.", ""], max_length=40)
    assert fixed.shape == (2, 40) and fixed[1].tolist() == [3] + [0] * 39
    assert tokenizer.encode_batch_padded([]).shape == (0, 0)


def test_decode_stops_at_end_and_skips_pad_and_start(tokenizer):
    ids = tokenizer.encode(["A dog runs.", "Two cats."], add_start=True)
    padded = [ids[0] + [0, 0], ids[1] + [7, 8, 9]]  # Ids after the end id are ignored.
    assert tokenizer.decode(padded) == ["A dog runs.", "Two cats."]
    array = tokenizer.encode_batch_padded(["A dog runs.", "Two cats."], add_start=True)
    assert tokenizer.decode(array) == ["A dog runs.", "Two cats."]
    assert tokenizer.decode([[]]) == [""]
    with pytest.raises(ValueError, match="id 2000 in sequence 0 is outside"):
        tokenizer.decode([[5, 2000]])
    with pytest.raises(ValueError, match="flat list"):
        tokenizer.decode([5, 6, 7])
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        tokenizer.decode(np.array([5, 6, 7]))


def test_id_to_piece(tokenizer):
    ids = tokenizer.encode(["A dog."], add_end=False)[0]
    assert "".join(tokenizer.id_to_piece(i) for i in ids).replace("\u2581", " ") == " A dog."
    assert tokenizer.id_to_piece(3) == "</s>"
    with pytest.raises(ValueError, match="id 2000 is outside"):
        tokenizer.id_to_piece(2000)


def test_unknown_characters_map_to_unknown_id(tokenizer):
    ids = tokenizer.encode(["\u2603"], add_end=False)[0]
    assert tokenizer.unknown_id in ids


def test_keras_hub_tokenizer_agrees_with_python_path(tokenizer, held_out):
    import tensorflow as tf

    graph_tokenizer = tokenizer.to_keras_hub()

    @tf.function  # In a graph, as inside an exported SavedModel.
    def round_trip(texts):
        ids = graph_tokenizer.tokenize(texts)
        return ids, graph_tokenizer.detokenize(ids)

    graph_ids, graph_texts = round_trip(tf.constant(held_out))
    assert graph_ids.to_list() == tokenizer.encode(held_out, add_end=False)
    decoded = [text.decode("utf-8") for text in graph_texts.numpy().tolist()]
    assert decoded == tokenizer.decode(tokenizer.encode(held_out))
    assert sum(a == b for a, b in zip(decoded, held_out)) >= 195
    # Padded batches with the end id, as a model emits them, detokenize to the same texts.
    padded = tokenizer.encode_batch_padded(held_out[:20])
    detokenized = tf.function(graph_tokenizer.detokenize)(tf.constant(padded)).numpy().tolist()
    assert [text.decode("utf-8") for text in detokenized] == tokenizer.decode(padded)


def test_import_needs_no_tensorflow():
    for module in ("zoo.text.tokenizer", "zoo.text.marian"):
        assert not modules_imported_by(f"import {module}") & {"tensorflow", "keras_hub"}


# ---------------------------------------------------------------------- MarianTokenizer
@pytest.fixture(scope="module")
def marian_folder(training_texts, tmp_path_factory) -> Path:
    """OPUS-MT's layout: source.spm (English), target.spm (German), vocab.json with `</s>` 0,
    `<unk>` 1, the pieces of both models (a few left out) and `<pad>` last; and a language
    code piece, as multilingual OPUS-MT models have."""
    import json

    folder = tmp_path_factory.mktemp("marian")
    vocab = {"</s>": 0, "<unk>": 1, ">>de<<": 2}
    for name, texts in (("source.spm", training_texts[:5000]),
                        ("target.spm", training_texts[5000:])):
        proto = train_unigram_spm(texts, 300)
        (folder / name).write_bytes(proto)
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
                  if not (processor.is_control(i) or processor.is_unknown(i))]
        for piece in pieces[:30] + pieces[33:]:
            vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    return folder


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_marian_tokenizer_equals_transformers(marian_folder, held_out):
    pytest.importorskip("transformers")
    from transformers import MarianTokenizer as Reference

    from zoo.text.marian import MarianTokenizer

    ours = MarianTokenizer.from_folder(marian_folder)
    reference = Reference.from_pretrained(str(marian_folder))
    texts = held_out + [">>de<< A dog runs.", "", "  two  spaces ", "東京 café ½"]
    expected = reference(texts)["input_ids"]
    assert ours.encode(texts) == expected
    # Targets (what fine-tuning teaches the decoder to write) are cut by target.spm.
    targets = reference(text_target=held_out)["input_ids"]
    assert ours.encode(held_out, target=True) == targets
    assert ours.encode(held_out) != targets  # the two models cut differently
    assert any(ours.unknown_id in ids for ids in expected)
    assert (ours.end_id, ours.unknown_id, ours.pad_id, ours.start_id) == (
        0, 1, ours.vocabulary_size - 1, ours.vocabulary_size - 1)
    # Any ids, the special ones included, decode as transformers' skip_special_tokens=True
    # (up to the first end id, which a model's output stops at).
    rng = np.random.default_rng(0)
    ids = rng.integers(0, ours.vocabulary_size, (50, 12)).tolist()
    assert ours.decode(ids) == [
        reference.decode(row[:row.index(0)] if 0 in row else row, skip_special_tokens=True)
        for row in ids]
    assert ours.decode(ours.encode_batch_padded(held_out[:5])) == reference.batch_decode(
        reference(held_out[:5])["input_ids"], skip_special_tokens=True)


def test_marian_tokenizer_saves_in_one_file(marian_folder, held_out, tmp_path):
    from zoo.text.loading import load_tokenizer
    from zoo.text.marian import MarianTokenizer

    tokenizer = MarianTokenizer.from_folder(marian_folder)
    path = tmp_path / "tokenizer.model"
    tokenizer.save(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        tokenizer.save(path)
    # load_tokenizer reads either kind (a translator's stored tokenizer); SubwordTokenizer's
    # own from_file refuses the archive in one line.
    with pytest.raises(ValueError, match="holds a Marian tokenizer.*load_tokenizer"):
        SubwordTokenizer.from_file(path)
    for loaded in (MarianTokenizer.from_file(path), load_tokenizer(path)):
        assert isinstance(loaded, MarianTokenizer)
        assert loaded.encode(held_out) == tokenizer.encode(held_out)
        assert loaded.vocabulary == tokenizer.vocabulary
    assert tokenizer.id_to_piece(0) == "</s>"


def test_marian_graph_tokenizer_agrees_with_python_path(marian_folder, held_out):
    import tensorflow as tf

    from zoo.text.marian import MarianTokenizer

    tokenizer = MarianTokenizer.from_folder(marian_folder)
    graph_tokenizer = tokenizer.to_keras_hub()
    texts = held_out + [">>de<< A dog runs.", "", "  two  spaces ", "東京 café ½", ">>x"]
    rng = np.random.default_rng(1)
    ids = rng.integers(0, tokenizer.vocabulary_size, (60, 12)).astype("int32")
    ids[:5, 6:] = tokenizer.pad_id  # padded model output

    @tf.function  # In a graph, as inside an exported SavedModel.
    def run(texts, ids):
        return graph_tokenizer.tokenize(texts), graph_tokenizer.detokenize(ids)

    graph_ids, graph_texts = run(tf.constant(texts), tf.constant(ids))
    assert graph_ids.to_list() == tokenizer.encode(texts, add_end=False)
    assert [t.decode("utf-8") for t in graph_texts.numpy()] == tokenizer.decode(ids)


def test_marian_tokenizer_truncates_and_refuses_bad_input(marian_folder, tmp_path):
    import json
    import shutil

    from zoo.text.marian import MarianTokenizer

    tokenizer = MarianTokenizer.from_folder(marian_folder)
    with pytest.warns(UserWarning, match="truncated to 5"):
        ids = tokenizer.encode(["A man in a blue shirt is standing on a ladder."],
                               max_length=5)[0]
    assert len(ids) == 5 and ids[-1] == tokenizer.end_id
    assert tokenizer.encode(["A dog."], add_start=True)[0][0] == tokenizer.pad_id
    with pytest.raises(ValueError, match="id 5000 in sequence 0 is outside"):
        tokenizer.decode([[5000]])
    with pytest.raises(ValueError, match="flat list"):
        tokenizer.decode([3, 4])
    with pytest.raises(TypeError, match="single str"):
        tokenizer.encode("A dog.")

    source, target = ((marian_folder / n).read_bytes() for n in ("source.spm", "target.spm"))
    with pytest.raises(ValueError, match="vocabulary id 5 of piece 'b' is not in"):
        MarianTokenizer(source, target, {"</s>": 0, "<unk>": 1, "<pad>": 2, "b": 5})
    with pytest.raises(ValueError, match="id 1 is given to both '<unk>' and 'b'"):
        MarianTokenizer(source, target, {"</s>": 0, "<unk>": 1, "b": 1})
    with pytest.raises(ValueError, match="pad_piece '<pad>' is not in the vocabulary"):
        MarianTokenizer(source, target, {"</s>": 0, "<unk>": 1})
    with pytest.raises(ValueError, match="source_proto .* not a valid SentencePiece"):
        MarianTokenizer(b"nonsense", target, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    copy = tmp_path / "copy"
    shutil.copytree(marian_folder, copy)
    (copy / "target.spm").unlink()
    with pytest.raises(FileNotFoundError, match="needs target.spm"):
        MarianTokenizer.from_folder(copy)
    shutil.copy(marian_folder / "target.spm", copy)
    (copy / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": True}))
    with pytest.raises(ValueError, match="separate source and target vocabularies"):
        MarianTokenizer.from_folder(copy)
