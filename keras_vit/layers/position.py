"""Learned absolute position embeddings added to a 2-D feature map.

ViT's position embedding is part of `PatchEncoder` (it adds the embeddings to a
token sequence, with the class-token slot); the layer here adds them to a
channels-last map, for models that keep the spatial layout (Swin's `ape`).
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_vit")
class AbsolutePositionEmbedding(keras.layers.Layer):
    """Adds a learned `(H, W, C)` position embedding to a feature map (Swin's `ape`).

    The optional absolute position embedding of Swin Sec. 3.1 (Table 4
    "abs. pos."), added to the patch embedding. Its registered name,
    `keras_vit>AbsolutePositionEmbedding`, is the one it had in
    `keras_vit.models.swin`, so `.keras` files saved before the move load.

    Args:
        initializer: Initializer of the embedding. Defaults to a truncated
            normal with standard deviation 0.02 (the Swin reference's).
        **kwargs: Base layer arguments.

    Call arguments:
        x: Tensor `(batch, H, W, C)` with static `H`, `W` and `C`.
    """

    def __init__(self, initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, input_shape):
        if len(input_shape) != 4 or None in tuple(input_shape[1:]):
            raise ValueError(
                "AbsolutePositionEmbedding expects a `(batch, height, width, channels)` "
                f"input with static sizes. Received: input_shape={tuple(input_shape)}"
            )
        self.position_embedding = self.add_weight(
            shape=tuple(input_shape[1:]), initializer=self.initializer, name="position_embedding"
        )

    def call(self, x):
        return x + ops.cast(self.position_embedding, x.dtype)[None]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["initializer"] = keras.initializers.serialize(self.initializer)
        return config
