"""The matrix products of a traced TensorFlow step, read from its graph and rebuilt alone.

`benchmarks/product_bound.py` times a step's products with nothing between them, to bound
the fraction of the host's peak the step itself can reach: `graph_products` lists the
products of a `tf.function`'s graph (with their operand shapes, dtypes and transposes),
`product_flops` counts each from its shapes (the count `zoo.bench.flops` makes from a
model's shapes, made here from what TensorFlow traced), and `rebuilt` runs them again on
random operands; `graph_traffic` counts the bytes the step's other ops read and write.
This module imports TensorFlow only inside the functions that need it.
"""

from __future__ import annotations

import math
from typing import Any

PRODUCTS = ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv2D",
            "Conv2DBackpropFilter")
# Ops that move no data of their own: views of a tensor, variables' reads, shapes, constants.
VIEWS = ("Reshape", "Identity", "IdentityN", "ReadVariableOp", "Const", "Shape", "NoOp",
         "ExpandDims", "Squeeze", "StopGradient", "Placeholder")


def product_signature(op: Any) -> tuple:
    """`(type, operand shapes, dtype, attributes)` of one product op of a traced graph: all
    that rebuilding it on random operands needs."""
    shapes = tuple(tuple(int(d) for d in t.shape) for t in op.inputs)
    attrs: dict[str, Any] = {}
    if op.type == "MatMul":
        attrs = {"transpose_a": op.get_attr("transpose_a"),
                 "transpose_b": op.get_attr("transpose_b")}
    elif op.type.startswith("BatchMatMul"):
        attrs = {"adj_x": op.get_attr("adj_x"), "adj_y": op.get_attr("adj_y")}
    elif op.type == "Einsum":
        attrs = {"equation": op.get_attr("equation").decode()}
    else:  # the convolutions
        attrs = {"strides": tuple(op.get_attr("strides")),
                 "padding": op.get_attr("padding").decode(),
                 "data_format": op.get_attr("data_format").decode()}
        if op.type == "Conv2DBackpropFilter":  # its second operand is the filter's shape
            shapes = (shapes[0], tuple(int(d) for d in op.outputs[0].shape), shapes[2])
    return op.type, shapes, op.inputs[0].dtype.name, tuple(sorted(attrs.items()))


def product_flops(signature: tuple) -> int:
    """Multiply-adds times two of one product, from its signature."""
    kind, shapes, _, attrs = signature
    attrs = dict(attrs)
    if kind == "MatMul":
        (a, b) = shapes
        m, k = (a[1], a[0]) if attrs["transpose_a"] else a
        n = b[0] if attrs["transpose_b"] else b[1]
        return 2 * m * k * n
    if kind.startswith("BatchMatMul"):
        x, y = shapes
        batch = max(math.prod(x[:-2]), math.prod(y[:-2]))
        m, k = (x[-1], x[-2]) if attrs["adj_x"] else (x[-2], x[-1])
        n = y[-2] if attrs["adj_y"] else y[-1]
        return 2 * batch * m * k * n
    if kind == "Einsum":  # every distinct index once: the loop nest's size
        inputs = attrs["equation"].split("->")[0].split(",")
        sizes = {letter: size for spec, shape in zip(inputs, shapes)
                 for letter, size in zip(spec, shape)}
        return 2 * math.prod(sizes.values())
    if kind == "Conv2D":  # NHWC: output pixels times the filter's size
        images, kernel = shapes
        strides = attrs["strides"]
        if attrs["padding"] == "SAME":
            rows, cols = (-(-images[i] // strides[i]) for i in (1, 2))
        else:  # VALID
            rows, cols = ((images[i] - kernel[i - 1]) // strides[i] + 1 for i in (1, 2))
        return 2 * images[0] * rows * cols * math.prod(kernel)
    images, kernel, gradient = shapes  # Conv2DBackpropFilter
    return 2 * math.prod(gradient[:3]) * math.prod(kernel)


def rebuilt(signatures: list[tuple]) -> tuple[Any, list[Any]]:
    """`(function, operands)`: one `tf.function` running every product of `signatures` on
    random operands in the traced dtypes; `function(*operands)` runs them all."""
    import tensorflow as tf

    rng = tf.random.Generator.from_seed(0)
    operands, layout = [], []
    for kind, shapes, dtype, attrs in signatures:
        start = len(operands)
        for number, shape in enumerate(shapes):
            if kind == "Conv2DBackpropFilter" and number == 1:
                operands.append(tf.constant(shape, tf.int32))
            else:
                operands.append(tf.cast(rng.normal(shape), dtype))
        layout.append((kind, start, len(shapes), dict(attrs)))

    @tf.function(autograph=False)
    def products(*tensors: Any) -> list[Any]:
        outputs = []
        for kind, start, count, attrs in layout:
            args = tensors[start:start + count]
            if kind == "MatMul":
                outputs.append(tf.raw_ops.MatMul(a=args[0], b=args[1], **attrs))
            elif kind.startswith("BatchMatMul"):
                outputs.append(tf.raw_ops.BatchMatMulV2(x=args[0], y=args[1], **attrs))
            elif kind == "Einsum":
                outputs.append(tf.einsum(attrs["equation"], *args))
            elif kind == "Conv2D":
                outputs.append(tf.raw_ops.Conv2D(input=args[0], filter=args[1], **attrs))
            else:
                outputs.append(tf.raw_ops.Conv2DBackpropFilter(
                    input=args[0], filter_sizes=args[1], out_backprop=args[2], **attrs))
        return [output[(0,) * len(output.shape)] for output in outputs]

    return products, operands


def needed_ops(function: Any, *args: Any) -> list[Any]:
    """The ops of the graph that the `tf.function` `function` traces for `args` that its
    outputs need (TensorFlow runs nothing else), in graph order."""
    concrete = function.get_concrete_function(*args)
    needed, todo = set(), [t.op for t in concrete.outputs]
    while todo:
        op = todo.pop()
        if op.name not in needed:
            needed.add(op.name)
            todo.extend([t.op for t in op.inputs] + list(op.control_inputs))
    return [op for op in concrete.graph.get_operations() if op.name in needed]


def graph_products(function: Any, *args: Any) -> list[tuple]:
    """The signatures (`product_signature`) of the matrix products in the graph that the
    `tf.function` `function` traces for `args` and that its outputs need, in graph order."""
    return [product_signature(op) for op in needed_ops(function, *args) if op.type in PRODUCTS]


def graph_traffic(function: Any, *args: Any) -> dict[str, int]:
    """`{op type: bytes}` that the ops outside the matrix products of `function`'s traced
    graph (those its outputs need) read and write: each op's inputs and outputs of known
    shape, once each; views and bookkeeping (`VIEWS`) move nothing. A floor on the memory
    traffic of the step's other work, which no kernel can do with less (a fused one can)."""
    import math

    traffic: dict[str, int] = {}
    for op in needed_ops(function, *args):
        if op.type in PRODUCTS or op.type in VIEWS:
            continue
        tensors = [t for t in list(op.inputs) + list(op.outputs)
                   if t.dtype.name != "resource" and t.shape.is_fully_defined()]
        moved = sum(math.prod(t.shape) * t.dtype.size for t in tensors)
        traffic[op.type] = traffic.get(op.type, 0) + moved
    return traffic
