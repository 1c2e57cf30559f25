"""Multi-head self-attention (ViT App. A), and the attention path it shares with ConViT's GPSA.

Both `MultiHeadSelfAttention` and ConViT's `GPSA` (`keras_vit.models.convit.gpsa`) project queries,
keys and values with fused dense layers and share one explicit attention path
(`_AttentionBase`) that returns the attention probabilities, which is what the
analysis tools read. `MultiHeadSelfAttention` also has a fused path
(`fused_attention`), where the devices' kernels plug in (cuDNN's on a GPU,
Pallas's Splash on a TPU); the two paths compute the same function.
"""

import collections
import math
import warnings

import keras
from keras import ops

from keras_vit.layers.code_paths import device_platform
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.tpu_attention import tpu_attention
from keras_vit.layers.validation import check_positive_int, check_rate


def _split_heads(x, num_heads, head_dim):
    """(batch, length, heads * head_dim) -> (batch, heads, length, head_dim)."""
    shape = ops.shape(x)
    x = ops.reshape(x, (shape[0], shape[1], num_heads, head_dim))
    return ops.transpose(x, (0, 2, 1, 3))


def _merge_heads(x):
    """(batch, heads, length, head_dim) -> (batch, length, heads * head_dim)."""
    x = ops.transpose(x, (0, 2, 1, 3))
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0], shape[1], x.shape[2] * x.shape[3]))


# How many traces took each attention kernel, for `attention_kernels`.
_KERNELS = collections.Counter()


def attention_kernels():
    """Which attention kernels the traced models took: `{kernel: number of traces}`.

    Counted when a `MultiHeadSelfAttention` layer is traced (once per compiled
    step, or per call when run eagerly):

    - `"cudnn"`: cuDNN's fused attention (JAX on a GPU); `"xla (cuDNN refused)"`,
      the same call after cuDNN refused it (a warning said why).
    - `"splash (pallas)"`: Pallas's Splash kernel (JAX on a TPU), called by
      keras_vit itself (`keras_vit.layers.tpu_attention`); `"xla (<why>)"`, XLA's
      attention on a TPU where the kernel does not serve: fewer than 128 tokens,
      a batch that does not split over the distribution's devices, a refusal by
      Splash, or `KERAS_VIT_TPU_ATTENTION=xla` (a warning says why, once).
    - `"keras"`: `keras.ops.dot_product_attention`, on a CPU and on TensorFlow.
    - `"explicit (attention dropout)"`: training with attention dropout on a GPU
      or TPU, which no fused kernel here takes (a warning says so).

    `train/main.py` records them in the run's summary; the Colab TPU notebook
    prints them after training.

    Returns:
        dict from kernel name to count.
    """
    return dict(_KERNELS)


def fused_attention(query, key, value):
    """`softmax(q k^T) v` per head with a fused kernel where there is one.

    On JAX on a GPU it asks for cuDNN's fused attention itself rather than
    through `keras.ops.dot_product_attention`, which falls back to XLA's
    unfused attention silently when cuDNN refuses: here a refusal (cuDNN
    checks the dtypes, head size and layout when the step is traced; float32
    is refused) warns with cuDNN's reason, and then runs XLA's. On JAX on a
    TPU it calls Pallas's Splash kernel itself, bidirectional and at any token
    count (`keras_vit.layers.tpu_attention`): Keras 3.15's own TPU branch is
    causal and mis-scaled. Elsewhere (a CPU; TensorFlow, TPUStrategy included)
    it is `keras.ops.dot_product_attention`. `attention_kernels` tells which
    ran.

    Args:
        query: Tensor `(batch, length, heads, head_dim)`, already scaled.
        key: Tensor `(batch, length, heads, head_dim)`.
        value: Tensor `(batch, length, heads, head_dim)`.

    Returns:
        Tensor `(batch, length, heads, head_dim)`.
    """
    platform = device_platform() if keras.backend.backend() == "jax" else "cpu"
    if platform == "gpu":
        import jax

        try:
            outputs = jax.nn.dot_product_attention(query, key, value, scale=1.0, implementation="cudnn")
        except Exception as error:  # cuDNN's checks raise several types; each says why
            warnings.warn(
                "keras_vit: cuDNN's fused attention refused this attention "
                f"(query {tuple(query.shape)} {query.dtype}): {error}. It runs as XLA's unfused "
                "attention, which keeps the length x length matrices for the backward pass.",
                RuntimeWarning,
                stacklevel=2,
            )
            _KERNELS["xla (cuDNN refused)"] += 1
            return jax.nn.dot_product_attention(query, key, value, scale=1.0, implementation="xla")
        _KERNELS["cudnn"] += 1
        return outputs
    if platform == "tpu":
        outputs, kernel = tpu_attention(query, key, value)
        _KERNELS[kernel] += 1
        return outputs
    _KERNELS["keras"] += 1
    return ops.dot_product_attention(query, key, value, scale=1.0)


