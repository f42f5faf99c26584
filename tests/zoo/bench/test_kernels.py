"""`zoo.bench.kernels`: which kernels a bfloat16 product takes, read off oneDNN's verbose log
and XLA's HLO; on a CPU with native bfloat16, TensorFlow's oneDNN runs a bfloat16 product on
its AMX or AVX-512 BF16 kernels."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from zoo.bench.kernels import MARK, hlo_dots, onednn_products
from zoo.training.cpu_features import cpu_flags, has_native_bfloat16

# Lines as oneDNN 3 writes them (from a mixed_bfloat16 ViT step on a Xeon with AMX).
LOG = f"""onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src:f32::blocked:abcd::f0 wei:f32::blocked:abdc::f0 dst:f32::blocked:abcd::f0,attr-scratchpad:user,,16x2x65x32:16x2x32x65,0.47
{MARK}
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,src:bf16::blocked:abcd::f0 wei:bf16::blocked:abcd::f0 dst:bf16::blocked:abcd::f0,attr-scratchpad:user,,16x2x65x65:16x2x65x32,0.21
onednn_verbose,v1,primitive,exec,cpu,inner_product,x64:gemm:jit,forward_training,src:bf16::blocked:ab::f0 wei:bf16::blocked:ba::f0 bia:bf16:a:blocked:a::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,mb1040ic64oc64,2.19
onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:f32::blocked:ab::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,64x64,0.01
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,src:bf16::blocked:abcd::f0 wei:bf16::blocked:abcd::f0 dst:bf16::blocked:abcd::f0,attr-scratchpad:user,,16x2x65x65:16x2x65x32,0.20
"""


def test_onednn_products_count_the_timed_steps_products_by_kernel_and_dtype():
    assert onednn_products(LOG) == {
        ("matmul", "brg_matmul:avx10_1_512_amx", "bf16", "bf16"): 2,
        ("inner_product", "x64:gemm:jit", "bf16", "bf16"): 1}  # the warm-up's and reorders not


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_hlo_dots_read_the_operand_dtype_before_and_after_xla():
    import jax
    import jax.numpy as jnp

    a = jnp.ones((32, 32), jnp.bfloat16)
    lowered = jax.jit(jnp.matmul).lower(a, a)
    assert hlo_dots(lowered.as_text(dialect="hlo")) == {("bf16", "bf16"): 1}
    # Compiled for a CPU, XLA may keep the product in bfloat16 or convert it to float32:
    # one dot either way, its operands of one dtype.
    compiled = hlo_dots(lowered.compile().as_text())
    assert sum(compiled.values()) == 1 and list(compiled)[0][1] in ("bf16", "f32")


@pytest.mark.slow
@pytest.mark.skipif(not has_native_bfloat16(), reason="the CPU has no native bfloat16 "
                    "(avx512_bf16 or amx_bf16): oneDNN emulates it")
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="tensorflow not installed")
def test_tensorflow_runs_a_bfloat16_product_on_the_cpus_bfloat16_kernels():
    code = ("from zoo.runtime import use_onednn; use_onednn()\n"
            "import tensorflow as tf\n"
            "a = tf.cast(tf.random.normal((256, 256)), tf.bfloat16)\n"
            f"print({MARK!r}, flush=True)\n"
            "tf.linalg.matmul(a, a).numpy()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, ONEDNN_VERBOSE="1",
                                                TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-2000:]
    products = onednn_products(done.stdout + done.stderr)
    bfloat16 = [kernel for (_, kernel, source, _), _ in products.items() if source == "bf16"]
    assert bfloat16, products
    expected = "amx" if "amx_bf16" in (cpu_flags() or ()) else "bf16"
    assert all(expected in kernel for kernel in bfloat16), products
