"""Fixtures for the model tests: a small tokenizer trained on real Multi30k text."""

from __future__ import annotations

import gzip

import pytest

from zoo.text.tokenizer import SubwordTokenizer


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


# Runs in a fresh process as TensorFlow Serving runs a model: only TensorFlow and TF Text
# imported (the server links their ops, nothing of ours), XLA compilation switched off before
# anything loads (the server's default: its `--xla_cpu_compilation_enabled` is off), the
# SavedModel loaded into a TF1 session, the warm-up records of `assets.extra` replayed as the
# server replays them at load time, and the signature run by its tensor names.
SERVER_SCRIPT = r"""
import base64, ctypes, json, os, sys
import numpy as np
import tensorflow as tf, tensorflow_text
from tensorflow_serving.apis import prediction_log_pb2

# tensorflow::DisableXlaCompilation(), the call the model server makes at start-up.
ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2")
            )._ZN10tensorflow21DisableXlaCompilationEv()
version, signature_name, inputs, expect_warmup = json.loads(sys.stdin.read())
graph = tf.Graph()
with tf.compat.v1.Session(graph=graph) as session:
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], version)
    signatures = meta_graph.signature_def

    def run(name, feeds):
        signature = signatures[name]
        fetches = {key: value.name for key, value in signature.outputs.items()}
        # An input the request leaves out takes the signature's default, as the server does.
        feeds = {**{key: tf.make_ndarray(value) for key, value in signature.defaults.items()},
                 **feeds}
        return session.run(fetches, {signature.inputs[key].name: value
                                     for key, value in feeds.items()})

    warmup = os.path.join(version, "assets.extra", "tf_serving_warmup_requests")
    replayed = 0
    records = tf.compat.v1.io.tf_record_iterator(warmup) if os.path.exists(warmup) else []
    for record in records:
        request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
        run(request.model_spec.signature_name or "serving_default",
            {key: tf.make_ndarray(value) for key, value in request.inputs.items()})
        replayed += 1
    assert replayed > 0 or not expect_warmup, "no warm-up request replayed"
    feeds = {}
    for key, value in inputs.items():
        if isinstance(value, dict):  # bytes, sent as base64
            value = np.array([base64.b64decode(v) for v in value["base64"]], dtype=object)
        elif isinstance(value, list) and value and isinstance(value[0], str):
            value = np.array([v.encode() for v in value], dtype=object)
        feeds[key] = value
    outputs = run(signature_name, feeds)

def plain(value):
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode())(value).tolist() if value.size else []
    return value.tolist()

ours = sorted(m for m in sys.modules
              if m.split(".")[0] in ("zoo", "keras_hub", "sentencepiece"))
assert not ours, ours
print(json.dumps({key: plain(value) for key, value in outputs.items()}))
"""


def serve(version, inputs: dict, signature: str = "serving_default",
          expect_warmup: bool = True) -> dict:
    """The outputs of `signature` of the SavedModel at `version` for `inputs` (a dict of
    lists: strings, bytes such as encoded images, or numbers, nested for a matrix), computed
    as TensorFlow Serving computes them (`SERVER_SCRIPT`), as lists (strings decoded)."""
    import base64
    import json
    import os
    import subprocess
    import sys

    payload = {key: {"base64": [base64.b64encode(v).decode() for v in values]}
               if isinstance(values, list) and values and isinstance(values[0], bytes)
               else values
               for key, values in inputs.items()}
    result = subprocess.run([sys.executable, "-c", SERVER_SCRIPT],
                            input=json.dumps([str(version), signature, payload,
                                              expect_warmup]),
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_like_a_server(code: str) -> list:
    """Runs `code` in a fresh process that imports only TensorFlow and TF Text, with XLA
    compilation off (as in `SERVER_SCRIPT`), checks that nothing of ours, nor keras-hub or
    SentencePiece's Python package, was needed, and returns the JSON lines `code` printed.
    For what `serve` cannot ask (a request that must fail, several requests in turn)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import ctypes, json, os, sys\nimport tensorflow as tf, tensorflow_text\n"
            "ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), 'libtensorflow_cc.so.2')"
            ")._ZN10tensorflow21DisableXlaCompilationEv()\n" + code
            + "\nours = sorted(m for m in sys.modules if m.split('.')[0] in "
              "('zoo', 'keras_hub', 'sentencepiece'))\n"
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
