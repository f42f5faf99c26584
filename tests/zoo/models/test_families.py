"""Each model family as the house's design has it (zoo.models.task): a task holds a backbone
(a `Backbone`, the one network of the family that other families reuse) and a preprocessor
(a `Preprocessor`); each part saves and loads on its own with equal outputs; files saved
before the split still load."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest

import zoo
from PIL import Image
from zoo.layers.feed_forward import quick_gelu
from zoo.models.image_converter import ImageConverter
from zoo.models.pre_split_files import is_pre_split_file
from zoo.models.task import Backbone, Preprocessor, Task
from zoo.models.vit.backbone import ViTBackbone
from zoo.models.vit.model import VisionTransformer

ROOT = Path(__file__).resolve().parents[3]


def numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def tiny_backbone(**overrides):
    config = dict(image_size=16, patch_size=4, hidden_dim=8, num_layers=2, num_heads=2,
                  intermediate_dim=16)
    return ViTBackbone(**{**config, **overrides})


def reloaded(obj, tmp_path, name):
    path = tmp_path / f"{name}.keras"
    obj.save(path)
    return keras.saving.load_model(path)


# --- the ViT family --------------------------------------------------------------------------


def test_the_image_classifier_is_a_task_on_the_vit_backbone():
    model = VisionTransformer(16, 4, num_classes=3, hidden_dim=8, num_layers=2, num_heads=2,
                              intermediate_dim=16)
    assert isinstance(model, Task)
    assert type(model.backbone) is ViTBackbone and isinstance(model.backbone, Backbone)
    assert type(model.preprocessor) is ImageConverter
    assert isinstance(model.preprocessor, Preprocessor)
    # The classifier's network is its backbone's: the same layers, no second copy.
    assert model.encoder_blocks is model.backbone.encoder_blocks
    head = {id(w) for w in model.head.weights}
    assert {id(w) for w in model.weights} - head == {id(w) for w in model.backbone.weights}
    # Its logits are the head on the backbone's class token after the image converter.
    images = np.random.default_rng(0).uniform(0, 255, (2, 20, 20, 3)).astype("float32")
    features = model.backbone(model.preprocessor(images))
    assert tuple(features.shape) == (2, 1 + 16, 8)
    np.testing.assert_allclose(numpy(model(images)), numpy(model.head(features[:, 0])),
                               atol=1e-6)
    # At most two mixins besides the task base.
    assert len(VisionTransformer.__bases__) <= 3


def test_the_vit_backbone_config_and_file_round_trip(tmp_path):
    backbone = tiny_backbone(distillation_token=True, stem_filters=[4], embedding_norm=True,
                             activation="quick_gelu", layer_norm_epsilon=1e-5)
    config = backbone.get_config()
    again = ViTBackbone.from_config(config)
    assert again.get_config() == config
    pixels = np.random.default_rng(1).normal(size=(2, 16, 16, 3)).astype("float32")
    loaded = reloaded(backbone, tmp_path, "backbone")
    assert type(loaded) is ViTBackbone and loaded.num_tokens == 2 + 16
    np.testing.assert_array_equal(numpy(loaded(pixels)), numpy(backbone(pixels)))


def test_the_backbone_options_clip_needs():
    # CLIP's image tower: a LayerNorm before the blocks, quick GELU, no class token needed.
    backbone = tiny_backbone(embedding_norm=True, activation="quick_gelu")
    assert backbone.embedding_norm_layer is not None
    assert backbone.encoder_blocks[0].feed_forward.activation is quick_gelu
    x = np.linspace(-4, 4, 9, dtype="float32")
    np.testing.assert_allclose(numpy(quick_gelu(x)), x / (1 + np.exp(-1.702 * x)), rtol=1e-6)
    pooled = tiny_backbone(class_token=False)
    assert pooled.num_prefix_tokens == 0 and pooled.num_tokens == 16
    # The embedding norm is where CLIP has it: right after positions, before block 0.
    pixels = np.random.default_rng(2).normal(size=(1, 16, 16, 3)).astype("float32")
    _, scores = backbone(pixels, return_attention_scores=True)
    assert len(scores) == 2 and tuple(scores[0].shape) == (1, 2, 17, 17)


def test_the_image_converter_round_trips_and_normalises_per_channel(tmp_path):
    mean, std = np.array([0.48, 0.46, 0.41]), np.array([0.27, 0.26, 0.28])
    converter = ImageConverter(8, scale=list(1 / (255 * std)), offset=list(-mean / std))
    images = np.random.default_rng(3).uniform(0, 255, (2, 8, 8, 3)).astype("float32")
    expected = (images / 255 - mean) / std  # CLIP's processor, written out
    np.testing.assert_allclose(numpy(converter(images)), expected, rtol=1e-5, atol=1e-5)
    again = ImageConverter.from_config(converter.get_config())
    np.testing.assert_array_equal(numpy(again(images)), numpy(converter(images)))


def test_the_classifier_file_round_trips_with_its_parts(tmp_path):
    model = VisionTransformer.from_architecture("vit-cifar-hybrid", num_layers=1)
    images = np.random.default_rng(4).uniform(0, 255, (2, 32, 32, 3)).astype("uint8")
    loaded = reloaded(model, tmp_path, "vit")
    assert type(loaded.backbone) is ViTBackbone and type(loaded.preprocessor) is ImageConverter
    np.testing.assert_array_equal(numpy(loaded(images)), numpy(model(images)))


def test_a_classifier_file_saved_before_the_split_loads():
    # The shipped file was saved before the split: its weights sit at the classifier's old
    # attribute paths, which Keras alone no longer reads.
    old = ROOT / "saved_models" / "vit-hybrid-cifar10" / "model.keras"
    assert is_pre_split_file(old)
    with pytest.raises(ValueError):
        keras.saving.load_model(old)
    model = zoo.load(str(old))
    # Read right, it names the example photos as their folders do (9 of 12 before the split;
    # a model with weights left at their initial values names every image alike).
    folders = sorted((ROOT / "docs" / "examples" / "images").glob("*/*.jpg"))
    images = np.stack([np.asarray(Image.open(p).convert("RGB").resize((32, 32)))
                       for p in folders])
    best = [labels[0][0] for labels in model.classify(images, top_k=1)]
    assert sum(b == p.parent.name for b, p in zip(best, folders)) >= 9


# --- the translator family -------------------------------------------------------------------

TINY_TRANSLATOR = dict(hidden_dim=8, num_encoder_layers=1, num_decoder_layers=2, num_heads=2,
                       intermediate_dim=16, max_source_length=16, max_target_length=12)


@pytest.fixture(scope="module")
def translator_tokenizer():
    from zoo.text.tokenizer import SubwordTokenizer

    return SubwordTokenizer.train(["A dog runs.", "Ein Hund rennt.", "A man rides."],
                                  vocabulary_size=40)


def test_the_translator_is_a_task_on_its_backbone(translator_tokenizer):
    from zoo.models.translator.backbone import TranslatorBackbone
    from zoo.models.translator.model import Translator
    from zoo.models.translator.preprocessor import TranslatorPreprocessor

    model = Translator.from_architecture("transformer-tiny", translator_tokenizer,
                                         output_bias=True, **TINY_TRANSLATOR)
    assert isinstance(model, Task) and len(Translator.__bases__) <= 3
    assert type(model.backbone) is TranslatorBackbone and isinstance(model.backbone, Backbone)
    assert type(model.preprocessor) is TranslatorPreprocessor
    assert model.tokenizer is model.preprocessor.tokenizer is translator_tokenizer
    assert model.decoder_blocks is model.backbone.decoder_blocks
    assert model.embedding is model.backbone.token_embedding
    source = model.encode_texts(["A dog runs.", "A man rides."])
    # The preprocessor's ids are the tokenizer's, padded with pad_id to a multiple of 8.
    for row, ids in zip(source, translator_tokenizer.encode(["A dog runs.", "A man rides."])):
        assert list(row[:len(ids)]) == ids and (row[len(ids):] == model.pad_id).all()
    assert source.shape[1] % 8 == 0
    target = np.array([[2, 5, 6], [2, 7, 0]], "int32")
    model.logits_bias.assign(np.linspace(-1, 1, model.vocabulary_size, dtype="float32"))
    logits = numpy(model({"source_ids": source, "target_ids": target}))
    # The backbone is the network: the task adds the tied projection E^T and the bias only.
    assert {id(w) for w in model.weights} - {id(model.logits_bias)} == {
        id(w) for w in model.backbone.weights}
    features = numpy(model.backbone({"source_ids": source, "target_ids": target}))
    table = numpy(model.backbone.token_embedding.embeddings)
    np.testing.assert_allclose(logits, features @ table.T + numpy(model.logits_bias),
                               rtol=1e-5, atol=1e-5)


def test_the_translator_backbone_round_trips(tmp_path):
    from zoo.models.translator.backbone import TranslatorBackbone

    backbone = TranslatorBackbone(30, hidden_dim=8, num_encoder_layers=1, num_decoder_layers=1,
                                  num_heads=2, intermediate_dim=16, normalize_first=True,
                                  pad_id=29, position_layout="concatenated")
    config = backbone.get_config()
    assert TranslatorBackbone.from_config(config).get_config() == config
    ids = {"source_ids": np.array([[3, 4, 29]], "int32"),
           "target_ids": np.array([[29, 5]], "int32")}
    expected = numpy(backbone(ids))
    loaded = reloaded(backbone, tmp_path, "translator_backbone")
    assert type(loaded) is TranslatorBackbone
    np.testing.assert_array_equal(numpy(loaded(ids)), expected)


def test_a_translator_file_saved_before_the_split_loads():
    import h5py
    import zipfile

    old = ROOT / "saved_models" / "translator-multi30k-en-de" / "model.keras"
    assert is_pre_split_file(old)
    model = zoo.load(str(old))
    assert model.tokenizer is not None and model.tokenizer.vocabulary_size == 8000
    # Each weight where the old layout held it, read from the file by its path.
    pairs = {"embedding/vars/0": model.backbone.token_embedding.embeddings,
             "encoder_blocks/transformer_encoder_block/self_attention/query_dense/vars/0":
                 model.backbone.encoder_blocks[0].self_attention.query_dense.kernel,
             "decoder_blocks/transformer_decoder_block_2/cross_attention/value_dense/vars/1":
                 model.backbone.decoder_blocks[2].cross_attention.value_dense.bias,
             "decoder_blocks/transformer_decoder_block_2/feed_forward_norm/vars/0":
                 model.backbone.decoder_blocks[2].feed_forward_norm.gamma}
    with zipfile.ZipFile(old) as archive, archive.open("model.weights.h5") as weights:
        with h5py.File(weights, "r") as h5:
            for path, variable in pairs.items():
                np.testing.assert_array_equal(numpy(variable), h5[path][()], err_msg=path)


# --- the sentence encoder family -------------------------------------------------------------

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "dog", "runs", "man", "."]


def test_the_sentence_encoder_is_a_task_on_its_backbone():
    from zoo.models.sentence_encoder.backbone import SentenceEncoderBackbone
    from zoo.models.sentence_encoder.model import SentenceEncoder
    from zoo.models.sentence_encoder.preprocessor import SentenceEncoderPreprocessor

    model = SentenceEncoder(len(WORDS), num_layers=2, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_positions=16, vocabulary=WORDS)
    assert isinstance(model, Task) and len(SentenceEncoder.__bases__) <= 3
    assert type(model.backbone) is SentenceEncoderBackbone
    assert type(model.preprocessor) is SentenceEncoderPreprocessor
    assert model.encoder_blocks is model.backbone.encoder_blocks
    assert {id(w) for w in model.weights} == {id(w) for w in model.backbone.weights}
    # BERT's uncased WordPiece: [CLS] a man runs . [SEP], then padding to the longest.
    batch = model.preprocessor(["A man runs.", "a dog"])
    assert [list(map(int, row)) for row in batch["token_ids"]] == [[2, 4, 7, 6, 8, 3],
                                                                    [2, 4, 5, 3, 0, 0]]
    # The sentence vector: the mean of the backbone's real tokens, unit length.
    features = numpy(model.backbone(batch))
    mask = np.asarray(batch["padding_mask"], "float32")[..., None]
    mean = (features * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(model.embed(["A man runs.", "a dog"]),
                               mean / np.linalg.norm(mean, axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_the_sentence_encoder_backbone_round_trips(tmp_path):
    from zoo.models.sentence_encoder.backbone import SentenceEncoderBackbone

    backbone = SentenceEncoderBackbone(12, num_layers=1, num_heads=2, hidden_dim=8,
                                       intermediate_dim=16, max_positions=8)
    config = backbone.get_config()
    assert SentenceEncoderBackbone.from_config(config).get_config() == config
    inputs = {"token_ids": np.array([[2, 5, 3, 0]]), "padding_mask": np.array([[1, 1, 1, 0]])}
    loaded = reloaded(backbone, tmp_path, "sentence_backbone")
    np.testing.assert_array_equal(numpy(loaded(inputs)), numpy(backbone(inputs)))


def test_a_sentence_encoder_file_saved_before_the_split_loads():
    import h5py
    import zipfile

    # Saved by the encoder of before the split (one block, 8 wide, the WORDS vocabulary).
    old = Path(__file__).parent / "data" / "sentence-encoder-pre-split.keras"
    assert is_pre_split_file(old)
    model = zoo.load(str(old))
    assert model.vocabulary == WORDS
    pairs = {"layers/token_embedding/vars/0": model.backbone.token_embedding.embeddings,
             "embeddings_norm/vars/1": model.backbone.embeddings_norm.beta,
             "encoder_blocks/transformer_encoder_block/self_attention/key_dense/vars/0":
                 model.backbone.encoder_blocks[0].self_attention.key_dense.kernel}
    with zipfile.ZipFile(old) as archive, archive.open("model.weights.h5") as weights:
        with h5py.File(weights, "r") as h5:
            for path, variable in pairs.items():
                np.testing.assert_array_equal(numpy(variable), h5[path][()], err_msg=path)
