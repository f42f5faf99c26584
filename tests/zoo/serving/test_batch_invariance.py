"""A served input's answer does not depend on what else shares its request (issue 52).

Every export is run as the model server runs it (a fresh process with only TensorFlow and
TF Text, XLA compilation off, a TF1 session, signatures by tensor name): each input alone,
then every input again inside requests of 2, 7 and 32 inputs whose neighbours are drawn
anew for each size. Strings must be equal, and probabilities and embeddings equal to 1e-5,
translation scores (sums of log-probabilities, tens) to 1e-5 of their size: float32
products blocked differently for another batch may change low bits.

The translator's sentences are 40 real Multi30k sentences and the first words of some,
of every width the model reads: alone, each has the output budget of its own length (22 or 24
tokens), which it keeps beside a longer neighbour, and this untrained model never ends early,
so every translation runs to its budget. 40 sentences of the tiny test translators take
seconds a signature; the ViT and the sentence encoder take 40 inputs each. (40 inputs fill
the largest request of 32 and leave neighbours to draw; every padded width is among them.)
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from tests.zoo.conftest import read_gz, run_like_a_server
from tests.zoo.serving.conftest import tiny_translator, tiny_vit
from zoo.models.quantization import quantize_model
from zoo.serving.export import export_model

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")

COUNT = 40
# Request sizes, each with the seed that draws its neighbours.
REQUEST_SIZES = ((2, 11), (7, 12), (32, 13))
TOLERANCE = 1e-5

# Runs in the server-like process: every input alone, then inside requests of each size,
# the answers printed as one JSON line {"alone": [...], "2": [...], ...}, one answer a row.
SERVER_LOOP = r"""
import base64
import numpy as np
spec = json.load(open(SPEC))
session = tf.compat.v1.Session(graph=tf.Graph())
signature = tf.compat.v1.saved_model.loader.load(
    session, ["serve"], spec["version"]).signature_def[spec["signature"]]
fetches = {key: value.name for key, value in signature.outputs.items()}

def column(values):
    if isinstance(values, dict):
        return np.array([base64.b64decode(v) for v in values["base64"]], dtype=object)
    if isinstance(values[0], str):
        return np.array([v.encode() for v in values], dtype=object)
    return np.array(values)

def plain(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value] if value.dtype == object else value.tolist()
    return value.item()

feeds = {signature.inputs[key].name: column(v) for key, v in spec["inputs"].items()}
count = len(next(iter(feeds.values())))

def answers(rows):
    out = session.run(fetches, {name: value[rows] for name, value in feeds.items()})
    return [{key: plain(value[i]) for key, value in out.items()} for i in range(len(rows))]

result = {"alone": [answers([row])[0] for row in range(count)]}
for size, seed in spec["sizes"]:
    order = [int(r) for r in np.random.default_rng(seed).permutation(count)]
    found = [None] * count
    for start in range(0, count, size):
        own = order[start:start + size]
        rows = own + [r for r in order if r not in own][:size - len(own)]  # a full request
        for row, answer in zip(own, answers(rows)):
            found[row] = answer
    result[str(size)] = found
