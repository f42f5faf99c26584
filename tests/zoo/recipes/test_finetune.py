"""Fine-tuning: the model's surgery as functions, layer-wise learning-rate decay, checkpoints
that do not fit, Fashion-MNIST, and `zoo finetune` on real data beating the model it started
from."""

from __future__ import annotations

import gzip
import json
import zipfile

import keras
import numpy as np
import pytest

import zoo
from zoo.training.idx_data import FASHION_MNIST_DIR, load_idx_split, read_idx
from zoo.training.optimizers import adamw_no_decay_on_norms, relative_variable_path
from zoo.cli.main import main
from zoo.recipes.finetune import encoder_groups, freeze_blocks, layer_decay_multipliers, replace_head
from zoo.hub.loader import MODELS_DIR, load_weights
from zoo.models.vit.model import VisionTransformer

SMALL = dict(image_size=16, patch_size=4, num_classes=5, hidden_dim=16, num_layers=3,
             num_heads=4, intermediate_dim=32, head_initializer="glorot_uniform")


def small(**overrides) -> VisionTransformer:
    return VisionTransformer(**{**SMALL, **overrides})


def images(n: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 16, 16, 3)).astype("uint8")


def values(model: keras.Model) -> dict[str, np.ndarray]:
    return {relative_variable_path(v): np.array(v.numpy()) for v in model.weights}


def fit_step(model: VisionTransformer, optimizer: keras.optimizers.Optimizer) -> None:
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = np.arange(8) % model.num_classes
    model.fit(images(), labels, batch_size=8, epochs=1, verbose=0)


# ------------------------------------------------------------------ surgery as functions
def test_the_function_forms_call_the_models_methods():
    """`replace_head`, `freeze_blocks` and `encoder_groups` are the model's `with_new_head`,
    `freeze_blocks` and `layers_by_depth` (tested in tests/zoo/models/)."""
    model = small()
    new = replace_head(model, 3, class_names=["cat", "dog", "emu"])
    assert new is not model and new.class_names == ["cat", "dog", "emu"]
    assert tuple(new.head.kernel.shape) == (16, 3)
    np.testing.assert_array_equal(np.asarray(new.encoder_norm.gamma),
                                  np.asarray(model.encoder_norm.gamma))
    assert freeze_blocks(model, 3) is model
    assert {relative_variable_path(v) for v in model.trainable_weights} == {
        "backbone/encoder_norm/gamma", "backbone/encoder_norm/beta", "head/kernel", "head/bias"}
    assert len(freeze_blocks(model, 0).trainable_weights) == len(model.weights)
    assert encoder_groups(model) == model.layers_by_depth()
    with pytest.raises(ValueError, match=r"num_blocks must be an int in 0\.\.3 .* got 4"):
        freeze_blocks(model, 4)


@pytest.mark.parametrize("function, arguments", [
    (replace_head, (3,)), (freeze_blocks, (1,)), (encoder_groups, ()),
    (layer_decay_multipliers, (0.5,))])
def test_the_functions_refuse_a_model_that_is_no_vit(function, arguments):
    with pytest.raises(ValueError, match="^expected a VisionTransformer; got Sequential$"):
        function(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), *arguments)


# ------------------------------------------------------------------ layer-wise decay
def test_layer_decay_multipliers_follow_depth():
    model = small()
    multipliers = layer_decay_multipliers(model, 0.5)
    assert multipliers["head/kernel"] == 1.0 and multipliers["backbone/encoder_norm/gamma"] == 1.0
    assert multipliers["backbone/encoder_block_2/self_attention/query/kernel"] == 0.5
    assert multipliers["backbone/encoder_block_0/feed_forward/intermediate/kernel"] == 0.125
    assert multipliers["backbone/patch_embedding/projection/kernel"] == 0.0625
    assert len(multipliers) == len(model.weights)
    assert len(encoder_groups(model)) == 5
    with pytest.raises(ValueError, match="layer decay must be in"):
        layer_decay_multipliers(model, 1.5)