def _fused_initializer(initializer, num_parts):
    """Initializes a `(D, num_parts * D)` kernel as `num_parts` separate `(D, D)` ones.

    Fan-based initializers (Glorot, LeCun) would otherwise see a fan-out
    `num_parts` times larger than the reference, which initializes the query, key
    and value projections as separate `D x D` matrices (Flax `DenseGeneral`).
    """

    def init(shape, dtype=None):
        part = (shape[0], shape[1] // num_parts)
        return ops.concatenate([initializer(part, dtype=dtype) for _ in range(num_parts)], axis=1)

    return init


class _AttentionBase(keras.layers.Layer):
    """Argument handling shared by the two attention layers."""

    def __init__(
        self,
        num_heads,
        attention_dropout_rate=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(num_heads, "num_heads")
        check_rate(attention_dropout_rate, "attention_dropout_rate")
        self.num_heads = num_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _check_width(self, input_shape):
        hidden_size = input_shape[-1]
        if hidden_size % self.num_heads:
            raise ValueError(
                f"The width of the tokens must be divisible by `num_heads`. "
                f"Received: width={hidden_size}, num_heads={self.num_heads}"
            )
        return hidden_size

    def _dense(self, units, name, use_bias=True, fused_parts=1):
        initializer = self.kernel_initializer
        if fused_parts > 1:
            initializer = _fused_initializer(initializer, fused_parts)
        return keras.layers.Dense(
            units,
            use_bias=use_bias,
            kernel_initializer=initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    def _attend(self, probs, values, training):
        """Applies attention dropout, then weighs the values."""
        probs = self.attention_dropout(probs, training=training)
        return ops.matmul(ops.cast(probs, values.dtype), values)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "attention_dropout_rate": self.attention_dropout_rate,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class MultiHeadSelfAttention(_AttentionBase):
    """Multi-head self-attention with a fused qkv projection (ViT App. A, Eq. 5-8).

    `[q, k, v] = z U_qkv`, `A = softmax(q k^T / sqrt(D_h))`, `SA(z) = A v`, and the
    heads are concatenated and projected by `U_msa`. The layer normalization,
    dropout and residual around it belong to `TransformerBlock`.

    Args:
        num_heads: int. Number of attention heads; must divide the width.
        qkv_bias: bool. Whether the qkv projection has a bias (ViT: yes,
            ConViT: no). Defaults to `True`.
        attention_dropout_rate: float. Dropout on the attention probabilities.
            Defaults to 0.
        kernel_initializer: Initializer of the projection kernels; each of q, k
            and v is initialized as its own `D x D` matrix. Defaults to
            `"glorot_uniform"` (the reference ViT's Xavier uniform).
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor of shape `(batch, length, width)`.
        training: bool. Whether dropout is active.
        return_attention_scores: bool. If `True`, use the explicit path and also
            return the probabilities, shape `(batch, heads, length, length)`.
    """

    # Whether `call` may take the fused path, `fused_attention`, which
    # computes `softmax(q k^T)` only: a subclass that overrides
    # `compute_attention` with other logits sets it to False.
    _fused_attention = True

    def __init__(
        self,
        num_heads,
        qkv_bias=True,
        attention_dropout_rate=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(num_heads, attention_dropout_rate, kernel_initializer, **kwargs)
        self.qkv_bias = qkv_bias

    def build(self, input_shape):
        hidden_size = self._check_width(input_shape)
        self.head_dim = hidden_size // self.num_heads
        self.qkv = self._dense(3 * hidden_size, "qkv", self.qkv_bias, fused_parts=3)
        self.qkv.build(input_shape)
        self.out = self._dense(hidden_size, "out")
        self.out.build(input_shape)
        self.attention_dropout = keras.layers.Dropout(
            self.attention_dropout_rate, dtype=self.dtype_policy
        )

    def _qkv(self, tokens):
        """Returns q, k, v as (batch, length, heads, head_dim) tensors."""
        qkv = dense_on_tokens(self.qkv, tokens)
        shape = ops.shape(tokens)
        qkv = ops.reshape(qkv, (shape[0], shape[1], 3, self.num_heads, self.head_dim))
        return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]

    def compute_attention(self, query, key):
        """Attention probabilities `softmax(q k^T / sqrt(D_h))`, in float32.

        Args:
            query: Tensor `(batch, length, heads, head_dim)`.
            key: Tensor `(batch, length, heads, head_dim)`.

        Returns:
            Tensor `(batch, heads, length, length)`.
        """
        query = ops.transpose(query, (0, 2, 1, 3))
        key = ops.transpose(key, (0, 2, 3, 1))
        logits = ops.matmul(query, key) / math.sqrt(self.head_dim)
        # Softmax in float32: bfloat16 logits lose the small differences that
        # separate neighbouring patches.
        return ops.softmax(ops.cast(logits, "float32"), axis=-1)

    def call(self, tokens, training=None, return_attention_scores=False):
        query, key, value = self._qkv(tokens)
        explicit = (
            not self._fused_attention
            or return_attention_scores
            or (training and self.attention_dropout_rate > 0)
        )
        if explicit:
            if training and self.attention_dropout_rate > 0 and device_platform() != "cpu":
                warnings.warn(
                    f"keras_vit: {self.name} trains with attention dropout "
                    f"(attention_dropout_rate={self.attention_dropout_rate}), which no fused attention kernel "
                    "here applies: it runs the explicit softmax(q k^T) v, which keeps the length x length "
                    "probabilities. Set attention_dropout_rate=0 for the fused kernel.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                _KERNELS["explicit (attention dropout)"] += 1
            probs = self.compute_attention(query, key)
            x = _merge_heads(self._attend(probs, ops.transpose(value, (0, 2, 1, 3)), training))
        else:
            # The queries are scaled rather than the logits: XLA:CPU fuses no
            # elementwise op into a product's output, so scaling the (batch,
            # heads, length, length) logits costs a pass over them forward and
            # one backward, while the queries' scale fuses into their layout
            # copy. 1 / sqrt(64) is a power of two: no rounding for 64-wide heads.
            query = query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype)
            x = fused_attention(query, key, value)
            shape = ops.shape(x)
            x = ops.reshape(x, (shape[0], shape[1], self.num_heads * self.head_dim))
        x = dense_on_tokens(self.out, x)
        return (x, probs) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update({"qkv_bias": self.qkv_bias})
        return config
