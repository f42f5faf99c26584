"""`zoo.bench.step_products`: a traced step's matrix products, counted and rebuilt.

The count from a traced graph is checked against `zoo.bench.flops`, which counts from the
model's shapes (and is itself checked against PyTorch's `FlopCounterMode`)."""

from __future__ import annotations

import keras
import pytest

from zoo.bench.flops import vit_forward_flops
from zoo.bench.step_products import product_flops

tensorflow_only = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                     reason="reads TensorFlow graphs")


@pytest.mark.parametrize("signature, expected", [
    (("MatMul", ((6, 4), (4, 5)), "float32",
      (("transpose_a", False), ("transpose_b", False))), 2 * 6 * 4 * 5),
    (("MatMul", ((4, 6), (5, 4)), "bfloat16",
      (("transpose_a", True), ("transpose_b", True))), 2 * 6 * 4 * 5),
    # a broadcast batch of 2 x 3, and x adjoint: (7, 8) rows by 8 shared
    (("BatchMatMulV2", ((2, 3, 8, 7), (1, 3, 8, 9)), "float32",
      (("adj_x", True), ("adj_y", False))), 2 * 6 * 7 * 8 * 9),
    (("Einsum", ((2, 5, 4), (4, 3, 6)), "float32", (("equation", "btd,dhk->bthk"),)),
     2 * 2 * 5 * 4 * 3 * 6),
    # a 4 x 4, stride-4 patch embedding: 8 x 8 output pixels per image
    (("Conv2D", ((2, 32, 32, 3), (4, 4, 3, 16)), "float32",
      (("data_format", "NHWC"), ("padding", "VALID"), ("strides", (1, 4, 4, 1)))),
     2 * 2 * 64 * 4 * 4 * 3 * 16),
    # 3 x 3 kernels, stride 2: 7 x 7 output pixels when VALID, 8 x 8 when SAME
    (("Conv2D", ((1, 16, 16, 2), (3, 3, 2, 5)), "float32",
      (("data_format", "NHWC"), ("padding", "VALID"), ("strides", (1, 2, 2, 1)))),
     2 * 49 * 3 * 3 * 2 * 5),
    (("Conv2D", ((1, 16, 16, 2), (3, 3, 2, 5)), "float32",
      (("data_format", "NHWC"), ("padding", "SAME"), ("strides", (1, 2, 2, 1)))),
     2 * 64 * 3 * 3 * 2 * 5),
    (("Conv2DBackpropFilter", ((2, 32, 32, 3), (4, 4, 3, 16), (2, 8, 8, 16)), "float32",
      (("data_format", "NHWC"), ("padding", "VALID"), ("strides", (1, 4, 4, 1)))),
     2 * 2 * 64 * 4 * 4 * 3 * 16),
])
def test_each_product_counts_two_flops_per_multiply_add(signature, expected):
    assert product_flops(signature) == expected


def _small_vit():
    from zoo.models.vit.model import VisionTransformer

    shape = dict(image_size=16, patch_size=4, num_layers=2, hidden_dim=24, num_heads=2,
                 intermediate_dim=40, num_classes=3)
    return shape, VisionTransformer(**shape)


@tensorflow_only
@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_a_traced_vit_step_has_the_products_its_shapes_count(precision):
    import tensorflow as tf

    from zoo.bench.step_products import graph_products

    images = tf.random.uniform((3, 16, 16, 3), 0.0, 255.0)
    with _global_policy(precision):
        shape, model = _small_vit()
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function(autograph=False)
        def forward(x):
            return model(x, training=False)

        @tf.function(autograph=False)
        def train(x):
            with tf.GradientTape() as tape:
                value = loss(tf.zeros((3,), tf.int32), model(x, training=True))
            return tape.gradient(value, model.trainable_variables)

        forward_products = graph_products(forward, images)
        train_products = graph_products(train, images)
    per_image = vit_forward_flops(shape)
    patches = (16 // 4) ** 2
    embedding = 2 * patches * 4 * 4 * 3 * 24
    assert sum(map(product_flops, forward_products)) == 3 * per_image
    # Backward: two products for each forward one, but no gradient of the input images.
    assert sum(map(product_flops, train_products)) == 3 * (3 * per_image - embedding)
    dense = [s for s in train_products if s[0] == "MatMul" and s[1][0] == (3 * 17, 24)]
    assert len(dense) >= 2 * 4 and {s[2] for s in dense} == {  # the blocks: bfloat16
        "float32" if precision == "float32" else "bfloat16"}


class _global_policy:
    """Keras' global dtype policy set for a `with` block, and restored after it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.before = keras.config.dtype_policy()
        keras.config.set_dtype_policy(self.name)

    def __exit__(self, *_: object) -> None:
        keras.config.set_dtype_policy(self.before)


@tensorflow_only
def test_the_rebuilt_products_trace_to_the_same_signatures():
    import tensorflow as tf

    from zoo.bench.step_products import graph_products, rebuilt

    @tf.function(autograph=False)
    def step(a, b, images, kernel):
        return (tf.matmul(a, b, transpose_b=True),
                tf.matmul(tf.cast(a, tf.bfloat16)[None], tf.cast(b, tf.bfloat16)[None],
                          adjoint_b=True),
                tf.nn.conv2d(images, kernel, strides=2, padding="VALID"))

    args = (tf.ones((6, 4)), tf.ones((5, 4)), tf.ones((2, 8, 8, 3)), tf.ones((2, 2, 3, 7)))
    signatures = graph_products(step, *args)
    assert [s[0] for s in signatures] == ["MatMul", "BatchMatMulV2", "Conv2D"]
    assert signatures[1][2] == "bfloat16"
    function, operands = rebuilt(signatures)
    assert graph_products(function, *operands) == signatures
    assert len(function(*operands)) == 3


@tensorflow_only
def test_the_other_ops_traffic_counts_each_ops_inputs_and_outputs_and_no_views():
    import tensorflow as tf

    from zoo.bench.step_products import graph_traffic

    @tf.function(autograph=False)
    def step(x, w):
        tf.exp(x)  # nothing the outputs need: TensorFlow never runs it
        y = tf.matmul(x, w)  # a product: counted by graph_products, not here
        scaled = tf.cast(tf.nn.relu(y), tf.bfloat16) * tf.constant(2.0, tf.bfloat16)
        return tf.reshape(scaled, [-1]), tf.reduce_sum(y)

    traffic = graph_traffic(step, tf.ones((8, 4)), tf.ones((4, 6)))
    out = 8 * 6  # the product's elements
    assert traffic["Relu"] == 2 * out * 4                 # float32 in and out
    assert traffic["Cast"] == out * 4 + out * 2           # float32 in, bfloat16 out
    assert traffic["Mul"] == out * 2 + 2 + out * 2        # a bfloat16 scalar operand
    assert traffic["Sum"] == out * 4 + 2 * 4 + 4          # the axes (int32) and the sum
    assert "MatMul" not in traffic and "Reshape" not in traffic and "Exp" not in traffic