def test_adam_first_step_scales_with_the_multiplier():
    """Adam's first update of an element is lr * g / (|g| + eps), i.e. +-lr: with a
    multiplier m it must be +-(m * lr), whatever the gradient's size."""
    model = small()
    multipliers = layer_decay_multipliers(model, 0.5)
    before = values(model)
    fit_step(model, adamw_no_decay_on_norms(1e-3, weight_decay=0.0,
                                            learning_rate_multipliers=multipliers))
    after = values(model)
    for path in ("head/kernel", "backbone/encoder_block_2/feed_forward/output/kernel",
                 "backbone/encoder_block_0/self_attention/value/kernel",
                 "backbone/patch_embedding/projection/kernel"):
        step = np.abs(after[path] - before[path]).max()
        assert step == pytest.approx(1e-3 * multipliers[path], rel=0.02), path


def test_a_zero_multiplier_also_stops_weight_decay():
    model = small()
    multipliers = {path: 0.0 for path in layer_decay_multipliers(model, 0.5)
                   if path.startswith("backbone/encoder_block_0/")}
    before = values(model)
    fit_step(model, adamw_no_decay_on_norms(1e-2, weight_decay=0.5,
                                            learning_rate_multipliers=multipliers))
    after = values(model)
    assert all(np.array_equal(before[p], after[p]) for p in multipliers)
    decayed = "backbone/encoder_block_1/self_attention/query/kernel"
    assert not np.array_equal(before[decayed], after[decayed])


def test_multipliers_for_unknown_variables_are_refused():
    optimizer = adamw_no_decay_on_norms(1e-3, learning_rate_multipliers={"no/such/var": 0.5})
    with pytest.raises(ValueError, match="no/such/var"):
        fit_step(small(), optimizer)


# ------------------------------------------------------------------ checkpoints that do not fit
def test_load_weights_names_the_first_mismatched_weight_and_both_shapes(tmp_path):
    source = small(num_classes=10)
    source.save_weights(tmp_path / "ten.weights.h5")
    target = small(num_classes=4)
    before = values(target)
    with pytest.raises(ValueError, match=r"head/kernel has shape \(16, 10\) in the checkpoint "
                                         r"but \(16, 4\) in the model"):
        load_weights(target, tmp_path / "ten.weights.h5")
    # Refused before anything was assigned.
    assert all(np.array_equal(before[k], v) for k, v in values(target).items())
    deeper = small(num_layers=4)
    with pytest.raises(ValueError,
                       match="backbone/encoder_block_3/.* is missing from the checkpoint"):
        load_weights(deeper, tmp_path / "ten.weights.h5")
    # And a fitting checkpoint loads.
    same = load_weights(small(num_classes=10), tmp_path / "ten.weights.h5")
    assert np.array_equal(values(same)["head/kernel"], values(source)["head/kernel"])


def test_zoo_load_names_the_weight_of_a_tampered_archive(tmp_path):
    small(num_classes=10).save(tmp_path / "ten.keras")
    small(num_classes=4).save(tmp_path / "four.keras")
    tampered = tmp_path / "tampered.keras"
    with zipfile.ZipFile(tmp_path / "four.keras") as four, \
            zipfile.ZipFile(tmp_path / "ten.keras") as ten, \
            zipfile.ZipFile(tampered, "w") as out:
        for name in four.namelist():
            source = ten if name == "model.weights.h5" else four
            out.writestr(name, source.read(name))
    with pytest.raises(ValueError, match=r"head/kernel has shape \(16, 10\) in the checkpoint "
                                         r"but \(16, 4\) in the model"):
        zoo.load(str(tampered))


def test_load_refuses_a_model_of_another_class_than_expected(tmp_path):
    small().save(tmp_path / "vit.keras")
    from zoo.models.translator.model import Translator

    with pytest.raises(ValueError, match="is a VisionTransformer, not a Translator"):
        zoo.load(str(tmp_path / "vit.keras"), expect=Translator)
    assert isinstance(zoo.load(str(tmp_path / "vit.keras"), expect=VisionTransformer),
                      VisionTransformer)


