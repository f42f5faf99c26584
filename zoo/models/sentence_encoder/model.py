"""A BERT sentence encoder: the task of the sentence encoder family, as keras-hub's
`models/<family>/`:

    texts --SentenceEncoderPreprocessor--> ids --SentenceEncoderBackbone--> tokens --pool--> s

The architecture of BERT (Devlin et al., 2019) as used by sentence-transformers models such as
all-MiniLM-L6-v2 (Reimers & Gurevych, 2019, "Sentence-BERT"):

    e = LN(E_word[ids] + E_pos[0..T-1] + E_type[segments])        embeddings
    h_l = LN(h' + FFN(h')),  h' = LN(h_{l-1} + MHA(h_{l-1}))        post-norm blocks, GELU (erf)
    s = sum_t m_t h_L[t] / sum_t m_t                               mean over real tokens
    y = s / ||s||_2                                                (when `normalize`)

The embeddings and blocks are the backbone's (`zoo.models.sentence_encoder.backbone`); the
pooling is here. `SentenceEncoder.embed` tokenizes text with its preprocessor
(`zoo.models.sentence_encoder.preprocessor`): BERT's uncased WordPiece scheme (lowercase,
accents stripped, punctuation and CJK characters split, `[CLS] ... [SEP]`) from the model's
own vocabulary (`zoo.text.wordpiece.SentenceTokenizer`, whose `tokenize_in_graph` gives the
same ids with TensorFlow and TF Text ops only, for `zoo export`).
`zoo.converters.minilm.load_minilm` fills the model with the real weights.

The encoder keeps the names its backbone's layers had before the split as read-only views
(`model.encoder_blocks` is `model.backbone.encoder_blocks`); a file saved before the split
loads with `zoo.load` (`zoo.models.pre_split_files`, through `pre_split_layers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import keras
import numpy as np
from keras import ops

from zoo.layers.validation import positive_int
from zoo.models.sentence_encoder.backbone import SentenceEncoderBackbone
from zoo.models.sentence_encoder.preprocessor import SentenceEncoderPreprocessor
from zoo.models.part_views import add_part_views
from zoo.models.task import Task
from zoo.training.errors import UserError

# The encoder's attribute names of its backbone's layers before the split (the paths of the
# weights in older files), in the old constructor's order; read-only views on the encoder.
_BACKBONE_LAYERS = ("token_embedding", "position_embedding", "segment_embedding",
                    "embeddings_norm", "embeddings_dropout", "encoder_blocks")
# The backbone's settings that the encoder shows as its own (read-only).
_BACKBONE_SETTINGS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                      "intermediate_dim", "max_positions", "type_vocabulary_size", "dropout",
                      "attention_dropout", "layer_norm_epsilon", "activation")
# The preprocessor's settings that the encoder shows as its own (read-only).
_PREPROCESSOR_SETTINGS = ("vocabulary", "max_length", "lowercase", "tokenizer")

# Smallest token count and vector norm divided by, as in sentence-transformers' mean pooling
# (clamp at 1e-9) and torch.nn.functional.normalize (eps 1e-12).
_MIN_TOKEN_COUNT = 1e-9
_MIN_NORM = 1e-12


@keras.saving.register_keras_serializable(package="zoo")
class SentenceEncoder(Task):
    """A BERT encoder with masked mean pooling: one vector per sentence; a
    `SentenceEncoderBackbone` with its `SentenceEncoderPreprocessor`.

    Args:
        vocabulary_size: rows of the word embedding.
        num_layers: encoder blocks.
        num_heads: attention heads per block.
        hidden_dim: token size d.
        intermediate_dim: hidden width of each block's feed-forward network.
        max_positions: rows of the learned position embedding (the longest input).
        type_vocabulary_size: rows of the token-type (segment) embedding.
        dropout: dropout on the embeddings and in each block's residual branches.
        attention_dropout: dropout on the attention weights.
        layer_norm_epsilon: epsilon of every LayerNorm (1e-12 in BERT).
        activation: feed-forward activation; "gelu" is the exact (erf) GELU of BERT.
        normalize: L2-normalise the pooled vectors (cosine similarity becomes a dot product).
        vocabulary: the WordPiece tokens (or a `vocab.txt` path) for `embed`; optional.
        max_length: the most tokens per text in `embed`, `[CLS]` and `[SEP]` included;
            `max_positions` by default (all-MiniLM-L6-v2 uses 256).
        lowercase: whether `embed` lowercases and strips accents (uncased models).
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        inputs: a dict with int `token_ids` `(batch, length)` and `padding_mask`
            `(batch, length)` (1 for real tokens, 0 for padding), and optionally int
            `segment_ids` (token types; all 0 when absent).
        training: whether dropout is active.

    Returns:
        float32 sentence embeddings `(batch, hidden_dim)`.

    Example:
    >>> import numpy as np
    >>> model = SentenceEncoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_positions=16)
    >>> out = model({"token_ids": np.array([[2, 7, 3, 0]]),
    ...              "padding_mask": np.array([[1, 1, 1, 0]])})
    >>> tuple(out.shape), round(float(np.linalg.norm(out[0])), 4)
    ((1, 8), 1.0)
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        max_positions: int = 512,
        type_vocabulary_size: int = 2,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        layer_norm_epsilon: float = 1e-12,
        activation: str = "gelu",
        normalize: bool = True,
        vocabulary: str | Path | Sequence[str] | None = None,
        max_length: int | None = None,
        lowercase: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_length is None:
            max_length = max_positions
        positive_int(max_length, "max_length")
        if max_length > max_positions:
            raise UserError(
                f"max_length {max_length} exceeds the {max_positions} position embeddings")
        self.normalize = bool(normalize)
        with keras.name_scope(self.name, caller=self):  # its weights' paths start with ours
            self.backbone = SentenceEncoderBackbone(
                vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                max_positions=max_positions, type_vocabulary_size=type_vocabulary_size,
                dropout=dropout, attention_dropout=attention_dropout,
                layer_norm_epsilon=layer_norm_epsilon, activation=activation,
                dtype=self.dtype_policy, name="backbone")
        self.preprocessor = SentenceEncoderPreprocessor(
            vocabulary, max_length=max_length, lowercase=lowercase, name="preprocessor")
        if self.vocabulary is not None and len(self.vocabulary) != self.vocabulary_size:
            raise UserError(
                f"the vocabulary has {len(self.vocabulary)} tokens but vocabulary_size is "
                f"{self.vocabulary_size}")
        self.built = True  # its backbone is

    def token_features(self, inputs: dict[str, Any], training: bool | None = None) -> Any:
        """The last block's `(batch, length, hidden_dim)` outputs, before pooling (the
        backbone's)."""
        self.backbone.check_inputs(inputs)  # a bad input names the encoder, not Keras
        return self.backbone(inputs, training=training)

    def call(self, inputs: dict[str, Any], training: bool | None = None) -> Any:
        x = ops.cast(self.token_features(inputs, training=training), "float32")
        mask = ops.expand_dims(ops.cast(inputs["padding_mask"], "bool"), -1)
        # `where`, not a product: rows of padding must not reach the sum whatever they hold.
        total = ops.sum(ops.where(mask, x, 0.0), axis=1)
        count = ops.sum(ops.cast(mask, "float32"), axis=1)
        pooled = total / ops.maximum(count, _MIN_TOKEN_COUNT)
        if self.normalize:
            norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
            pooled = pooled / ops.maximum(norm, _MIN_NORM)
        return pooled

    def compute_output_shape(self, input_shape: Any) -> tuple:
        return (input_shape["token_ids"][0], self.hidden_dim)

    def lora_layers(self) -> list[keras.layers.Layer]:
        """None: the sentence encoder takes no LoRA (`enable_lora` says so in one line)."""
        return []

    def pre_split_layers(self) -> list[tuple[str, Any]]:
        """The layers under their attribute names before the split, in the order the old
        constructor set them (`zoo.models.pre_split_files`)."""
        return [(name, getattr(self, name)) for name in _BACKBONE_LAYERS]

    # ------------------------------------------------------------------ text
    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embeds texts: tokenizes, pads each batch to its longest text and pools.

        Args:
            texts: the sentences (a list of strings).
            batch_size: texts per forward pass.

        Returns:
            float32 `(len(texts), hidden_dim)` embeddings, unit-length when `normalize`.

        Raises:
            ValueError: without a vocabulary, for a non-string text, or a bad `batch_size`.
        """
        batch_size = positive_int(batch_size, "batch_size")
        self.preprocessor.tokenizer  # a UserError without a vocabulary, before any text
        if isinstance(texts, str):
            raise UserError(f"texts must be a list of strings, not one string: {texts!r}")
        texts = list(texts)
        outputs = [np.zeros((0, self.hidden_dim), "float32")]
        for start in range(0, len(texts), batch_size):
            batch = self.preprocessor(texts[start:start + batch_size])
            outputs.append(np.asarray(ops.convert_to_numpy(self(batch, training=False))))
        return np.concatenate(outputs, axis=0).astype("float32")

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_positions": self.max_positions,
            "type_vocabulary_size": self.type_vocabulary_size,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "activation": self.activation,
            "normalize": self.normalize,
            "vocabulary": None if self.vocabulary is None else list(self.vocabulary),
            "max_length": self.max_length,
            "lowercase": self.lowercase,
        })
        return config



add_part_views(SentenceEncoder, "backbone", (*_BACKBONE_LAYERS, *_BACKBONE_SETTINGS))
add_part_views(SentenceEncoder, "preprocessor", _PREPROCESSOR_SETTINGS)
