"""An exported SentenceEncoder: WordPiece in the graph, embeddings as `embed` gives them.

The graph tokenizer (`SentenceTokenizer.tokenize_in_graph`, TF Text ops) must give the ids of
the Python tokenizer (keras-hub's Python WordPiece path) on real sentences and on edge cases;
the SavedModel is run in a fresh process that imports only TensorFlow and TF Text.
"""

from __future__ import annotations

import os
import unicodedata

import keras
import numpy as np
import pytest

from tests.zoo.conftest import read_gz, serve
from tests.zoo.serving.conftest import check_request_table
from tests.zoo.serving.test_export import _saved_values
from zoo.serving.export import export_model
from zoo.serving.text_endpoints import MAX_SENTENCES, cut_utf8, sentence_byte_cap
from zoo.models.sentence_encoder.model import SentenceEncoder

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may try the network

MODEL_CARD_PAIR = ["A man is eating food.", "A man is eating a piece of bread."]
EDGE_CASES = [
    "", "   ", "word " * 400,  # empty, blank, longer than max_length (truncated)
    "Héllo, WORLD!! A naïve café in 東京 — résumé attached.",
    "Ǆemal İstanbul ß Straße ﬁne Ⅻ ÅNGSTRÖM Ωμέγα Привет",
    "١٢٣ ＡＢＣ かなカナ한국어 ½ ① ㎏",
    "x" * 150 + " Unaffable tokenizers; it's 3.14 o'clock, isn't it?",  # a word > 100 bytes
    "tab\tnew\nline\u00a0nbsp\u200bzero-width\u00adsoft hyphen",
    "\x00nul\x07bell \ufffd replacement 😀👍🏽 emoji z̷̢a̸l̵g̶o",
    "[CLS] [SEP] [UNK] ##ing",  # special-token text is text
    "Balinese \u1b4e, Lao \u0ece, legacy \U0001ccd6: newer Unicode than Python's tables",
]


def graph_batch(tokenizer, texts: list[str]) -> dict:
    import tensorflow as tf

    function = tf.function(tokenizer.tokenize_in_graph,
                           input_signature=[tf.TensorSpec([None], tf.string)])
    return {k: v.numpy() for k, v in function(tf.constant(texts)).items()}


def assert_same_batches(tokenizer, texts: list[str]) -> None:
    ours = graph_batch(tokenizer, texts)
    python = tokenizer(texts)
    assert ours["token_ids"].dtype == python["token_ids"].dtype == np.int32
    for i, text in enumerate(texts):
        assert ours["token_ids"][i].tolist() == python["token_ids"][i].tolist(), repr(text)
    np.testing.assert_array_equal(ours["padding_mask"], python["padding_mask"])


@pytest.fixture(scope="module")
def minilm() -> SentenceEncoder:
    from zoo.converters.minilm import load_minilm

    try:
        return load_minilm()
    except (ModuleNotFoundError, FileNotFoundError) as error:
        pytest.skip(f"all-MiniLM-L6-v2 weights are not installed: {error}")


@pytest.fixture(scope="module")
def real_sentences(shared_data) -> list[str]:
    return read_gz(shared_data / "multi30k" / "val.en.gz", 200)


# ---------------------------------------------------------------- tokenizer
def test_graph_ids_equal_python_ids_on_edge_cases(minilm):
    tokenizer = minilm.tokenizer
    assert_same_batches(tokenizer, EDGE_CASES)
    long = graph_batch(tokenizer, ["word " * 400])["token_ids"][0].tolist()
    assert len(long) == tokenizer.max_length == 256
    assert long[0] == tokenizer.cls_id and long[-1] == tokenizer.sep_id
    empty = graph_batch(tokenizer, [""])
    assert empty["token_ids"].tolist() == [[tokenizer.cls_id, tokenizer.sep_id]]


def test_graph_ids_equal_python_ids_on_real_sentences(minilm, real_sentences):
    assert len(real_sentences) == 200
    assert_same_batches(minilm.tokenizer, real_sentences)
    assert_same_batches(minilm.tokenizer, real_sentences[:7] + EDGE_CASES[:3])


