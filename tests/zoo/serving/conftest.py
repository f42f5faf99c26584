"""The exported models the serving tests share: each is exported once a session (an export
traces the model's signatures, which takes seconds)."""

import keras
import numpy as np
import pytest

from zoo.models.translator.model import Translator
from zoo.serving.export import export_model


def tiny_translator(tokenizer, seed: int) -> Translator:
    """The serving tests' translator: transformer-tiny at width 32, 32 source and 24 target
    tokens, its weights drawn from `seed`."""
    keras.utils.set_random_seed(seed)
    model = Translator.from_architecture("transformer-tiny", tokenizer, hidden_dim=32,
                                         intermediate_dim=64, num_heads=4,
                                         max_source_length=32, max_target_length=24)
    model.ensure_built()
    return model


def tiny_vit(seed: int):
    """The serving tests' ViT: 32-pixel images in 8-pixel patches, four named classes, its
    weights (the head's too) drawn from `seed`."""
    from zoo.models.vit.model import VisionTransformer

    keras.utils.set_random_seed(seed)
    model = VisionTransformer(image_size=32, patch_size=8, num_classes=4, hidden_dim=32,
                              num_layers=1, num_heads=2, intermediate_dim=64,
                              class_names=["ant", "bee", "cat", "dog"],
                              head_initializer="glorot_uniform")
    model(np.zeros((1, 32, 32, 3), "uint8"))
    return model


@pytest.fixture(scope="session")
def exported_translator(small_tokenizer, tmp_path_factory):
    model = tiny_translator(small_tokenizer, seed=3)
    folder = tmp_path_factory.mktemp("translator")
    model.save(folder / "model.keras")
    repository = tmp_path_factory.mktemp("repository")
    version = export_model(str(folder / "model.keras"), repository, version=3, beam_size=3,
                           name="translator-test")
    return model, repository, version


@pytest.fixture(scope="session")
def exported_vit(tmp_path_factory):
    model = tiny_vit(seed=5)
    folder = tmp_path_factory.mktemp("vit")
    model.save(folder / "model.keras")
    repository = tmp_path_factory.mktemp("vit_repository")
    version = export_model(str(folder / "model.keras"), repository, top_k=3, name="vit-test")
    return model, version


# Runs requests in turn in one fresh process as the model server runs them (XLA off, a TF1
# session, the signature fed by tensor name): each case's outcome is the row count of every
# output, or the InvalidArgument message. `run_like_a_server` checks nothing of ours loaded.
SESSION_CASES = r"""
import numpy as np
graph = tf.Graph()
session = tf.compat.v1.Session(graph=graph)
signatures = tf.compat.v1.saved_model.loader.load(session, ["serve"], VERSION).signature_def
outcome = {}
for name, (signature_name, feeds) in CASES.items():
    signature = signatures[signature_name]
    fetches = {key: value.name for key, value in signature.outputs.items()}
    try:
        # An input a request leaves out takes the signature's default, as the server does.
        values = {key: tf.make_ndarray(v) for key, v in signature.defaults.items()}
        values.update({key: eval(value) for key, value in feeds.items()})
        result = session.run(fetches, {signature.inputs[key].name: value
                                       for key, value in values.items()})
        outcome[name] = {key: list(value.shape) for key, value in result.items()}
    except tf.errors.InvalidArgumentError as error:
        lines = error.message.splitlines()
        outcome[name] = next((line for line in lines if "assertion failed" in line), lines[0])
print(json.dumps(outcome))
"""


def session_outcomes(version, cases: dict, setup: str = "") -> dict:
    """`{case: {output: shape} or the InvalidArgument message's line
    that says which assertion failed}` for `cases`
    (`{case: (signature, {input: Python expression of a NumPy array})}`), run as the model
    server runs them; `setup` is code run first (names the expressions use)."""
    from tests.zoo.conftest import run_like_a_server

    (result,) = run_like_a_server(f"VERSION = {str(version)!r}\nCASES = {cases!r}\n" + setup
                                  + SESSION_CASES)
    return result


def check_request_table(version, requests: list, setup: str = "") -> None:
    """Runs a table of requests `(case, signature, feeds, expected)` as the model server runs
    them; `expected` is the outputs' shapes (`{output: shape}`) for an accepted request, or a
    piece of the InvalidArgument message for a refused one."""
    outcome = session_outcomes(version, {case: (signature, feeds)
                                         for case, signature, feeds, _ in requests}, setup)
    for case, _, _, expected in requests:
        if isinstance(expected, str):
            assert expected in outcome[case], (case, outcome[case])
        else:
            assert outcome[case] == expected, (case, outcome[case])