print(json.dumps(result))
"""


def served_answers(version, inputs: dict, tmp_path, signature: str = "serving_default"
                   ) -> dict:
    """`{"alone": answers, "2": answers, ...}` of the export at `version`, one answer (a
    dict of its outputs) per input, computed as the model server computes them."""
    import base64

    spec = tmp_path / f"spec-{version.parent.name}-{signature}.json"
    spec.write_text(json.dumps({
        "version": str(version), "signature": signature,
        "sizes": [list(size) for size in REQUEST_SIZES],
        "inputs": {key: {"base64": [base64.b64encode(v).decode() for v in values]}
                   if isinstance(values[0], bytes) else values
                   for key, values in inputs.items()}}))
    (result,) = run_like_a_server(f"SPEC = {str(spec)!r}\n" + SERVER_LOOP)
    return result


def request_dependent(result: dict) -> list[str]:
    """Every answer that differs from the same input's answer alone: strings unequal, or
    numbers off by more than `TOLERANCE`."""
    alone = result["alone"]
    found = []
    for size, answers in result.items():
        for row, (single, batched) in enumerate(zip(alone, answers)):
            for key, value in single.items():
                if _differ(value, batched[key]):
                    found.append(f"input {row} in a request of {size}: {key} "
                                 f"{batched[key]!r} against {value!r} alone")
    return found


def _differ(single, batched) -> bool:
    flat_single, flat_batched = np.ravel(single), np.ravel(batched)
    if flat_single.shape != flat_batched.shape:
        return True
    if flat_single.dtype.kind in "USO":
        return flat_single.tolist() != flat_batched.tolist()
    # Relative beyond 1: a translation's score sums some 20 log-probabilities (tens), where
    # one float32 step is several 1e-6.
    bound = TOLERANCE * np.maximum(1.0, np.abs(flat_single))
    return bool(np.any(np.abs(flat_single - flat_batched) > bound))


def test_request_dependent_finds_a_changed_string_and_a_far_number():
    result = {"alone": [{"t": "a b", "p": [0.5, 0.25]}, {"t": "c", "p": [1.0, -40.0]}],
              "2": [{"t": "a b", "p": [0.5, 0.25 + TOLERANCE / 2]},
                    {"t": "c d", "p": [1.0, -40.0]}],
              "7": [{"t": "a b", "p": [0.5, 0.25 + 3 * TOLERANCE]},
                    {"t": "c", "p": [1.0, -40.0 + 20 * TOLERANCE]}],
              "32": [{"t": "a b", "p": [0.5, 0.25]},
                     {"t": "c", "p": [1.0, -40.0 + 60 * TOLERANCE]}]}
    assert [line.split(":")[0] for line in request_dependent(result)] == [
        "input 1 in a request of 2", "input 0 in a request of 7",
        "input 1 in a request of 32"]


# ---------------------------------------------------------------- translators
@pytest.fixture(scope="module")
def sentences(shared_data, small_tokenizer) -> list[str]:
    """40 real sentences of every padded width the translators read (8 to 32 tokens and
    longer, which are cut to 32): the first words of 12 sentences, then 28 whole ones."""
    lines = read_gz(shared_data / "multi30k" / "val.en.gz")
    starts = [" ".join(line.split()[:2 + i % 3]) for i, line in enumerate(lines[:12])]
    chosen = starts + lines[12:12 + COUNT - len(starts)]
    widths = {-(-len(ids) // 8) * 8 for ids in small_tokenizer.encode(chosen)}
    assert {8, 16, 24, 32} <= widths
    return chosen


@pytest.fixture(scope="module")
def translator_exports(exported_translator, small_tokenizer, tmp_path_factory) -> dict:
    """The shared float32 export (beam 3), and greedy and int8 exports of a model of the
    same shape: `{(precision, beam): (model, version)}`. Their output budgets are 22 tokens
    for a source padded to 8 and 24 (`max_target_length`) for longer ones."""
    model, _, float_beam = exported_translator
    repository = tmp_path_factory.mktemp("invariance")
    exports = {("float32", 3): (model, float_beam),
               ("float32", 1): (model, export_model(model, repository, beam_size=1,
                                                    name="mt-float-greedy"))}
    int8 = tiny_translator(small_tokenizer, seed=3)
    quantize_model(int8)
    for beam in (3, 1):
        exports["int8", beam] = (int8, export_model(int8, repository, beam_size=beam,
                                                    name=f"mt-int8-beam{beam}"))
    return exports


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "int8"])
@pytest.mark.parametrize("beam", [1, 3])
def test_served_translation_does_not_depend_on_the_request(
        translator_exports, sentences, precision, beam, tmp_path):
    model, version = translator_exports[precision, beam]
    result = served_answers(version, {"sentences": sentences}, tmp_path)
    assert request_dependent(result) == []
    # The Python model's translations are the served ones (its searches run under XLA, and
    # batch sentences of like lengths).
    python = model.translate(sentences, beam_size=beam)
    served = [answer["translations"] for answer in result["alone"]]
    assert [i for i, (a, b) in enumerate(zip(python, served)) if a != b] == []
    # The requests mixed sentences of two budgets.
    budgets = np.asarray(model.source_budgets(model.encode_texts(sentences)))
    assert set(budgets.tolist()) == {22, 24}


# ---------------------------------------------------------------- ViT, sentence encoder
def _png_images(count: int, size: int) -> list[bytes]:
    import tensorflow as tf

    pixels = np.random.default_rng(0).integers(0, 256, (count, size, size, 3), "uint8")
    return [tf.io.encode_png(p).numpy() for p in pixels]


@pytest.fixture(scope="module")
def int8_vit_version(tmp_path_factory):
    model = tiny_vit(seed=6)
    quantize_model(model)
    return export_model(model, tmp_path_factory.mktemp("vit_int8"), top_k=3,
                        name="vit-int8")


@pytest.mark.slow
def test_served_vit_labels_do_not_depend_on_the_request(exported_vit, int8_vit_version,
                                                        tmp_path):
    images = {"images": _png_images(COUNT, 32)}
    for version in (exported_vit[1], int8_vit_version):
        result = served_answers(version, images, tmp_path)
        assert set(result["alone"][0]) >= {"labels", "probabilities"}
        assert request_dependent(result) == [], version


@pytest.mark.slow
def test_served_sentence_embeddings_do_not_depend_on_the_request(tmp_path_factory,
                                                                  tmp_path):
    """Sentences of 1 to 11 words, so that neighbours change the padded width."""
    from zoo.models.sentence_encoder.model import SentenceEncoder

    keras.utils.set_random_seed(5)
    words = ["a", "man", "is", "eating", "food", ".", "bread", "piece", "of", "dogs"]
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words[:-1], "dog", "##s"]
    model = SentenceEncoder(vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
                            hidden_dim=16, intermediate_dim=32, max_positions=32,
                            max_length=16, vocabulary=vocabulary)
    version = export_model(model, tmp_path_factory.mktemp("encoder"), name="encoder")
    rng = np.random.default_rng(1)
    sentences = [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(COUNT)]
    result = served_answers(version, {"sentences": sentences}, tmp_path)
    assert np.shape(result["alone"][0]["embeddings"]) == (16,)
    assert request_dependent(result) == []