# BERT's "Chinese character" blocks (its tokenizer's `_is_chinese_char`): words of their own.
BERT_CJK_BLOCKS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                   (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def code_points_of_every_kind(vocabulary: list[str], stride: int = 16) -> list[int]:
    """The first and last code point of every run of alike code points, and one in `stride`
    inside each run (76,087 of the 1,112,064: 10 s where all took 85 s).

    Alike: the same Python category (unicodedata), punctuation and control classes (the
    `regex` module), BERT CJK block, change under Python's lower(), NFD and NFKC, change under
    ICU's case folding and NFD (TF Text: the graph's own tables, so an unassigned code point
    ICU knows is a run of its own), and presence of its lower case in the vocabulary. Where
    the graph could part from Python (a table of one side newer than the other's), those
    traits change, so every such code point starts or ends a run.
    """
    import regex
    import tensorflow as tf
    import tensorflow_text as tf_text

    code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    characters = [chr(c) for c in code_points]
    everything = "".join(characters)
    punctuation = {m.start() for m in regex.finditer(r"\p{P}", everything)}
    control = {m.start() for m in regex.finditer(r"\p{Cc}|\p{Cf}", everything)}
    utf8 = tf.constant([c.encode() for c in characters])
    icu_folds = tf.not_equal(tf_text.case_fold_utf8(utf8), utf8).numpy()
    icu_decomposes = tf.not_equal(tf_text.normalize_utf8(utf8, "NFD"), utf8).numpy()
    known = set(vocabulary)

    def kind(i: int) -> tuple:
        c, character = code_points[i], characters[i]
        return (unicodedata.category(character), i in punctuation, i in control,
                any(low <= c <= high for low, high in BERT_CJK_BLOCKS),
                character.lower() != character,
                unicodedata.normalize("NFD", character) != character,
                unicodedata.normalize("NFKC", character) != character,
                bool(icu_folds[i]), bool(icu_decomposes[i]), character.lower() in known)

    kinds = [kind(i) for i in range(len(code_points))]
    chosen, start = [], 0
    for end in range(1, len(kinds) + 1):
        if end == len(kinds) or kinds[end] != kinds[start]:
            chosen += sorted({*range(start, end, stride), end - 1})
            start = end
    return [code_points[i] for i in chosen]


@pytest.mark.slow
def test_graph_ids_equal_python_ids_for_every_kind_of_code_point(minilm):
    # Each character alone and inside a word: punctuation splits, accents go, case folds,
    # unknown characters make [UNK], exactly as in Python (whose Unicode tables are older
    # than RE2's and ICU's). Every code point took 85 s on 2 cores; the code points where
    # either side's tables change kind (and a sample between) are checked instead.
    tokenizer = minilm.tokenizer
    code_points = code_points_of_every_kind(tokenizer.vocabulary)
    # Every category Python knows (surrogates aside: no text holds one), and both ends.
    assert {unicodedata.category(chr(c)) for c in code_points} == {
        unicodedata.category(chr(c)) for c in range(0x110000)} - {"Cs"}
    assert code_points[0] == 0 and code_points[-1] == 0x10FFFF
    texts = [f"Ab{chr(c)}cD {chr(c)}" for c in code_points]
    ours = graph_batch(tokenizer, texts)
    ids = [row[mask.astype(bool)].tolist()
           for row, mask in zip(ours["token_ids"], ours["padding_mask"])]
    wrong = [(hex(ord(t[2])), a, b)
             for t, a, b in zip(texts, ids, tokenizer.tokenize(texts)) if a != b]
    assert not wrong, wrong[:5]


def test_the_cased_tokenizer_also_matches():
    from zoo.text.wordpiece import SentenceTokenizer

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "Hello", "hello", "Ca", "##fé", ",",
                  "!", "é", "東"]
    tokenizer = SentenceTokenizer(vocabulary, max_length=6, lowercase=False)
    assert_same_batches(tokenizer, ["Hello, Café!", "hello 東京 é", "", "Hello " * 9])


