"""ConViT's block: a pre-norm transformer block whose attention is GPSA (ConViT Sec. 3, Fig. 4).

`GPSABlock` is `TransformerBlock` (ViT Eq. 2-3) with `GPSA` (`gpsa.py`) in
place of multi-head self-attention; ConViT's first `num_gpsa_layers` blocks are
these, the rest plain `TransformerBlock`s.
"""

import keras
import numpy as np
from keras import ops

from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import check_bool
from keras_vit.models.convit.gpsa import GPSA

@keras.saving.register_keras_serializable(package="keras_vit")
class GPSABlock(TransformerBlock):
    """Pre-LayerNorm transformer block with gated positional self-attention (ConViT Sec. 3).

    `z' = z + DropPath(Dropout(GPSA(LN(z))))`, `z'' = z' + DropPath(MLP(LN(z')))`:
    `TransformerBlock`'s block with `GPSA`, whose gates (`train_gating`) or all
    of whose weights (`train_gpsa_attention`) ConViT's ablations freeze
    (Table 3). The sublayers are named as `TransformerBlock`'s.

    Args:
        num_heads: int. Number of attention heads; a perfect square with
            `use_local_init`.
        mlp_dim: int. Hidden width of the MLP.
        grid_size: tuple of 2 ints. The patch grid of sequence inputs (a grid
            input brings its own; see `GPSA`).
        locality_strength: float. GPSA's convolutional-init strength `alpha`.
            Defaults to 1.
        use_local_init: bool. GPSA's convolutional initialization. Defaults to
            `True`.
        train_gating: bool. `False` fixes GPSA's gates at `lambda_h = 0`, a
            non-trainable weight (ConViT Table 3 (b)). Defaults to `True`.
        train_gpsa_attention: bool. `False` makes every weight of the GPSA
            layer non-trainable, frozen at its initialization (or at the
            values a checkpoint loads); the LayerNorms and the MLP still
            train (ConViT Table 3 (f), (g)). Defaults to `True`.
        **kwargs: Any other argument of `TransformerBlock` but
            `relative_positions` (`qkv_bias` is GPSA's `qk_bias`).

    Call arguments:
        tokens: Tensor `(batch, length, width)` of patch tokens, or the patch
            grid `(batch, rows, cols, width)`.
        training: bool.
        return_attention_scores: bool. Also return the attention
            probabilities `(batch, heads, length, length)`.
    """

    # What `keras_vit.inspection.family` says of a model of these blocks, and the
    # family of the checkpoints it loads (`keras_vit.families`).
    checkpoint_family = "ConViT"

    def __init__(self, num_heads, mlp_dim, grid_size, locality_strength=1.0, use_local_init=True,
                 train_gating=True, train_gpsa_attention=True, **kwargs):
        if kwargs.get("relative_positions") is not None:
            raise ValueError(
                "`relative_positions` adds relative logits to plain self-attention, not to GPSA. "
                f"Received: relative_positions={kwargs['relative_positions']}"
            )
        kwargs.pop("relative_positions", None)
        super().__init__(num_heads, mlp_dim, **kwargs)
        if grid_size is None:
            raise ValueError(
                f"`grid_size` (rows, cols of the patch grid) is required. Received: grid_size={grid_size}"
            )
        check_bool(train_gating, "train_gating")
        check_bool(train_gpsa_attention, "train_gpsa_attention")
        self.grid_size = tuple(grid_size)
        self.locality_strength = locality_strength
        self.use_local_init = use_local_init
        self.train_gating = train_gating
        self.train_gpsa_attention = train_gpsa_attention
        # Surfaces GPSA's argument errors at construction time.
        self._make_attention()

    def _make_attention(self):
        return GPSA(
            grid_size=self.grid_size,
            locality_strength=self.locality_strength,
            use_local_init=self.use_local_init,
            qk_bias=self.qkv_bias,
            train_gating=self.train_gating,
            # Keras' own freeze: every weight the layer creates is non-trainable.
            trainable=self.train_gpsa_attention,
            **self._attention_arguments(),
        )

    def attention_gates(self):
        """`sigma(lambda_h)` per head: the weight of positional attention (ConViT Eq. 6, Fig. 6)."""
        gating = np.asarray(ops.convert_to_numpy(self.attention.gating), "float64")
        return 1.0 / (1.0 + np.exp(-gating))

    def get_config(self):
        config = super().get_config()
        del config["relative_positions"], config["relative_position_initializer"]
        config.update(
            {
                "grid_size": self.grid_size,
                "locality_strength": self.locality_strength,
                "use_local_init": self.use_local_init,
                "train_gating": self.train_gating,
                "train_gpsa_attention": self.train_gpsa_attention,
            }
        )
        return config
