"""CLIP's two towers and their shared space (Radford et al. 2021, "Learning Transferable
Visual Models From Natural Language Supervision", figure 3):

    I_f = ViT(pixels)[class token]          the zoo's `ViTBackbone`, with a LayerNorm on the
                                            embeddings (CLIP's `pre_layrnorm`) and quick GELU
    T_f = GPT2(ids)[first <|endoftext|>]    the zoo's `GPT2Backbone` (pre-norm, causal,
                                            learned positions, final LayerNorm), quick GELU
    I_e = I_f W_i,  T_e = T_f W_t           linear projections into one space (no bias)
    logits = exp(t) norm(I_e) norm(T_e)^T   the learned temperature t, exp(t) at most 100

CLIP's `post_layernorm` on the pooled class token is the ViT backbone's final LayerNorm read
at the class token, and the text tower reads its causal stack at the end token, where the
whole text has been seen: padding after it changes nothing, so no padding mask is needed.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops

from zoo.models.causal_lm.backbone import GPT2Backbone
from zoo.models.clip import architectures as _architectures  # noqa: F401  (registers them)
from zoo.models.task import Backbone
from zoo.models.vit.backbone import ViTBackbone

# The temperature starts at 1 / 0.07 and is clipped at 100 (the paper's section 2.5).
INITIAL_LOGIT_SCALE = math.log(1 / 0.07)
MAX_LOGIT_SCALE = math.log(100.0)


@keras.saving.register_keras_serializable(package="zoo")
class CLIPBackbone(Backbone):
    """CLIP's image and text towers, their projections and the learned temperature.

    Args:
        image_size: side (or `(height, width)`) of the images; a multiple of `patch_size`.
        patch_size: side of the square patches.
        vision_hidden_dim, vision_num_layers, vision_num_heads, vision_intermediate_dim:
            the image tower's width, blocks, heads and MLP width.
        vocabulary_size: rows of the token embedding.
        text_hidden_dim, text_num_layers, text_num_heads, text_intermediate_dim: the text
            tower's.
        embedding_dim: width of the shared space (CLIP's `projection_dim`).
        context_length: text positions (77 in CLIP).
        end_token_id: the `<|endoftext|>` id, where the text tower reads a text; None for
            the vocabulary's last id (OpenAI's vocabulary).
        activation: the MLPs' activation, "quick_gelu" (OpenAI CLIP) or "gelu".
        layer_norm_epsilon: epsilon of every LayerNorm.
        dropout: dropout of both towers' embeddings and residual branches.
        num_channels: channels of the images.
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        inputs: a dict of `images` `(batch, height, width, channels)` pixels as normalised
            by the image converter, and `token_ids` `(batch, context_length)`.
        training: whether dropout is active.

    Returns:
        A dict of float32 `image_embeddings` and `text_embeddings`, each `(batch,
        embedding_dim)`, projected but not normalised (Hugging Face's `image_embeds` /
        `text_embeds` before their normalisation).

    Example:
    >>> import numpy as np
    >>> backbone = CLIPBackbone.from_architecture("clip-tiny")
    >>> out = backbone({"images": np.zeros((2, 32, 32, 3), "float32"),
    ...                 "token_ids": np.full((3, 77), 49407)})
    >>> tuple(out["image_embeddings"].shape), tuple(out["text_embeddings"].shape)
    ((2, 32), (3, 32))
    """

    def __init__(self, image_size: int | tuple[int, int], patch_size: int,
                 vision_hidden_dim: int, vision_num_layers: int, vision_num_heads: int,
                 vision_intermediate_dim: int, vocabulary_size: int, text_hidden_dim: int,
                 text_num_layers: int, text_num_heads: int, text_intermediate_dim: int,
                 embedding_dim: int, context_length: int = 77, end_token_id: int | None = None,
                 activation: str = "quick_gelu", layer_norm_epsilon: float = 1e-5,
                 dropout: float = 0.0, num_channels: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.vision_hidden_dim = vision_hidden_dim
        self.vision_num_layers = vision_num_layers
        self.vision_num_heads = vision_num_heads
        self.vision_intermediate_dim = vision_intermediate_dim
        self.vocabulary_size = vocabulary_size
        self.text_hidden_dim = text_hidden_dim
        self.text_num_layers = text_num_layers
        self.text_num_heads = text_num_heads
        self.text_intermediate_dim = text_intermediate_dim
        self.embedding_dim = embedding_dim
        self.context_length = context_length
        self.end_token_id = vocabulary_size - 1 if end_token_id is None else int(end_token_id)
        self.activation = activation
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.dropout = float(dropout)
        self.num_channels = num_channels
        policy = self.dtype_policy
        with keras.name_scope(self.name, caller=self):
            self.vision = ViTBackbone(
                image_size, patch_size, vision_hidden_dim, vision_num_layers, vision_num_heads,
                vision_intermediate_dim, dropout=dropout, layer_norm_epsilon=layer_norm_epsilon,
                activation=activation, embedding_norm=True, num_channels=num_channels,
                dtype=policy, name="vision")
            self.text = GPT2Backbone(
                vocabulary_size, text_num_layers, text_num_heads, text_hidden_dim,
                text_intermediate_dim, max_positions=context_length, dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon, activation=activation, dtype=policy,
                name="text")
        # The shared space in float32 under mixed precision: similarities need the range.
        self.image_projection = keras.layers.Dense(
            embedding_dim, use_bias=False, dtype="float32", name="image_projection")
        self.text_projection = keras.layers.Dense(
            embedding_dim, use_bias=False, dtype="float32", name="text_projection")
        self.build()

    def build(self, input_shape: Any = None) -> None:
        if self.built:
            return
        self.text.build()
        self.image_projection.build((None, self.vision_hidden_dim))
        self.text_projection.build((None, self.text_hidden_dim))
        # t, as Hugging Face's `logit_scale` parameter holds it (the log of the scale).
        self.logit_scale = self.add_weight(
            shape=(), initializer=keras.initializers.Constant(INITIAL_LOGIT_SCALE),
            dtype="float32", name="logit_scale")
        self.built = True

    def encode_images(self, pixels: Any, training: bool | None = None) -> Any:
        """`(batch, embedding_dim)` float32 projections of the class token's features."""
        features = self.vision(pixels, training=training)[:, 0]  # (batch, vision width)
        return self.image_projection(ops.cast(features, "float32"))

    def encode_texts(self, token_ids: Any, training: bool | None = None) -> Any:
        """`(batch, embedding_dim)` float32 projections of the features at each text's first
        end token (position 0 for ids without one)."""
        hidden = self.text({"token_ids": token_ids}, training=training)  # (batch, T, width)
        is_end = ops.cast(ops.equal(token_ids, self.end_token_id), "int32")
        position = ops.argmax(is_end, axis=1)  # the first end token
        pooled = ops.take_along_axis(hidden, ops.reshape(position, (-1, 1, 1)), axis=1)
        return self.text_projection(ops.cast(pooled[:, 0], "float32"))

    def similarity_scale(self) -> Any:
        """exp(t), clipped at 100 (the paper's bound on the temperature, here in the forward
        pass, so that training can never pass it)."""
        return ops.exp(ops.minimum(ops.cast(self.logit_scale, "float32"), MAX_LOGIT_SCALE))

    def call(self, inputs: dict, training: bool | None = None) -> dict:
        return {"image_embeddings": self.encode_images(inputs["images"], training=training),
                "text_embeddings": self.encode_texts(inputs["token_ids"], training=training)}

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "image_size": self.image_size, "patch_size": self.patch_size,
            "vision_hidden_dim": self.vision_hidden_dim,
            "vision_num_layers": self.vision_num_layers,
            "vision_num_heads": self.vision_num_heads,
            "vision_intermediate_dim": self.vision_intermediate_dim,
            "vocabulary_size": self.vocabulary_size, "text_hidden_dim": self.text_hidden_dim,
            "text_num_layers": self.text_num_layers, "text_num_heads": self.text_num_heads,
            "text_intermediate_dim": self.text_intermediate_dim,
            "embedding_dim": self.embedding_dim, "context_length": self.context_length,
            "end_token_id": self.end_token_id, "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon, "dropout": self.dropout,
            "num_channels": self.num_channels,
        })
        return config
