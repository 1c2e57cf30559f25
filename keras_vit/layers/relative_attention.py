"""1-D relative position self-attention: the ViT paper's "Rel. Pos. Emb." (App. D.3, Table 8).

The appendix: every pair of patches (one as query, the other as key) has an
offset `p_q - p_k` in the raster order, each offset a learned embedding; an
extra attention uses the original queries with these embeddings as keys, and
its logits are added to those of the content attention before the softmax:

    logits_ij = q_i (k_j + r_{p_i - p_j})^T / sqrt(D_h)

What the appendix leaves open, decided here:
- the offsets are 1-D, over the raster order of the patch grid (as its 1-D
  absolute embeddings), so `2 N - 1` embeddings for `N` patches;
- the class token (and DeiT's distillation token) has no place in the grid:
  every pair involving one of them gets one more learned embedding, shared by
  all such pairs;
- the embeddings are shared by the heads and each block has its own, as in
  Shaw et al. (2018), the 1-D relative attention the appendix cites the idea of;
  their logits are scaled by `1 / sqrt(D_h)` with the content ones (also as there);
- no relative term is added to the values (the appendix uses only the logits).
"""

import math

import keras
import numpy as np
from keras import ops

from keras_vit.layers.attention import MultiHeadSelfAttention
from keras_vit.layers.validation import check_positive_int


def relative_offset_index(num_patches, num_prefix_tokens=0):
    """The `(L, L)` index of the embedding of each (query, key) pair, `L = num_prefix_tokens + num_patches`.

    The patch at raster position `p` is token `num_prefix_tokens + p`. A pair of
    patches gets `(p_q - p_k) + num_patches - 1`, in `[0, 2 num_patches - 2]`;
    a pair with a prefix token gets `2 num_patches - 1`.

    Args:
        num_patches: int. Patch tokens N.
        num_prefix_tokens: int. Tokens before them (class, distillation).

    Returns:
        numpy int32 array `(L, L)`.
    """
    positions = np.arange(num_patches)
    index = np.full((num_prefix_tokens + num_patches,) * 2, 2 * num_patches - 1, dtype="int32")
    index[num_prefix_tokens:, num_prefix_tokens:] = positions[:, None] - positions[None, :] + num_patches - 1
    return index


@keras.saving.register_keras_serializable(package="keras_vit")
class RelativeSelfAttention(MultiHeadSelfAttention):
    """Multi-head self-attention with 1-D relative position logits (ViT App. D.3).

    `softmax(q (k + r)^T / sqrt(D_h))`, where `r` holds a learned `D_h`-wide
    embedding per raster offset `p_q - p_k` of the patch tokens, and one for
    every pair with a prefix (class or distillation) token (see the module
    docstring for the choices the appendix leaves open). The sequence is
    `[prefix tokens; num_patches patch tokens]`, of a length fixed when the
    layer is built.

    Args:
        num_heads: int. Number of attention heads; must divide the width.
        num_patches: int. Patch tokens at the end of the sequence.
        qkv_bias: bool. Bias in the qkv projection. Defaults to `True`.
        attention_dropout_rate: float. Dropout on the attention probabilities.
            Defaults to 0.
        kernel_initializer: Initializer of the projection kernels. Defaults
            to `"glorot_uniform"`.
        position_initializer: Initializer of the relative embeddings.
            Defaults to a normal with standard deviation 0.02, as the ViT's
            absolute ones.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, length, width)`, `length` as at build time.
        training: bool.
        return_attention_scores: bool. Also return the probabilities
            `(batch, heads, length, length)`.
    """

    # The fused kernels compute `softmax(q k^T)` only.
    _fused_attention = False

    def __init__(
        self,
        num_heads,
        num_patches,
        qkv_bias=True,
        attention_dropout_rate=0.0,
        kernel_initializer="glorot_uniform",
        position_initializer=None,
        **kwargs,
    ):
        super().__init__(num_heads, qkv_bias, attention_dropout_rate, kernel_initializer, **kwargs)
        check_positive_int(num_patches, "num_patches")
        self.num_patches = num_patches
        self.position_initializer = keras.initializers.get(
            position_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )

    def build(self, input_shape):
        length = input_shape[1]
        if length is None or length < self.num_patches:
            raise ValueError(
                "RelativeSelfAttention needs a static sequence length of at least `num_patches` "
                f"(prefix tokens, then the patches). Received: input_shape={tuple(input_shape)}, "
                f"num_patches={self.num_patches}"
            )
        super().build(input_shape)
        num_prefix_tokens = length - self.num_patches
        self.offset_index = relative_offset_index(self.num_patches, num_prefix_tokens)
        num_embeddings = 2 * self.num_patches - 1 + (1 if num_prefix_tokens else 0)
        self.relative_embedding = self.add_weight(
            shape=(num_embeddings, self.head_dim), initializer=self.position_initializer, name="relative_embedding"
        )

    def compute_attention(self, query, key):
        """`softmax(q (k + r)^T / sqrt(D_h))`, in float32.

        Args:
            query: Tensor `(batch, length, heads, head_dim)`.
            key: Tensor `(batch, length, heads, head_dim)`.

        Returns:
            Tensor `(batch, heads, length, length)`.
        """
        length = query.shape[1]
        if length != self.offset_index.shape[0]:
            raise ValueError(
                f"RelativeSelfAttention was built for sequences of {self.offset_index.shape[0]} tokens. "
                f"Received: length={length}"
            )
        content = ops.einsum("bqhd,bkhd->bhqk", query, key)
        # The extra attention of App. D.3: the same queries, the offsets' embeddings as keys.
        relative_keys = ops.take(ops.cast(self.relative_embedding, query.dtype), self.offset_index, axis=0)
        relative = ops.einsum("bqhd,qkd->bhqk", query, relative_keys)
        logits = (content + relative) / math.sqrt(self.head_dim)
        return ops.softmax(ops.cast(logits, "float32"), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_patches": self.num_patches,
                "position_initializer": keras.initializers.serialize(self.position_initializer),
            }
        )
        return config
