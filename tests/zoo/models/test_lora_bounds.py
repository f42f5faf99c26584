"""LoRA settings are bounded by what the model can use: a non-finite or absurd alpha, a rank
above a kernel's smaller side, and fine-tuning a quantized model are refused in one line
before any factor is made."""

from __future__ import annotations

import math

import keras
import pytest

from zoo.training.errors import UserError
from zoo.models.lora import MAX_ALPHA
from zoo.models.quantization import quantize_model, refuse_quantized_training
from zoo.models.vit.model import VisionTransformer

# D = 16, H = 4 heads of K = 4: the query kernel (16, 4, 4) is a (64, 4) matrix, rank <= 4.
VIT = dict(image_size=16, patch_size=4, num_classes=5, hidden_dim=16, num_layers=1,
           num_heads=4, intermediate_dim=32)


def vit() -> VisionTransformer:
    keras.utils.set_random_seed(0)
    return VisionTransformer(**VIT)


BAD = [
    # (rank, alpha, what the one line says)
    (4, math.inf, "LoRA alpha must be a positive number up to"),
    (4, -math.inf, "LoRA alpha must be a positive number up to"),
    (4, math.nan, "LoRA alpha must be a positive number up to"),
    (4, MAX_ALPHA * 10, "LoRA alpha must be a positive number up to"),
    (4, 0.0, "LoRA alpha must be a positive number up to"),
    (5, None, r"LoRA rank must be at most 4 .*got 5"),
    (10 ** 9, None, r"LoRA rank must be at most 4 .*got 1000000000"),
    (0, None, "rank"),
    (-1, None, "rank"),
]


@pytest.mark.parametrize("rank,alpha,message", BAD)
def test_unusable_lora_settings_are_one_line_and_change_nothing(rank, alpha, message):
    model = vit()
    before = [v.path for v in model.weights]
    with pytest.raises(UserError, match=message) as caught:
        model.enable_lora(rank, alpha=alpha)
    assert "\n" not in str(caught.value)
    assert [v.path for v in model.weights] == before  # no factor was added
    assert model.lora_layers() == []


def test_the_largest_usable_rank_and_alpha_are_taken():
    model = vit().enable_lora(4, alpha=MAX_ALPHA)
    assert {layer.lora_rank for layer in model.lora_layers()} == {4}


def test_a_quantized_model_is_refused_for_fine_tuning_in_one_line():
    model = quantize_model(vit())
    with pytest.raises(UserError, match=r"^--model m.keras is quantized \(int8\)"):
        refuse_quantized_training(model, "m.keras")
    refuse_quantized_training(vit(), "float.keras")  # a float model passes