# ---------------------------------------------------------------- a small model
@pytest.fixture(scope="module")
def small_encoder() -> SentenceEncoder:
    keras.utils.set_random_seed(5)
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "man", "is", "eating", "food",
                  ".", "bread", "piece", "of", "##s", "dog"]
    return SentenceEncoder(vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
                           hidden_dim=16, intermediate_dim=32, max_positions=32,
                           max_length=12, vocabulary=vocabulary)


@pytest.fixture(scope="module")
def exported_small(small_encoder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("encoder")
    small_encoder.save(folder / "encoder.keras")
    repository = tmp_path_factory.mktemp("repository")
    version = export_model(str(folder / "encoder.keras"), repository, version=2)
    return repository, version


def test_small_encoder_served_equals_embed_and_embed_ids(small_encoder, exported_small):
    repository, version = exported_small
    assert version == repository / "encoder" / "2" and (version / "saved_model.pb").exists()
    assert 'name: "encoder"' in (repository / "models.config").read_text()
    texts = MODEL_CARD_PAIR + ["dogs", "", "a man " * 20, "Ünknown wörds!"]
    batch = small_encoder.tokenizer(texts)
    served = serve(version, {"sentences": texts})["embeddings"]  # warm-up replayed there
    by_ids = serve(version, {"token_ids": batch["token_ids"].tolist(),
                             "padding_mask": batch["padding_mask"].tolist()},
                   "embed_ids")["embeddings"]
    expected = small_encoder.embed(texts)
    np.testing.assert_allclose(np.array(served), expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.array(by_ids), expected, rtol=0, atol=1e-5)
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    (record,) = list(tf.data.TFRecordDataset(
        str(version / "assets.extra" / "tf_serving_warmup_requests")))
    request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
    assert request.model_spec.name == "encoder"
    assert request.model_spec.signature_name == "serving_default"


# (case, signature, inputs as NumPy expressions, the answer's shapes or the refusal's message)
# for the small encoder: 16 dims, 32 position embeddings.
CAP = MAX_SENTENCES
REQUESTS = [
    ("empty request", "serving_default", {"sentences": "np.array([], dtype=object)"},
     {"embeddings": [0, 16]}),
    ("empty ids", "embed_ids", {"token_ids": "np.zeros([0, 4], np.int32)",
                                "padding_mask": "np.zeros([0, 4], np.int32)"},
     {"embeddings": [0, 16]}),
    ("at the sentence cap", "serving_default",
     {"sentences": f"np.array([b'a man is eating'] * {CAP}, dtype=object)"},
     {"embeddings": [CAP, 16]}),
    ("over the sentence cap", "serving_default",
     {"sentences": f"np.array([b'a man is eating'] * {CAP + 1}, dtype=object)"},
     f"[a request of] [{CAP + 1}] [sentences is more than the limit of] [{CAP}]"),
    ("ids at the sentence cap", "embed_ids",
     {"token_ids": f"np.full([{CAP}, 4], 5, np.int32)",
      "padding_mask": f"np.ones([{CAP}, 4], np.int32)"}, {"embeddings": [CAP, 16]}),
    ("ids over the sentence cap", "embed_ids",
     {"token_ids": f"np.full([{CAP + 1}, 4], 5, np.int32)",
      "padding_mask": f"np.ones([{CAP + 1}, 4], np.int32)"},
     f"[a request of] [{CAP + 1}] [sentences is more than the limit of] [{CAP}]"),
    ("ids wider than the position embeddings", "embed_ids",
     {"token_ids": "np.full([2, 33], 5, np.int32)", "padding_mask": "np.ones([2, 33], np.int32)"},
     "[token_ids has rows of] [33] [tokens, more than the limit of] [32]"),
    ("a 100 MB sentence", "serving_default",
     {"sentences": "np.array([b'a man ' * 20_000_000, b'dog'], dtype=object)"},
     {"embeddings": [2, 16]}),
]


def test_requests_within_the_caps_are_answered_and_others_refused_naming_the_cap(
        exported_small):
    """As the model server runs them: an empty request is answered with no rows, a request
    at a cap in full (a 100 MB sentence is cut before it is tokenized), and one past a cap
    is refused (InvalidArgument) naming the cap, before any work."""
    _, version = exported_small
    check_request_table(version, REQUESTS)


def test_a_long_sentence_is_cut_before_tokenizing_and_embeds_as_its_kept_bytes(
        small_encoder, exported_small):
    """The served encoder reads a sentence's first `sentence_byte_cap` bytes, cut at the
    start of the character the cap falls in: a sentence longer than the cap embeds as
    `embed` embeds its head (the words after it would be tokens past `max_length` anyway
    in ordinary text); here the cut falls inside the two-byte "é" that ends the head."""
    cap = sentence_byte_cap(small_encoder.tokenizer.max_length)
    spaces = " " * (cap - len("a man ") - 1)
    long = "a man" + spaces + " é dog dog dog"  # the "é" starts at byte cap - 1
    assert len(("a man" + spaces + " ").encode()) == cap - 1
    _, version = exported_small
    served = serve(version, {"sentences": [long, "a man"]})["embeddings"]
    expected = small_encoder.embed(["a man", "a man"])
    np.testing.assert_allclose(np.array(served), expected, rtol=0, atol=1e-5)
    # The test can tell: the same words read whole embed differently.
    assert np.max(np.abs(small_encoder.embed(["a man é dog dog dog"])[0] - expected[0])) > 1e-3


@pytest.mark.parametrize("text", ["abc", "é" * 10, "a" + "€" * 5, "😀" * 4, "ab😀", "abcd😀",
                                  ""])
@pytest.mark.parametrize("cap", [4, 5, 6, 7, 9])
def test_cut_utf8_keeps_the_longest_whole_characters_within_the_cap(text, cap):
    import tensorflow as tf

    (cut,) = cut_utf8(tf.constant([text.encode()]), cap).numpy()
    expected = text.encode()[:cap].decode("utf-8", errors="ignore").encode()
    assert cut == expected, (text, cap, cut)


def test_small_export_stores_each_weight_once(small_encoder, exported_small):
    _, version = exported_small
    weights = sum(int(np.prod(w.shape)) for w in small_encoder.weights)
    assert weights <= _saved_values(version) <= 1.2 * weights


def test_an_encoder_without_vocabulary_is_a_one_line_error(tmp_path):
    model = SentenceEncoder(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=4,
                            intermediate_dim=8, max_positions=8)
    model.save(tmp_path / "bare.keras")
    with pytest.raises(ValueError, match="no vocabulary") as error:
        export_model(str(tmp_path / "bare.keras"), tmp_path / "repository")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "repository" / "bare" / "1").exists()


