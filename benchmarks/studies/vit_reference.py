"""A plain-Keras reference trainer for the CIFAR-10 ViT, independent of the zoo's training code.

Issue 35: `zoo train vit` collapses at the published learning rate (1e-3, Adam, batch 128) of
the 6.3M-parameter CIFAR ViT and trains slowly at 3e-4. This script trains the same kind of
model with nothing of `training/` or `zoo/recipes/vit.py`: its own data loading (PIL into
NumPy), crop-and-flip in NumPy, a ViT written here with Keras layers (or, with
`--model zoo`, the zoo's `VisionTransformer` class, trained here), Keras' Adam or AdamW, a
warm-up + cosine schedule written here and `model.fit`. Each setting that differs between
the zoo's recipe and the published one is a flag, so that one run changes one thing:

    --init glorot        Keras' Glorot-uniform Dense kernels, the patch projection initialised
                         as the zoo's 4x4 convolution is (fan-out counts the 16 kernel
                         positions), position table N(0, 0.02), class token and head zeros:
                         the zoo's initialisation.
    --embed-init lecun   only the patch projection changed: N(0, 1/fan_in), as big_vision.
    --table-init normal1 only the position table and class token changed: N(0, 1).
    --init torch         PyTorch's nn.Linear default, U(+-1/sqrt(fan_in)) for kernels and
                         biases (head included), position table and class token N(0, 1): the
                         published model's.
    --attention-scale head   logits q.k / sqrt(head size): the paper, timm, the zoo.
    --attention-scale width  logits q.k / sqrt(width): what the published model computes
                         (it divides by sqrt(384) whatever the number of heads), i.e. a
                         softmax temperature of sqrt(heads) over the usual one.
    --optimizer adam --weight-decay W   Adam with L2 (W * w added to every gradient, as
                         torch.optim.Adam's weight_decay): the published optimizer.
    --optimizer adamw --weight-decay W  Keras AdamW (decoupled, norms/biases/embeddings
                         excluded): the zoo's.
    --clipnorm C         clip the global gradient norm (the zoo: 1.0; published: none).

Every `--log-every` steps it prints (and writes to `--json`) the mean training loss and
accuracy over those steps, the learning rate, the global gradient norm on a fixed probe batch,
the update size of the attention's query/key kernels relative to their norm, and per block
the largest attention logit and the mean attention entropy on that probe batch (the signature
of attention-entropy collapse: logits grow, entropy falls to ~0, training accuracy drops).

Examples. The CPU proxy of issue 35 (width 384, 8 heads, MLP 384 as vit-cifar-small, but
4 blocks and 8 x 8 patches; 10,000 training images; 300 steps, 100 of warm-up to 1e-3, cosine
to 0; about 6 minutes each on 2 cores), the published model, then the zoo's conventions:

    P="--limit-per-class 1100 --patch 8 --depth 4 --steps 300 --warmup-steps 100 \\
       --final-lr 0 --log-every 25 --lr 1e-3"
    python benchmarks/studies/vit_reference.py $P --init torch --attention-scale width --heads 12 \\
        --mlp-final-gelu --pixels meanstd --optimizer adam --weight-decay 5e-5
    python benchmarks/studies/vit_reference.py $P --init glorot --attention-scale head --heads 8 \\
        --pixels pm1 --optimizer adamw --weight-decay 0.05 --clipnorm 1.0 --dropout 0.1

On a GPU machine with JAX only, set KERAS_BACKEND=jax (the probe gradient norm is then not
measured) and use the full model: `--depth 7 --patch 4 --limit-per-class 5000
--validation-per-class 500`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tarfile
import time
from pathlib import Path

import numpy as np

MEAN = np.array([0.4914, 0.4822, 0.4465], "float32") * 255.0
STD = np.array([0.2470, 0.2435, 0.2616], "float32") * 255.0


# ----------------------------------------------------------------------------------- data
def load_cifar_folder(folder: Path, cache: Path | None) -> tuple[np.ndarray, np.ndarray, list]:
    """uint8 (N, 32, 32, 3) images and int labels of a folder of class folders (sorted class
    names), decoded with PIL; kept in `cache` (.npz) for the next run."""
    if cache is not None and cache.exists():
        data = np.load(cache)
        return data["images"], data["labels"], [str(c) for c in data["classes"]]
    from PIL import Image

    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    images, labels = [], []
    for index, name in enumerate(classes):
        for path in sorted((folder / name).iterdir()):
            with Image.open(path) as image:
                images.append(np.asarray(image.convert("RGB").resize((32, 32)), "uint8"))
            labels.append(index)
    images, labels = np.stack(images), np.asarray(labels, "int32")
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, images=images, labels=labels, classes=np.array(classes))
    return images, labels, classes


def resolve_data(data: str) -> Path:
    """A folder of class folders; a .tar.gz is extracted next to itself under ~/zoo-runs."""
    path = Path(data).expanduser()
    if path.is_dir():
        sub = [p for p in path.iterdir() if p.is_dir()]
        return sub[0] if len(sub) == 1 else path
    target = Path("~/zoo-runs/cifar").expanduser()
    if not (target / "train").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(path) as archive:
            archive.extractall(target, filter="data")
    return target / "train"


def split(labels: np.ndarray, per_class: int | None, validation_per_class: int, seed: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation rows: `validation_per_class` of each class held out, at most
    `per_class` of each class in all."""
    rng = np.random.default_rng(seed)
    train, valid = [], []
    for c in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == c))
        if per_class:
            rows = rows[:per_class]
        valid.extend(rows[:validation_per_class])
        train.extend(rows[validation_per_class:])
    return np.asarray(train), np.asarray(valid)


