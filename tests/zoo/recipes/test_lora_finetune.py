"""`zoo finetune vit|translator --lora-rank R`: the flags, their conflicts, and a LoRA run whose
final model.keras is an ordinary model and whose resumed run restores the factors."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
from PIL import Image

import zoo
import zoo.recipes.vit as vit_recipe
from zoo.cli.main import main
from zoo.models.lora import lora_layers
from zoo.models.vit.model import VisionTransformer
from zoo.recipes.settings import TranslatorFinetuneRecipe, ViTFinetuneRecipe, ViTRecipe
from zoo.training.image_data import train_validation_split
from zoo.training.optimizers import relative_variable_path

TINY = dict(image_size=16, patch_size=4, num_classes=3, hidden_dim=16, num_layers=2,
            num_heads=4, intermediate_dim=32, class_names=["x", "y", "z"])


# ------------------------------------------------------------------ flags and conflicts
@pytest.mark.parametrize("task, flags, message", [
    ("vit", ["--lora-rank", "0"],
     "argument --lora-rank: must be a positive int up to 2147483647; got 0"),
    ("vit", ["--lora-rank", "-1"],
     "argument --lora-rank: must be a positive int up to 2147483647; got -1"),
    ("vit", ["--lora-rank", "2.5"], "argument --lora-rank: invalid int value: '2.5'"),
    ("translator", ["--lora-rank", "0"],
     "argument --lora-rank: must be a positive int up to 2147483647; got 0"),
    ("translator", ["--lora-rank", "4", "--lora-alpha", "0"],
     "argument --lora-alpha: must be a positive number up to 10000; got 0.0"),
])
def test_a_bad_lora_flag_is_refused_as_the_command_line_is_read(tmp_path, capsys, task, flags,
                                                                 message):
    with pytest.raises(SystemExit) as exit_:
        main(["finetune", task, *flags, "--output", str(tmp_path / "run")])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("recipe, message", [
    (ViTFinetuneRecipe(lora_rank=4, freeze_blocks=1), "--freeze-blocks does not combine with "
                                                      "--lora-rank"),
    (ViTRecipe(lora_rank=4), "--lora-rank needs --model"),
    (ViTFinetuneRecipe(lora_alpha=8.0), "--lora-alpha needs --lora-rank"),
    (ViTFinetuneRecipe(lora_rank=True),
     "lora_rank must be a positive int up to 2147483647; got True"),
    (ViTFinetuneRecipe(lora_rank=2.5),
     "lora_rank must be a positive int up to 2147483647; got 2.5"),
    (TranslatorFinetuneRecipe(model=None, lora_rank=4), "--lora-rank needs --model"),
])
def test_lora_settings_that_do_not_fit_are_one_line(recipe, message):
    from zoo.recipes.translator import check_recipe as check_translator

    check = check_translator if isinstance(recipe, TranslatorFinetuneRecipe) else (
        vit_recipe.check_recipe)
    with pytest.raises(zoo.UserError, match=message) as error:
        check(recipe)
    assert "\n" not in str(error.value)


# ------------------------------------------------------------------ a LoRA run
def image_folder(root, per_class: int = 10):
    """Two classes of 16 x 16 PNGs: dark and bright noise."""
    rng = np.random.default_rng(0)
    for index, name in enumerate(["dark", "bright"]):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 128, (16, 16, 3)) + 127 * index
            Image.fromarray(pixels.astype("uint8")).save(root / name / f"{i}.png")
    return root


def weights_by_path(model: keras.Model) -> dict[str, np.ndarray]:
    return {relative_variable_path(v): np.array(v.numpy()) for v in model.weights}


@pytest.mark.slow  # two short runs
def test_a_lora_run_writes_an_ordinary_model_and_resumes_its_factors(tmp_path, monkeypatch):
    keras.utils.set_random_seed(0)
    pretrained = VisionTransformer(**TINY, head_initializer="glorot_uniform")
    pretrained.save(tmp_path / "pre.keras")
    settings = dict(output=str(tmp_path / "run"), data=str(image_folder(tmp_path / "data")),
                    model=str(tmp_path / "pre.keras"), image_size=16, lora_rank=4,
                    lora_alpha=8.0, batch_size=8, validation_size=4, warmup_epochs=0,
                    augment=False, learning_rate=1e-2)
    metrics = vit_recipe.train_vit(ViTFinetuneRecipe(epochs=1, **settings))

    # Trained: rank 4 on the query and value kernels (16, 4, 4) of 2 blocks, and a new head.
    assert metrics["trainable_parameters"] == 2 * 2 * 4 * (16 * 4 + 4) + (16 * 2 + 2)
    final = zoo.load(str(tmp_path / "run" / "model.keras"))
    assert lora_layers(final) == [] and not any("lora" in v.path for v in final.weights)
    assert metrics["parameters"] == final.count_params() == pretrained.count_params() - 17
    old, new = weights_by_path(pretrained), weights_by_path(final)
    for path, value in new.items():
        if path.startswith("head/"):
            continue
        adapted = path.endswith(("/query/kernel", "/value/kernel"))
        assert np.array_equal(value, old[path]) != adapted, path
    # The merged model scores the validation images as the adapted one did.
    images, labels, _ = vit_recipe.load_images(ViTFinetuneRecipe(**settings))
    _, valid = train_validation_split(len(images), 4, seed=0, labels=labels)
    top1 = np.mean(np.argmax(final.predict(images[valid], verbose=0), -1) == labels[valid])
    assert top1 == metrics["validation"]["top1"]

    # Resumed: the factors and the frozen kernels come back as the checkpoint holds them.
    saved = np.load(tmp_path / "run" / "checkpoints" / "epoch-0001" / "lora.npz")
    restored = {}
    resume = vit_recipe.resume

    def recording_resume(model, out, *args, **kwargs):
        epoch = resume(model, out, *args, **kwargs)
        restored.update(weights_by_path(model))
        return epoch

    monkeypatch.setattr(vit_recipe, "resume", recording_resume)
    metrics = vit_recipe.train_vit(ViTFinetuneRecipe(epochs=2, force=True, **settings))
    assert metrics["epochs_this_run"] == 1
    query = "backbone/encoder_block_0/self_attention/query/"
    np.testing.assert_array_equal(restored[query + "kernel"], old[query + "kernel"])
    np.testing.assert_array_equal(restored[query + "lora_kernel_a"], saved["v00001"])
    np.testing.assert_array_equal(restored[query + "lora_kernel_b"], saved["v00002"])
    assert np.abs(saved["v00002"]).max() > 0
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["epochs_this_run"] == 1


@pytest.mark.slow  # a short run with two evaluations
def test_a_lora_translator_run_trains_the_factors_alone_and_writes_them_merged(tmp_path):
    from zoo.models.translator.model import Translator
    from zoo.recipes.translator import train_translator
    from zoo.text.tokenizer import SubwordTokenizer

    english = [f"the {a} {b} runs" for a in ("dog", "cat", "man") for b in ("fast", "slow")]
    german = [f"der {a} {b} rennt" for a in ("hund", "katze", "mann")
              for b in ("schnell", "langsam")]
    for name, lines in (("en", english), ("de", german)):
        (tmp_path / f"pairs.{name}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = SubwordTokenizer.train(english + german, vocabulary_size=40)
    keras.utils.set_random_seed(0)
    pretrained = Translator(vocabulary_size=40, hidden_dim=16, num_encoder_layers=1,
                            num_decoder_layers=1, num_heads=4, intermediate_dim=32,
                            max_source_length=16, max_target_length=16, tokenizer=tokenizer)
    pretrained.ensure_built()
    pretrained.save(tmp_path / "pre.keras")
    files = {"source": "pairs.en", "target": "pairs.de", "validation_source": "pairs.en",
             "validation_target": "pairs.de"}
    metrics = train_translator(TranslatorFinetuneRecipe(
        output=str(tmp_path / "run"), model=str(tmp_path / "pre.keras"), lora_rank=2,
        epochs=1, batch_size=4, beam_size=1, learning_rate=1e-2, warmup_steps=1,
        **{key: str(tmp_path / value) for key, value in files.items()}))

    # Query and value kernels (16, 4, 4) of 3 attention layers; nothing else.
    assert metrics["trainable_parameters"] == 3 * 2 * 2 * (16 * 4 + 4)
    final = zoo.load(str(tmp_path / "run" / "model.keras"))
    assert lora_layers(final) == [] and len(final.weights) == len(pretrained.weights)
    assert final.tokenizer.vocabulary_size == 40
    for old, new in zip(pretrained.weights, final.weights, strict=True):  # paths may differ
        adapted = new.path.endswith(("/query/kernel", "/value/kernel"))
        assert np.array_equal(old.numpy(), new.numpy()) != adapted, new.path
