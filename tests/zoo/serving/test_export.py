"""Exports of either model: versions written whole or not at all, bad settings, the
size of what is saved, no op the model server lacks, the server's config files.
The translator's and the ViT's signatures: test_export_translator.py, test_export_vit.py.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo.serving.export import export_model
from zoo.serving.model_server import xla_only_op_types
from zoo.models.translator.model import Translator

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


def test_existing_version_is_not_overwritten(exported_translator, tmp_path):
    model, repository, version = exported_translator
    model.save(tmp_path / "model.keras")
    model_file = str(tmp_path / "model.keras")
    with pytest.raises(FileExistsError, match="--force"):
        export_model(model_file, repository, version=3, name="translator-test")
    with pytest.raises(ValueError, match="positive integer"):
        export_model(model_file, repository, version=0, name="translator-test")


# ---------------------------------------------------------------------- atomic versions
def _vit_file(exported_vit, tmp_path) -> str:
    model, _ = exported_vit
    model.save(tmp_path / "vit.keras")
    return str(tmp_path / "vit.keras")


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_force_swaps_in_a_complete_new_version(exported_vit, tmp_path):
    model_file = _vit_file(exported_vit, tmp_path)
    repository = tmp_path / "repository"
    first = export_model(model_file, repository, version=2, top_k=3, name="v")
    (first / "marker").write_text("the old version")
    with pytest.raises(FileExistsError, match="--force"):
        export_model(model_file, repository, version=2, top_k=3, name="v")
    second = export_model(model_file, repository, version=2, top_k=2, name="v", force=True)
    assert second == first and (second / "saved_model.pb").exists()
    assert not (second / "marker").exists()
    assert _leftovers(repository / "v") == []
    assert 'name: "v"' in (repository / "models.config").read_text()


def test_a_failed_export_leaves_the_old_version_and_no_temporary(exported_vit, tmp_path,
                                                                monkeypatch):
    import zoo.serving.export

    model_file = _vit_file(exported_vit, tmp_path)
    repository = tmp_path / "repository"
    old = export_model(model_file, repository, version=1, top_k=3, name="v")
    (old / "marker").write_text("the old version")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # a kill while the new version is being written

    monkeypatch.setattr(zoo.serving.export, "write_warmup_requests", crash)
    with pytest.raises(KeyboardInterrupt):
        export_model(model_file, repository, version=1, top_k=3, name="v", force=True)
    assert (old / "marker").read_text() == "the old version"
    with pytest.raises(KeyboardInterrupt):
        export_model(model_file, repository, version=5, top_k=3, name="v")
    assert not (repository / "v" / "5").exists()
    assert _leftovers(repository / "v") == []


def test_two_exports_of_one_version_cannot_both_succeed(exported_vit, tmp_path, monkeypatch):
    import zoo.serving.export

    model_file = _vit_file(exported_vit, tmp_path)
    repository = tmp_path / "repository"
    real = zoo.serving.export.write_warmup_requests

    def other_export_finishes_first(folder, *args, **kwargs):
        other = repository / "v" / "1"
        other.mkdir()
        (other / "saved_model.pb").write_text("the other export's")
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(zoo.serving.export, "write_warmup_requests", other_export_finishes_first)
    with pytest.raises(FileExistsError, match="another export") as error:
        export_model(model_file, repository, version=1, top_k=3, name="v")
    assert "\n" not in str(error.value)
    assert (repository / "v" / "1" / "saved_model.pb").read_text() == "the other export's"
    assert _leftovers(repository / "v") == []


def test_put_in_place_refuses_an_existing_target_and_swaps_with_force(tmp_path):
    from zoo.serving.export import _put_in_place

    target, new = tmp_path / "1", tmp_path / ".1.tmp"
    for folder, text in ((target, "old"), (new, "new")):
        folder.mkdir()
        (folder / "f").write_text(text)
    with pytest.raises(FileExistsError, match="another export"):
        _put_in_place(new, target, force=False)
    assert (target / "f").read_text() == "old"
    _put_in_place(new, target, force=True)
    assert (target / "f").read_text() == "new" and sorted(os.listdir(tmp_path)) == ["1"]


@pytest.mark.parametrize("settings, message", [
    (dict(beam_size=0), "beam_size"),
    (dict(beam_size=1000), "beam_size"),
    (dict(top_k=0), "top_k"),
    (dict(alpha=-1.0), "alpha"),
    (dict(version=0), "positive integer"),
    (dict(version="x"), "positive integer"),
    (dict(name="../escape"), "plain folder name"),
])
def test_bad_export_settings_are_one_line_errors(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message) as error:
        export_model(str(tmp_path / "missing.keras"), tmp_path / "repository", **settings)
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------------- size
def _saved_values(version) -> int:
    """How many numbers the SavedModel's variables/ checkpoint holds."""
    import tensorflow as tf

    entries = tf.train.list_variables(str(version / "variables" / "variables"))
    return sum(int(np.prod(shape)) for name, shape in entries if shape)


def test_exports_store_each_weight_once(exported_vit, exported_translator):
    translator, _, translator_version = exported_translator
    for model, version in (exported_vit, (translator, translator_version)):
        weights = sum(int(np.prod(w.shape)) for w in model.weights)
        # At most 1.2x the weights (the bound this test holds exports to); Keras' tracking of the model on top
        # of the endpoints' captures used to save every weight twice (2.0x).
        assert weights <= _saved_values(version) <= 1.2 * weights, version