# ------------------------------------------------------------------ Fashion-MNIST files
def test_read_idx_parses_the_header_and_refuses_truncated_files(tmp_path):
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 0x08, 3]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    with gzip.open(tmp_path / "x-idx3-ubyte.gz", "wb") as f:
        f.write(header + array.tobytes())
    assert np.array_equal(read_idx(tmp_path / "x-idx3-ubyte.gz"), array)
    (tmp_path / "short").write_bytes(header + array.tobytes()[:-1])
    with pytest.raises(ValueError, match=r"promises shape \(2, 3, 4\) \(24 bytes\) but 23"):
        read_idx(tmp_path / "short")
    (tmp_path / "text").write_bytes(b"hello world")
    with pytest.raises(ValueError, match="is not an IDX file"):
        read_idx(tmp_path / "text")


needs_fashion_mnist = pytest.mark.skipif(
    not FASHION_MNIST_DIR.is_dir(),
    reason="Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")


@needs_fashion_mnist
def test_fashion_mnist_test_split_is_read_padded_and_in_rgb():
    x, y = load_idx_split(FASHION_MNIST_DIR, "test")
    assert x.shape == (10000, 32, 32, 3) and x.dtype == np.uint8
    # The first test labels of Fashion-MNIST: ankle boot, pullover, trouser, trouser, shirt.
    assert y[:5].tolist() == [9, 2, 1, 1, 6]
    assert np.bincount(y).tolist() == [1000] * 10
    assert x[:, :2].max() == 0 and np.array_equal(x[..., 0], x[..., 2])


# ------------------------------------------------------------------ fine-tuning on real data
@pytest.mark.slow
@needs_fashion_mnist
@pytest.mark.skipif(not (MODELS_DIR / "vit-cifar10" / "model.keras").exists(),
                    reason="vit-cifar10 is not shipped in this checkout")
