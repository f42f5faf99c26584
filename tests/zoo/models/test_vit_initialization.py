"""`--initialization pytorch`: a built ViT's weights redrawn as PyTorch's layer defaults,
checked against PyTorch's own `nn.Linear` and `nn.Conv2d`."""

import numpy as np
import pytest

from zoo.models.vit.initialization import fan_in, pytorch_initialization
from zoo.models.vit.model import VisionTransformer


def built() -> VisionTransformer:
    return VisionTransformer(image_size=32, patch_size=4, num_classes=10, hidden_dim=96,
                             num_layers=2, num_heads=4, intermediate_dim=192)


def torch_bound(kind: str, fan: int) -> float:
    """The largest |value| of PyTorch's default draw for a layer whose units see `fan`
    inputs (a wide layer, so the sample reaches its bound)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    if kind == "linear":
        layer = torch.nn.Linear(fan, 4096)
    else:  # a 4 x 4 convolution of fan / 16 channels
        layer = torch.nn.Conv2d(fan // 16, 4096, 4)
    return max(float(layer.weight.detach().abs().max()), float(layer.bias.detach().abs().max()))


def test_every_kernel_and_bias_is_drawn_as_pytorch_draws_a_layer_of_its_fan_in():
    model = built()
    pytorch_initialization(model, seed=0)
    weights = {v.path: np.asarray(v) for v in model.weights}
    checked = 0
    for path, value in weights.items():
        layer, name = path.rsplit("/", 1)
        if name != "kernel":
            continue
        fan = fan_in(layer, value.shape)
        expected = torch_bound("conv" if value.ndim == 4 else "linear", fan)
        for drawn in (value, weights[f"{layer}/bias"]):
            assert np.abs(drawn).max() <= expected * 1.001, (path, fan)
        # Uniform: the kernel's spread is the bound's / sqrt(3).
        assert value.std() == pytest.approx(expected / np.sqrt(3), rel=0.15), path
        checked += 1
    assert checked == 1 + 2 * 6 + 1  # patches, 2 blocks x (q, k, v, output, 2 MLP), head
    # The per-head projections see the width, the attention output every head's values.
    assert fan_in("a/self_attention/query/kernel", (96, 4, 24)) == 96
    assert fan_in("a/self_attention/attention_output/kernel", (4, 24, 96)) == 96


def test_tables_are_standard_normal_and_norms_keep_ones_and_zeros():
    model = built()
    pytorch_initialization(model, seed=0)
    for variable in model.weights:
        value, name = np.asarray(variable), variable.path.rsplit("/", 1)[1]
        if name in ("position_embeddings", "class_token"):
            assert abs(value.std() - 1.0) < 0.1 and abs(value.mean()) < 0.1, variable.path
        elif name in ("gamma", "scale"):
            assert np.all(value == 1.0), variable.path
        elif name == "beta":
            assert np.all(value == 0.0), variable.path
    assert np.abs(np.asarray(model.head.kernel)).max() > 0  # Keras' zero head is redrawn


def test_the_draw_follows_the_seed():
    first, second, other = built(), built(), built()
    for model, seed in ((first, 1), (second, 1), (other, 2)):
        pytorch_initialization(model, seed=seed)
    for a, b, c in zip(first.weights, second.weights, other.weights):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(first.head.kernel), np.asarray(other.head.kernel))


def test_the_recipe_draws_a_new_model_as_it_is_told(tmp_path):
    from zoo.training.errors import UserError
    from zoo.recipes.checks import check_fields
    from zoo.recipes.settings import ViTRecipe
    from zoo.recipes.vit import build_vit

    settings = dict(architecture="vit-cifar-tiny", image_size=32, epochs=1, seed=3)
    keras_drawn = build_vit(ViTRecipe(**settings), ["a", "b"], steps_per_epoch=2)
    torch_drawn = build_vit(ViTRecipe(**settings, initialization="pytorch"), ["a", "b"],
                            steps_per_epoch=2)
    assert not np.asarray(keras_drawn.head.kernel).any()
    assert np.asarray(torch_drawn.head.bias).any()
    with pytest.raises(UserError, match="initialization"):
        check_fields(ViTRecipe(initialization="torch"))