# ---------------------------------------------------------------- the real MiniLM
@pytest.fixture(scope="module")
def exported_minilm(minilm, tmp_path_factory):
    folder = tmp_path_factory.mktemp("minilm")
    minilm.save(folder / "all-minilm-l6-v2.keras")
    repository = tmp_path_factory.mktemp("repository")
    return export_model(str(folder / "all-minilm-l6-v2.keras"), repository)


@pytest.mark.slow
def test_served_minilm_equals_embed(minilm, exported_minilm, real_sentences):
    texts = MODEL_CARD_PAIR + real_sentences[:60] + EDGE_CASES
    served = serve(exported_minilm, {"sentences": texts})["embeddings"]
    served = np.array(served, dtype="float32")
    expected = minilm.embed(texts)
    assert served.shape == expected.shape == (len(texts), 384)
    difference = float(np.max(np.abs(served - expected)))
    cosine = float(served[0] @ served[1])
    print(f"max |served - embed| = {difference:.3g}; cosine of the model-card pair = "
          f"{cosine:.6f}")
    assert difference <= 1e-5
    assert round(cosine, 4) == 0.7553


@pytest.mark.slow
def test_minilm_export_stores_each_weight_once(minilm, exported_minilm):
    weights = sum(int(np.prod(w.shape)) for w in minilm.weights)
    saved = _saved_values(exported_minilm)
    size = sum(p.stat().st_size for p in exported_minilm.rglob("*") if p.is_file())
    print(f"weights {weights}, saved values {saved}, SavedModel {size / 1e6:.1f} MB")
    assert weights <= saved <= 1.2 * weights