def crop_flip(images: np.ndarray, rng: np.random.Generator, padding: int = 4) -> np.ndarray:
    """Zero-padded random crop and horizontal flip of a uint8 batch, per image (as
    torchvision's RandomCrop(32, padding=4) and RandomHorizontalFlip)."""
    n, h, w, _ = images.shape
    padded = np.pad(images, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    top = rng.integers(0, 2 * padding + 1, n)
    left = rng.integers(0, 2 * padding + 1, n)
    rows = top[:, None] + np.arange(h)[None]
    cols = left[:, None] + np.arange(w)[None]
    out = padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
    flip = rng.random(n) < 0.5
    out[flip] = out[flip, :, ::-1]
    return out


# ---------------------------------------------------------------------------------- model
def build_plain_vit(args, num_classes: int):
    """A pre-norm ViT of Keras layers: patches -> Dense, class token, positions, blocks,
    LayerNorm, head. `args.init`, `args.attention_scale`, `args.mlp_final_gelu` and
    `args.pixels` choose between the zoo's and the published model's conventions."""
    import keras
    from keras import ops

    width, heads, patch = args.width, args.heads, args.patch
    head_dim = width // heads
    scale = 1.0 / math.sqrt(head_dim if args.attention_scale == "head" else width)

    def torch_uniform(fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return keras.initializers.RandomUniform(-bound, bound)

    def dense(units, fan_in, name, kernel=None, activation=None):
        if args.init == "torch":
            return keras.layers.Dense(units, activation=activation, name=name,
                                      kernel_initializer=kernel or torch_uniform(fan_in),
                                      bias_initializer=torch_uniform(fan_in))
        return keras.layers.Dense(units, activation=activation, name=name,
                                  kernel_initializer=kernel or "glorot_uniform")

    class Block(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.norm1 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm1")
            self.q = dense(width, width, "q")
            self.k = dense(width, width, "k")
            self.v = dense(width, width, "v")
            self.o = dense(width, width, "o")
            self.norm2 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm2")
            self.fc1 = dense(args.mlp, width, "fc1", activation="gelu")
            self.fc2 = dense(width, args.mlp, "fc2",
                             activation="gelu" if args.mlp_final_gelu else None)
            self.drop = keras.layers.Dropout(args.dropout)

        def heads_of(self, x):
            b, t = ops.shape(x)[0], ops.shape(x)[1]
            return ops.transpose(ops.reshape(x, (b, t, heads, head_dim)), (0, 2, 1, 3))

        def logits(self, x):
            h = self.norm1(x)
            q, k = self.heads_of(self.q(h)), self.heads_of(self.k(h))
            return ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * scale

        def call(self, x, training=None):
            h = self.norm1(x)
            q, k, v = (self.heads_of(f(h)) for f in (self.q, self.k, self.v))
            weights = ops.softmax(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * scale, -1)
            context = ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))
            context = ops.reshape(context, (ops.shape(x)[0], ops.shape(x)[1], width))
            x = x + self.drop(self.o(context), training=training)
            h = self.drop(self.fc1(self.norm2(x)), training=training)
            return x + self.drop(self.fc2(h), training=training)

    class PlainViT(keras.Model):
        def __init__(self):
            super().__init__()
            fan_in = patch * patch * 3
            if args.init == "torch":
                table_init = keras.initializers.RandomNormal(stddev=1.0)
                token_init, head_kernel = table_init, None
                embed_kernel = None
            else:  # the zoo's: a Conv2D's Glorot (fan-out counts the kernel's positions)
                bound = math.sqrt(6.0 / (fan_in + patch * patch * width))
                embed_kernel = keras.initializers.RandomUniform(-bound, bound)
                table_init = keras.initializers.TruncatedNormal(stddev=0.02)
                token_init, head_kernel = "zeros", "zeros"
            if args.table_init == "normal1":
                table_init = token_init = keras.initializers.RandomNormal(stddev=1.0)
            elif args.table_init == "small":
                table_init = keras.initializers.TruncatedNormal(stddev=0.02)
                token_init = "zeros"
            if args.embed_init == "lecun":  # big_vision's patch projection: N(0, 1/fan_in)
                embed_kernel = keras.initializers.LecunNormal()
            elif args.embed_init == "torch":
                embed_kernel = torch_uniform(fan_in)
            elif args.embed_init == "conv-glorot":
                bound = math.sqrt(6.0 / (fan_in + patch * patch * width))
                embed_kernel = keras.initializers.RandomUniform(-bound, bound)
            self.embed = dense(width, fan_in, "patch_embedding", kernel=embed_kernel)
            self.tokens = (32 // patch) ** 2 + 1
            self.cls = self.add_weight(shape=(1, 1, width), initializer=token_init,
                                       name="class_token")
            self.pos = self.add_weight(shape=(1, self.tokens, width), initializer=table_init,
                                       name="position_embeddings")
            self.blocks = [Block(name=f"block_{i}") for i in range(args.depth)]
            self.norm = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")
            self.head = dense(num_classes, width, "head", kernel=head_kernel)
            self.drop = keras.layers.Dropout(args.dropout)

        def embed_tokens(self, images):
            x = ops.cast(images, "float32")
            if args.pixels == "meanstd":
                x = (x - MEAN) / STD
            else:
                x = x / 127.5 - 1.0
            b = ops.shape(x)[0]
            g = 32 // patch
            x = ops.reshape(x, (b, g, patch, g, patch, 3))
            x = ops.reshape(ops.transpose(x, (0, 1, 3, 2, 4, 5)), (b, g * g, patch * patch * 3))
            x = self.embed(x)
            cls = ops.broadcast_to(self.cls, (b, 1, width))
            return ops.concatenate([cls, x], axis=1) + self.pos

        def call(self, images, training=None):
            x = self.drop(self.embed_tokens(images), training=training)
            for block in self.blocks:
                x = block(x, training=training)
            return self.head(self.norm(x)[:, 0])

        def attention_logits(self, images):
            x = self.embed_tokens(images)
            found = []
            for block in self.blocks:
                found.append(block.logits(x))
                x = block(x, training=False)
            return found

    model = PlainViT()
    model(np.zeros((1, 32, 32, 3), "uint8"))
    return model


def build_zoo_vit(args, num_classes: int):
    """The zoo's `VisionTransformer` of the flags' shape (only the model class: it is trained
    by this script, not by the zoo's recipe)."""
    from zoo.models.vit.model import VisionTransformer

    overrides = {"dropout": args.dropout, "hidden_dim": args.width, "num_layers": args.depth,
                 "num_heads": args.heads, "intermediate_dim": args.mlp,
                 "patch_size": args.patch, "query_key_norm": args.query_key_norm}
    model = VisionTransformer.from_architecture(args.architecture, num_classes=num_classes,
                                                **overrides)
    if args.init == "torch":
        model(np.zeros((1, 32, 32, 3), "uint8"))
        reinit_like_torch(model, args.init_scope, args.seed)
    return model


def reinit_like_torch(model, scope: str, seed: int) -> None:
    """Redraws a built zoo `VisionTransformer`'s weights as PyTorch's defaults, in `scope`:
    every kernel and its bias U(+-1/sqrt(fan_in)), where fan_in is the inputs one output
    unit sees (the query/key/value kernels `(width, heads, head)`: width; the attention output
    `(heads, head, width)`: heads x head; a Dense `(in, out)`: in); the position table and class
    token N(0, 1). Norms keep ones and zeros. `scope`: "all", "blocks" (the encoder blocks'
    kernels and biases only) or "head" (the classifier only)."""
    from zoo.models.vit.initialization import fan_in, pytorch_initialization

    if scope == "all":  # what `zoo train vit --initialization pytorch` does
        pytorch_initialization(model, seed)
        return
    rng = np.random.default_rng(seed)
    kernels = {v.path.rsplit("/", 1)[0]: v for v in model.weights if v.path.endswith("/kernel")}
    for variable in model.weights:
        path, shape = variable.path, tuple(variable.shape)
        in_blocks, in_head = "/encoder_block_" in path, "/head/" in path
        if scope == "blocks" and not in_blocks or scope == "head" and not in_head:
            continue
        layer, name = path.rsplit("/", 1)
        if name in ("kernel", "bias") and layer in kernels:
            bound = 1.0 / math.sqrt(fan_in(layer, tuple(kernels[layer].shape)))
            variable.assign(rng.uniform(-bound, bound, shape).astype("float32"))
        elif name in ("class_token", "position_embeddings"):
            variable.assign(rng.normal(0.0, 1.0, shape).astype("float32"))


def zoo_attention_logits(model, images):
    """Per block, the `(batch, heads, T, T)` attention logits of a zoo `VisionTransformer`
    (recomputed from its layers: the model returns only the softmax)."""
    from keras import ops

    x = model._preprocess(ops.convert_to_tensor(images))
    x = model.patch_embedding(x)
    if model.class_token is not None:
        x = model.class_token(x)
    x = x + model.position_embedding(x)
    found = []
    for block in model.encoder_blocks:
        attention = block.self_attention
        h = block.self_attention_norm(x)
        q, k = attention._queries(h), attention._keys(h)  # (b, T, heads, d), normalised or not
        logits = ops.einsum("bthd,bshd->bhts", q, k) / math.sqrt(attention.key_dim)
        found.append(logits)
        x = block(x, training=False)
    return found


# ------------------------------------------------------------------------------ training
def make_schedule(peak: float, warmup: int, total: int, final: float):
    import keras
    from keras import ops

    class WarmupThenCosine(keras.optimizers.schedules.LearningRateSchedule):
        """Linear from peak/warmup at the first step to peak at step `warmup`, then half a
        cosine to `final` at step `total`."""

        def __call__(self, step):
            s = ops.cast(step, "float32") + 1.0
            warm = peak * s / max(warmup, 1)
            progress = ops.clip((s - warmup) / max(total - warmup, 1), 0.0, 1.0)
            cosine = final + 0.5 * (peak - final) * (1.0 + ops.cos(math.pi * progress))
            return ops.where(s <= warmup, warm, cosine)

        def get_config(self):
            return {}

    return WarmupThenCosine()


def make_optimizer(args, schedule, model):
    import keras

    clip = {"global_clipnorm": args.clipnorm} if args.clipnorm else {}
    if args.optimizer == "adamw":
        optimizer = keras.optimizers.AdamW(learning_rate=schedule,
                                           weight_decay=args.weight_decay, **clip)
        optimizer.exclude_from_weight_decay(var_list=[
            v for v in model.trainable_variables
            if any(k in v.path for k in ("norm", "bias", "position", "class_token"))])
        return optimizer

    class AdamL2(keras.optimizers.Adam):
        """Adam with `l2 * w` added to each gradient (torch.optim.Adam's weight_decay)."""

        def __init__(self, l2=0.0, **kwargs):
            super().__init__(**kwargs)
            self.l2 = l2

        def update_step(self, gradient, variable, learning_rate):
            if self.l2:
                gradient = gradient + self.l2 * variable
            super().update_step(gradient, variable, learning_rate)

    return AdamL2(l2=args.weight_decay, learning_rate=schedule, epsilon=1e-8, **clip)


def group_of(path: str) -> str | None:
    for key, group in (("query", "qk"), ("/q/", "qk"), ("key/", "qk"), ("/k/", "qk")):
        if key in path and "kernel" in path:
            return group
    return None


def zoo_optimizer(args, schedule, model):
    """`--trainer zoo`: the recipe's own optimizer and schedule (`zoo train vit`'s AdamW with
    no decay on norms, biases and embeddings; warm-up then cosine), in place of this
    script's."""
    from zoo.training.optimizers import adamw_no_decay_on_norms
    from zoo.training.schedules import WarmupCosine

    total = args.cosine_steps or args.steps
    return adamw_no_decay_on_norms(
        WarmupCosine(args.lr, total_steps=total, warmup_steps=args.warmup_steps),
        weight_decay=args.weight_decay, clipnorm=args.clipnorm)


def zoo_crop_flip(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`--trainer zoo`: the recipe's compiled crop and flip (no RandAugment)."""
    from zoo.training.augmentation import cifar_augmentation, compiled_augmentation

    if "augment" not in _ZOO_AUGMENTATION:
        _ZOO_AUGMENTATION["augment"] = compiled_augmentation(
            cifar_augmentation(32, rand_augment=False, seed=0))
    return np.asarray(_ZOO_AUGMENTATION["augment"](images)).astype("uint8")


_ZOO_AUGMENTATION: dict = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="~/zoo-runs/cifar/train",
                        help="folder of class folders, or the CIFAR-10 .tar.gz")
    parser.add_argument("--cache", default="~/zoo-runs/cifar/cifar10-train.npz",
                        help="decoded images are kept here ('' for none)")
    parser.add_argument("--limit-per-class", type=int, default=None)
    parser.add_argument("--validation-per-class", type=int, default=100)
    parser.add_argument("--model", choices=["plain", "zoo"], default="plain")
    parser.add_argument("--architecture", default="vit-cifar-small",
                        help="--model zoo: the architecture whose other settings (class token, "
                             "LayerNorm epsilon, ...) are kept; the shape comes from the flags "
                             "below")
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--depth", type=int, default=7)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--mlp", type=int, default=384)
    parser.add_argument("--patch", type=int, default=4)
    parser.add_argument("--init", choices=["glorot", "torch"], default="glorot")
    parser.add_argument("--init-scope", choices=["all", "blocks", "head"], default="all",
                        help="--model zoo --init torch: redraw all weights, the encoder "
                             "blocks' only, or the head's only")
    parser.add_argument("--embed-init", choices=["auto", "conv-glorot", "lecun", "torch"],
                        default="auto",
                        help="the patch projection's kernel alone: the zoo's Conv2D Glorot "
                             "(fan-out x patch^2), LeCun normal 1/sqrt(fan_in) (big_vision), "
                             "PyTorch's default; auto: as --init")
    parser.add_argument("--table-init", choices=["auto", "small", "normal1"], default="auto",
                        help="position table and class token alone: N(0, 0.02) and zeros (the "
                             "zoo), N(0, 1) (the published model); auto: as --init")
    parser.add_argument("--attention-scale", choices=["head", "width"], default="head")
    parser.add_argument("--trainer", choices=["script", "zoo"], default="script",
                        help="zoo: the zoo recipe's optimizer, schedule and crop-and-flip "
                             "(AdamW on kernels only, global clip) instead of this script's")
    parser.add_argument("--query-key-norm", action="store_true",
                        help="--model zoo: LayerNorm on queries and keys (ViT-22B)")
    parser.add_argument("--mlp-final-gelu", action="store_true",
                        help="GELU after the MLP's second layer too (the published model)")
    parser.add_argument("--pixels", choices=["pm1", "meanstd"], default="pm1")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--optimizer", choices=["adam", "adamw"], default="adam")
    parser.add_argument("--weight-decay", type=float, default=5e-5)
    parser.add_argument("--clipnorm", type=float, default=None)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--final-lr", type=float, default=1e-5)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--cosine-steps", type=int, default=None,
                        help="steps of the whole schedule (default --steps)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--no-augment", action="store_true")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--probe-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the log here")
    args = parser.parse_args()

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # before TensorFlow loads
    import keras
    from keras import ops

    keras.utils.set_random_seed(args.seed)
    started = time.time()
    cpu_started = time.process_time()
    images, labels, classes = load_cifar_folder(
        resolve_data(args.data), Path(args.cache).expanduser() if args.cache else None)
    train_rows, valid_rows = split(labels, args.limit_per_class, args.validation_per_class,
                                   args.seed)
    num_classes = len(classes)
    model = (build_zoo_vit if args.model == "zoo" else build_plain_vit)(args, num_classes)
    logits_of = zoo_attention_logits if args.model == "zoo" else (
        lambda m, x: m.attention_logits(x))
    total = args.cosine_steps or args.steps
    schedule = make_schedule(args.lr, args.warmup_steps, total, args.final_lr)
    optimizer = (zoo_optimizer if args.trainer == "zoo" else make_optimizer)(
        args, schedule, model)
    loss = keras.losses.CategoricalCrossentropy(from_logits=True,
                                                label_smoothing=args.label_smoothing)
    model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
    print(f"{args.model} ViT, {model.count_params():,} parameters; {len(train_rows)} training "
          f"and {len(valid_rows)} validation images", flush=True)

    rng = np.random.default_rng(args.seed)
    probe = images[train_rows[rng.choice(len(train_rows), args.probe_size, replace=False)]]
    probe_labels = np.eye(num_classes, dtype="float32")[labels[
        train_rows[rng.choice(len(train_rows), args.probe_size, replace=False)]]]

    class Batches(keras.utils.PyDataset):
        def __init__(self):
            super().__init__()
            self.order = rng.permutation(train_rows)
            self.position = 0

        def __len__(self):
            return args.log_every

        def __getitem__(self, index):
            if self.position + args.batch_size > len(self.order):
                self.order, self.position = rng.permutation(train_rows), 0
            rows = self.order[self.position:self.position + args.batch_size]
            self.position += args.batch_size
            augment = zoo_crop_flip if args.trainer == "zoo" else crop_flip
            x = images[rows] if args.no_augment else augment(images[rows], rng)
            return x.astype("float32"), np.eye(num_classes, dtype="float32")[labels[rows]]

    tracked = [v for v in model.trainable_variables if group_of(v.path)]
    log = {"args": vars(args), "parameters": int(model.count_params()), "steps": []}

    def grad_norm():
        if keras.backend.backend() != "tensorflow":
            return float("nan")  # measured on TensorFlow only
        import tensorflow as tf

        with tf.GradientTape() as tape:
            value = loss(probe_labels, model(probe.astype("float32"), training=False))
        grads = tape.gradient(value, model.trainable_variables)
        return float(tf.linalg.global_norm([g for g in grads if g is not None]))

    def attention_stats():
        found = []
        for logits in logits_of(model, probe.astype("float32")):
            logits = ops.convert_to_numpy(ops.cast(logits, "float32"))
            weights = np.exp(logits - logits.max(-1, keepdims=True))
            weights /= weights.sum(-1, keepdims=True)
            entropy = -(weights * np.log(weights + 1e-12)).sum(-1).mean()
            found.append((float(np.abs(logits).max()), float(entropy)))
        return found

    class Logger(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.previous = [np.asarray(v).copy() for v in tracked]

        def on_epoch_end(self, epoch, logs=None):
            step = (epoch + 1) * args.log_every
            now = [np.asarray(v) for v in tracked]
            change = math.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(now, self.previous)))
            norm = math.sqrt(sum(float((a ** 2).sum()) for a in now))
            self.previous = [a.copy() for a in now]
            stats = attention_stats()
            entry = {"step": step, "lr": float(schedule(step - 1)),
                     "loss": float(logs["loss"]), "accuracy": float(logs["accuracy"]),
                     "probe_grad_norm": grad_norm(),
                     "qk_update_per_step_relative": change / max(norm, 1e-12) / args.log_every,
                     "qk_norm": norm,
                     "max_logit": [s[0] for s in stats], "entropy": [s[1] for s in stats],
                     "cpu_s": round(time.process_time() - cpu_started, 1),
                     "wall_s": round(time.time() - started, 1)}
            log["steps"].append(entry)
            print(f"step {step:5d} lr {entry['lr']:.2e} loss {entry['loss']:.3f} "
                  f"acc {entry['accuracy']:.3f} |g| {entry['probe_grad_norm']:.2f} "
                  f"dqk {entry['qk_update_per_step_relative']:.1e} |qk| {norm:.1f} "
                  f"maxlogit {' '.join(f'{m:.0f}' for m in entry['max_logit'])} "
                  f"H {' '.join(f'{h:.2f}' for h in entry['entropy'])} "
                  f"({entry['wall_s']:.0f} s)", flush=True)

    model.fit(Batches(), epochs=math.ceil(args.steps / args.log_every), verbose=0,
              callbacks=[Logger()])
    predicted = np.argmax(model.predict(images[valid_rows].astype("float32"),
                                        batch_size=256, verbose=0), -1)
    log["validation_accuracy"] = float(np.mean(predicted == labels[valid_rows]))
    log["wall_s"] = round(time.time() - started, 1)
    log["cpu_s"] = round(time.process_time() - cpu_started, 1)
    print(f"validation accuracy {log['validation_accuracy']:.4f} on {len(valid_rows)} images; "
          f"{log['wall_s']} s wall, {log['cpu_s']} s CPU", flush=True)
    if args.json:
        Path(args.json).expanduser().parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).expanduser().write_text(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