def test_zoo_finetune_vit_on_fashion_mnist_beats_the_model_it_started_from(tmp_path):
    # 200 training images, two epochs of 10 steps: validation top-1 goes from 10% to about
    # 45%, the test split's to about 50% (the first epoch's compilation is most of the time).
    out = tmp_path / "ft"
    assert main(["finetune", "vit", "--model", "vit-cifar10", "--data", str(FASHION_MNIST_DIR),
                 "--limit-per-class", "30", "--validation-size", "100", "--epochs", "2",
                 "--batch-size", "20", "--learning-rate", "1e-3", "--freeze-blocks", "3",
                 "--no-rand-augment",
                 "--output", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    before, after = metrics["validation_before"]["top1"], metrics["validation"]["top1"]
    assert before < 0.2  # a new (zero) head: chance
    assert after > before + 0.2, (before, after)
    tuned = zoo.load(str(out))
    assert tuned.class_names[9] == "Ankle boot"
    # On the held-out test split too, not just the validation images.
    x, y = load_idx_split(FASHION_MNIST_DIR, "test")
    accuracy = np.mean(np.argmax(tuned.predict(x[:500], verbose=0), -1) == y[:500])
    assert accuracy > 0.3, accuracy


@pytest.mark.slow
def test_zoo_finetune_translator_learns_new_pairs_with_its_own_tokenizer(shared_data, tmp_path):
    """Continued training on 100 Multi30k test pairs (never seen in training): BLEU on them
    rises well above the shipped model's (from about 36 to about 66 in three epochs), and the
    vocabulary is the shipped one."""
    folder = shared_data / "multi30k"
    for lang in ("en", "de"):
        with gzip.open(folder / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = [next(f).rstrip("\n") for _ in range(100)]
        (tmp_path / f"new.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "ft"
    files = ["--source", str(tmp_path / "new.en"), "--target", str(tmp_path / "new.de"),
             "--validation-source", str(tmp_path / "new.en"),
             "--validation-target", str(tmp_path / "new.de")]
    assert main(["finetune", "translator", *files, "--epochs", "3", "--evaluate-every", "3",
                 "--beam-size", "1", "--learning-rate", "5e-4", "--warmup-steps", "10",
                 "--batch-size", "32", "--output", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    before, after = metrics["validation_before"]["bleu"], metrics["validation"]["bleu"]
    assert after > before + 5, (before, after)
    shipped, tuned = zoo.load("translator-multi30k-en-de"), zoo.load(str(out))
    assert tuned.tokenizer.vocabulary_size == shipped.tokenizer.vocabulary_size
    sentence = "A man in an orange hat starring at something."
    assert tuned.tokenizer.encode([sentence]) == shipped.tokenizer.encode([sentence])


def test_the_recipe_prepares_a_pretrained_model_for_new_classes_and_a_new_size(tmp_path):
    from zoo.recipes.settings import ViTFinetuneRecipe
    from zoo.recipes.vit import build_vit

    pretrained = small(num_classes=10)
    pretrained.save(tmp_path / "pre.keras")
    recipe = ViTFinetuneRecipe(model=str(tmp_path / "pre.keras"), image_size=32,
                               freeze_blocks=1, layer_decay=0.5, epochs=1)
    model = build_vit(recipe, ["a", "b", "c"], steps_per_epoch=4)
    assert model.num_classes == 3 and model.class_names == ["a", "b", "c"]
    assert model.image_size == 32 and model.grid_size == (8, 8)  # 16 px -> 32 px
    assert model.position_embedding.position_embeddings.shape == (65, 16)
    # The class token's row and the blocks come from the pretrained model.
    old, new = values(pretrained), values(model)
    assert np.array_equal(old["backbone/position_embedding/position_embeddings"][0],
                          new["backbone/position_embedding/position_embeddings"][0])
    assert np.array_equal(old["backbone/encoder_block_2/feed_forward/output/kernel"],
                          new["backbone/encoder_block_2/feed_forward/output/kernel"])
    trainable = {relative_variable_path(v) for v in model.trainable_weights}
    assert not any(p.startswith(("backbone/patch_embedding", "backbone/encoder_block_0/"))
                   for p in trainable)
    multipliers = model.optimizer.learning_rate_multipliers
    assert multipliers["backbone/encoder_block_1/self_attention/query/kernel"] == 0.25
    labels = np.eye(3, dtype="float32")[np.arange(8) % 3]
    history = model.fit(images(), labels, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_the_recipe_fine_tunes_in_the_runs_precision_with_the_dropout_asked(tmp_path):
    from zoo.recipes.settings import ViTFinetuneRecipe
    from zoo.recipes.vit import build_vit

    pretrained = small(num_classes=3, class_names=["a", "b", "c"])  # float32, dropout 0
    pretrained.save(tmp_path / "pre.keras")
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # as `--precision` sets it
    try:
        recipe = ViTFinetuneRecipe(model=str(tmp_path / "pre.keras"), image_size=16,
                                   dropout=0.2, layer_decay=1.0, epochs=1)
        model = build_vit(recipe, ["a", "b", "c"], steps_per_epoch=4)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert model.dropout == 0.2
    assert model.encoder_blocks[1].compute_dtype == "bfloat16"
    old, new = values(pretrained), values(model)
    assert old.keys() == new.keys()
    for path in old:
        np.testing.assert_array_equal(old[path], new[path])


def test_a_translator_fine_tunes_in_the_runs_precision_with_the_dropout_asked(tmp_path):
    from zoo.recipes.settings import TranslatorFinetuneRecipe
    from zoo.recipes.translator import build_translator

    shipped = zoo.load("translator-multi30k-en-de")  # float32, dropout 0.1
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # as `--precision` sets it
    try:
        recipe = TranslatorFinetuneRecipe(model="translator-multi30k-en-de", dropout=0.3)
        model = build_translator(recipe, shipped.tokenizer, shipped)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert model.dropout == 0.3 and model.tokenizer is shipped.tokenizer
    assert model.decoder_blocks[0].compute_dtype == "bfloat16"
    assert len(model.weights) == len(shipped.weights)
    for old, new in zip(shipped.weights, model.weights):
        assert new.dtype == "float32"
        np.testing.assert_array_equal(old.numpy(), new.numpy())
    # In bfloat16 it predicts the float32 model's next tokens (logits close, not equal).
    ids = np.array(shipped.tokenizer.encode(["A dog runs in the snow."]), "int32")
    batch = {"source_ids": ids, "target_ids": ids}
    ours, reference = (np.asarray(m(batch), "float32") for m in (model, shipped))
    assert not np.array_equal(ours, reference)
    np.testing.assert_array_equal(ours.argmax(-1), reference.argmax(-1))

