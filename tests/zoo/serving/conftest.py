"""The exported models the serving tests share: each is exported once a session (an export
traces the model's signatures, which takes seconds)."""

import keras
import numpy as np
import pytest

from zoo.models.translator.model import Translator
from zoo.serving.export import export_model


@pytest.fixture(scope="session")
def exported_translator(small_tokenizer, tmp_path_factory):
    keras.utils.set_random_seed(3)
    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=32,
                                   intermediate_dim=64, num_heads=4, max_source_length=32,
                                   max_target_length=24)
    model.ensure_built()
    folder = tmp_path_factory.mktemp("translator")
    model.save(folder / "model.keras")
    repository = tmp_path_factory.mktemp("repository")
    version = export_model(str(folder / "model.keras"), repository, version=3, beam_size=3,
                           name="translator-test")
    return model, repository, version


@pytest.fixture(scope="session")
def exported_vit(tmp_path_factory):
    from zoo.models.vit.model import VisionTransformer

    keras.utils.set_random_seed(5)
    model = VisionTransformer(image_size=32, patch_size=8, num_classes=4, hidden_dim=32,
                              num_layers=1, num_heads=2, intermediate_dim=64,
                              class_names=["ant", "bee", "cat", "dog"],
                              head_initializer="glorot_uniform")
    model(np.zeros((1, 32, 32, 3), "uint8"))
    folder = tmp_path_factory.mktemp("vit")
    model.save(folder / "model.keras")
    repository = tmp_path_factory.mktemp("vit_repository")
    version = export_model(str(folder / "model.keras"), repository, top_k=3, name="vit-test")
    return model, version
