"""A BERT sentence encoder: token embeddings, post-norm Transformer blocks, mean pooling.

The architecture of BERT (Devlin et al., 2019) as used by sentence-transformers models such as
all-MiniLM-L6-v2 (Reimers & Gurevych, 2019, "Sentence-BERT"):

    e = LN(E_word[ids] + E_pos[0..T-1] + E_type[segments])        embeddings
    h_l = LN(h' + FFN(h')),  h' = LN(h_{l-1} + MHA(h_{l-1}))        post-norm blocks, GELU (erf)
    s = sum_t m_t h_L[t] / sum_t m_t                               mean over real tokens
    y = s / ||s||_2                                                (when `normalize`)

`SentenceEncoder.embed` tokenizes text with BERT's uncased WordPiece scheme (lowercase, accents
stripped, punctuation and CJK characters split, `[CLS] ... [SEP]`) from the model's own
vocabulary (`zoo.text.wordpiece.SentenceTokenizer`, whose `tokenize_in_graph` gives the
same ids with TensorFlow and TF Text ops only, for `zoo export`).
`zoo.converters.minilm.load_minilm` fills the model with the real weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import keras
import numpy as np
from keras import ops

from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.position_embedding import PositionEmbedding
from zoo.layers.token_embedding import TokenEmbedding
from zoo.layers.transformer_encoder import TransformerEncoderBlock
from zoo.layers.validation import positive_int
from zoo.training.errors import UserError
from zoo.text.wordpiece import SentenceTokenizer, read_vocabulary

# Smallest token count and vector norm divided by, as in sentence-transformers' mean pooling
# (clamp at 1e-9) and torch.nn.functional.normalize (eps 1e-12).
_MIN_TOKEN_COUNT = 1e-9
_MIN_NORM = 1e-12


@keras.saving.register_keras_serializable(package="zoo")
class SentenceEncoder(keras.Model):
    """A BERT encoder with masked mean pooling: one vector per sentence.

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
        for what, value in (("vocabulary_size", vocabulary_size), ("num_layers", num_layers),
                            ("num_heads", num_heads), ("hidden_dim", hidden_dim),
                            ("intermediate_dim", intermediate_dim),
                            ("max_positions", max_positions),
                            ("type_vocabulary_size", type_vocabulary_size),
                            ("max_length", max_length)):
            positive_int(value, what)
        if hidden_dim % num_heads:
            raise UserError(
                f"hidden_dim {hidden_dim} is not divisible by num_heads {num_heads}")
        if max_length > max_positions:
            raise UserError(
                f"max_length {max_length} exceeds the {max_positions} position embeddings")
        for what, rate in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if not 0.0 <= float(rate) < 1.0:
                raise UserError(f"{what} must be in [0, 1); got {rate!r}")
        self.vocabulary_size = int(vocabulary_size)
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.hidden_dim = int(hidden_dim)
        self.intermediate_dim = int(intermediate_dim)
        self.max_positions = int(max_positions)
        self.type_vocabulary_size = int(type_vocabulary_size)
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.activation = activation
        self.normalize = bool(normalize)
        self.max_length = int(max_length)
        self.lowercase = bool(lowercase)
        self.vocabulary = None if vocabulary is None else read_vocabulary(vocabulary)
        if self.vocabulary is not None and len(self.vocabulary) != self.vocabulary_size:
            raise UserError(
                f"the vocabulary has {len(self.vocabulary)} tokens but vocabulary_size is "
                f"{self.vocabulary_size}")
        self._tokenizer: SentenceTokenizer | None = None
        self._create_layers()
        self.build({"token_ids": (None, None), "padding_mask": (None, None)})

    def _create_layers(self) -> None:
        """Creates the word, position and segment embeddings, their norm and dropout, and
        the encoder blocks."""
        policy = self.dtype_policy
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)  # BERT's
        self.token_embedding = TokenEmbedding(
            self.vocabulary_size, self.hidden_dim, scale=False, mask_zero=False,
            embeddings_initializer=initializer, dtype=policy, name="token_embedding")
        self.position_embedding = PositionEmbedding(
            self.max_positions, dtype=policy, name="position_embedding")
        self.segment_embedding = keras.layers.Embedding(
            self.type_vocabulary_size, self.hidden_dim, embeddings_initializer=initializer,
            dtype=policy, name="segment_embedding")
        self.embeddings_norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="embeddings_norm")
        self.embeddings_dropout = keras.layers.Dropout(
            self.dropout, dtype=policy, name="embeddings_dropout")
        self.encoder_blocks = [
            TransformerEncoderBlock(
                num_heads=self.num_heads, intermediate_dim=self.intermediate_dim,
                dropout=self.dropout, attention_dropout=self.attention_dropout,
                activation=self.activation, normalize_first=False,
                layer_norm_epsilon=self.layer_norm_epsilon,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
                dtype=policy, name=f"encoder_block_{i}")
            for i in range(self.num_layers)
        ]

    def build(self, input_shape: Any = None) -> None:
        if self.built:  # by the constructor: a later `build(shape)` adds no state
            return
        sequence = (None, None, self.hidden_dim)
        self.token_embedding.build((None, None))
        self.position_embedding.build(sequence)
        self.segment_embedding.build((None, None))
        self.embeddings_norm.build(sequence)
        for block in self.encoder_blocks:
            block.build(sequence)
        self.built = True

    def _check_inputs(self, inputs: Any) -> tuple[Any, Any, Any]:
        if not isinstance(inputs, dict):
            raise UserError(
                "SentenceEncoder expects a dict with 'token_ids' and 'padding_mask'; got "
                f"{type(inputs).__name__}")
        missing = [k for k in ("token_ids", "padding_mask") if k not in inputs]
        if missing:
            raise UserError(f"SentenceEncoder inputs lack {missing}; got keys {sorted(inputs)}")
        token_ids = inputs["token_ids"]
        padding_mask = inputs["padding_mask"]
        if len(token_ids.shape) != 2:
            raise UserError(
                f"token_ids must have shape (batch, length); got {tuple(token_ids.shape)}")
        if tuple(padding_mask.shape) != tuple(token_ids.shape):
            raise UserError(
                f"padding_mask has shape {tuple(padding_mask.shape)} but token_ids has "
                f"{tuple(token_ids.shape)}")
        length = token_ids.shape[1]
        if length is not None and length > self.max_positions:
            raise UserError(
                f"inputs of length {length} exceed the {self.max_positions} position "
                "embeddings")
        return token_ids, padding_mask, inputs.get("segment_ids")

    def token_features(self, inputs: dict[str, Any], training: bool | None = None) -> Any:
        """The last block's `(batch, length, hidden_dim)` outputs, before pooling."""
        token_ids, padding_mask, segment_ids = self._check_inputs(inputs)
        if segment_ids is None:
            segment_ids = ops.zeros_like(token_ids)
        x = self.token_embedding(token_ids)
        x = x + self.position_embedding(x) + self.segment_embedding(segment_ids)
        x = self.embeddings_dropout(self.embeddings_norm(x), training=training)
        mask = ops.cast(padding_mask, "bool")
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        return x

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

    # ------------------------------------------------------------------ text
    @property
    def tokenizer(self) -> SentenceTokenizer:
        """The WordPiece tokenizer of `vocabulary` (built on first use)."""
        if self.vocabulary is None:
            raise UserError(
                "this SentenceEncoder has no vocabulary; pass vocabulary= to tokenize text")
        if self._tokenizer is None:
            self._tokenizer = SentenceTokenizer(
                self.vocabulary, max_length=self.max_length, lowercase=self.lowercase)
        return self._tokenizer

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
        tokenizer = self.tokenizer
        if isinstance(texts, str):
            raise UserError(f"texts must be a list of strings, not one string: {texts!r}")
        texts = list(texts)
        outputs = [np.zeros((0, self.hidden_dim), "float32")]
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start:start + batch_size])
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