# ---------------------------------------------------------------------- as the server runs it
def test_exports_hold_no_op_that_needs_xla(exported_translator, exported_vit):
    """The model server runs graphs with XLA off: an `Xla*` op (Keras' `slice_update` on
    TensorFlow is one) fails there, however well the export answers in Python."""
    for version in (exported_translator[2], exported_vit[1]):
        assert xla_only_op_types(version) == set(), version


def test_xla_only_op_types_finds_keras_slice_update_in_a_saved_model(tmp_path):
    import tensorflow as tf

    module = tf.Module()
    module.write = tf.function(
        lambda i: keras.ops.slice_update(tf.zeros([4]), [i], tf.ones([1])),
        input_signature=[tf.TensorSpec([], tf.int32)])
    tf.saved_model.save(module, str(tmp_path))
    assert xla_only_op_types(tmp_path) == {"XlaDynamicUpdateSlice"}


def test_a_model_object_exports_under_its_name_and_other_objects_are_refused(exported_vit,
                                                                            tmp_path):
    import zoo

    model, _ = exported_vit
    version = zoo.export(model, tmp_path, version=2)
    assert version == tmp_path / model.name / "2" and (version / "saved_model.pb").exists()
    with pytest.raises(ValueError, match="got Dense"):
        zoo.export(keras.layers.Dense(2), tmp_path)


def test_server_config_files_parse_as_the_server_reads_them(tmp_path):
    """models.config is TF Serving's own ModelServerConfig in text form, whatever a folder is
    named; batching_parameters.txt names the flags that take it and sets a batch size."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    from zoo.serving.model_server import write_batching_parameters, write_models_config

    for name in ('say "hi"', "plain"):
        (tmp_path / name / "1").mkdir(parents=True)
    (tmp_path / "not-a-model").mkdir()
    config = text_format.Parse(write_models_config(tmp_path).read_text(),
                               model_server_config_pb2.ModelServerConfig())
    assert [(c.name, c.base_path) for c in config.model_config_list.config] == [
        ("plain", "/models/plain"), ('say "hi"', '/models/say "hi"')]
    text = write_batching_parameters(tmp_path).read_text()
    assert "--enable_batching=true --batching_parameters_file=" in text


def test_the_batching_file_is_the_servers_message_and_serves_every_accepted_request(tmp_path):
    """batching_parameters.txt parses as TF Serving's own BatchingParameters (an unknown
    field fails), and every request a signature accepts is served: a task may be as large as
    the largest request any signature takes, larger ones are split (so the server never
    refuses one the signatures take), and the batches the server runs at once are no larger
    than any signature accepts (so a merged batch is never refused by a signature's cap)."""
    from google.protobuf import text_format

    from tests.zoo.serving.batching_parameters_proto import batching_parameters_class
    from zoo.serving.image_endpoints import MAX_IMAGES
    from zoo.serving.model_server import write_batching_parameters
    from zoo.serving.text_endpoints import MAX_SENTENCES, MAX_TRANSLATOR_SENTENCES

    text = write_batching_parameters(tmp_path).read_text()
    parameters = text_format.Parse(text, batching_parameters_class()())
    with pytest.raises(text_format.ParseError, match="no field named"):
        text_format.Parse(text + "max_batch_sizes { value: 1 }\n", batching_parameters_class()())
    caps = {"sentence encoder": MAX_SENTENCES, "translator": MAX_TRANSLATOR_SENTENCES,
            "ViT": MAX_IMAGES}
    largest_task = parameters.max_batch_size.value
    run_at_once = parameters.max_execution_batch_size.value
    assert parameters.enable_large_batch_splitting.value
    assert largest_task == max(caps.values()), caps
    assert 1 <= run_at_once <= min(caps.values()) and run_at_once <= largest_task
    assert not parameters.allowed_batch_sizes  # else its last entry must be max_batch_size
    assert parameters.pad_variable_length_inputs  # id signatures' rows of unequal widths
    assert parameters.num_batch_threads.value >= 1
    # The queue holds at least one largest request, in batches of `run_at_once`.
    assert parameters.max_enqueued_batches.value * run_at_once >= largest_task


def test_stale_temporaries_of_killed_exports_are_removed_and_live_ones_kept(tmp_path):
    from zoo.serving.export import remove_stale_temporaries

    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid names no live process now
    stale = tmp_path / f".1.tmp-{finished.pid}-0123abcd"
    live = tmp_path / f".2.tmp-{os.getpid()}-4567ef01"
    version, unnamed = tmp_path / "1", tmp_path / ".3.tmp-nopid"
    for folder in (stale, live, version, unnamed):
        (folder / "variables").mkdir(parents=True)
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, version.name, unnamed.name])
    assert remove_stale_temporaries(tmp_path / "missing") == []


@pytest.mark.parametrize("progress", [True, False])
def test_export_says_what_it_does_only_when_asked(small_tokenizer, tmp_path, monkeypatch,
                                                  capsys, progress):
    """`zoo export` passes progress=True: a line as the minute of tracing starts and one as it
    ends; a Python caller who did not ask hears nothing."""
    import zoo.serving.export as export

    written = []
    monkeypatch.setattr(export, "_write_version", lambda *args: written.append(args[1]))
    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=32,
                                         intermediate_dim=64, num_heads=4)
    target = export_model(model, tmp_path, version=2, name="tiny", progress=progress)
    assert written == [target] == [tmp_path / "tiny" / "2"]
    lines = capsys.readouterr().err.splitlines()
    if progress:
        assert lines[0] == f"zoo: exporting tiny to {target} ..."
        assert lines[1].startswith(f"zoo: exporting tiny to {target}: done in ")
    else:
        assert lines == []
