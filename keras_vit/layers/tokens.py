"""The class token and DeiT's distillation token, each with its own row of `E_pos`.

`ClassToken` prepends `x_class` of ViT's Eq. 1 together with its own row of the
position embeddings (the patch rows are `PatchEncoder`'s, in
`keras_vit.layers.patching`). DeiT (Touvron et al. 2021, Sec. 5 and Fig. 2)
adds a distillation token after the class token, with a slot of `E_pos` of its
own: `DistillationToken` inserts it, and `DistillationTokenPooling` reads its
output for the second head. ConViT inserts the class token after its GPSA
blocks, without a position embedding (`use_position_embedding=False`).
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_vit")
class ClassToken(keras.layers.Layer):
    """Prepends the learned [class] token to a token sequence.

    In the ViT the class token gets the first row of `E_pos` (Eq. 1); here that
    row is this layer's `position_embedding`. ConViT inserts the class token after
    its last GPSA block, without a position embedding (ConViT Sec. 3).

    Args:
        use_position_embedding: bool. Whether the token carries its own learned
            position embedding (the class slot of `E_pos`). Defaults to `True`.
        initializer: Initializer of the token. Defaults to `"zeros"` (reference
            ViT); ConViT uses a truncated normal.
        position_initializer: Initializer of the class slot of `E_pos`. Defaults
            to a normal with standard deviation 0.02, as in the reference ViT.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor of shape `(batch, length, hidden_size)`.

    Returns:
        Tensor of shape `(batch, length + 1, hidden_size)`.
    """

    # How many non-patch tokens the layer puts before the patches, read by
    # `keras_vit.inspection.prefix_token_counts` (a family's token layers say theirs).
    adds_prefix_tokens = 1

    def __init__(
        self,
        use_position_embedding=True,
        initializer="zeros",
        position_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.use_position_embedding = use_position_embedding
        self.initializer = keras.initializers.get(initializer)
        self.position_initializer = keras.initializers.get(
            position_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )

    def build(self, input_shape):
        hidden_size = input_shape[-1]
        self.token = self.add_weight(
            shape=(hidden_size,), initializer=self.initializer, name="token"
        )
        if self.use_position_embedding:
            self.position_embedding = self.add_weight(
                shape=(hidden_size,),
                initializer=self.position_initializer,
                name="position_embedding",
            )

    def call(self, tokens):
        token = self.token
        if self.use_position_embedding:
            token = token + self.position_embedding
        token = ops.cast(token, tokens.dtype)
        token = ops.broadcast_to(
            ops.reshape(token, (1, 1, -1)), (ops.shape(tokens)[0], 1, tokens.shape[-1])
        )
        return ops.concatenate([token, tokens], axis=1)

    def compute_output_shape(self, input_shape):
        length = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], length, input_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "use_position_embedding": self.use_position_embedding,
                "initializer": keras.initializers.serialize(self.initializer),
                "position_initializer": keras.initializers.serialize(self.position_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class DistillationToken(ClassToken):
    """Inserts DeiT's learned distillation token right after the class token.

    DeiT Sec. 5 (Fig. 2): the sequence becomes `[x_class; x_dist; patches]`; the
    distillation token interacts with the others through attention, and its
    output feeds a second head trained against the teacher. Like `ClassToken`,
    its slot of `E_pos` is this layer's `position_embedding` (DeiT's
    `pos_embed` has one row for each of the two tokens). ConViT inserts it with
    its class token, after the last GPSA block, without a position embedding.

    Args:
        use_position_embedding: bool. Whether the token carries its own learned
            position embedding. Defaults to `True`.
        initializer: Initializer of the token. Defaults to a truncated normal
            with standard deviation 0.02 (DeiT's).
        position_initializer: Initializer of its slot of `E_pos`. Defaults to
            a normal with standard deviation 0.02.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor of shape `(batch, length, hidden_size)` whose first
            token is the class token.

    Returns:
        Tensor of shape `(batch, length + 1, hidden_size)`.
    """

    def __init__(
        self,
        use_position_embedding=True,
        initializer=None,
        position_initializer=None,
        **kwargs,
    ):
        super().__init__(
            use_position_embedding=use_position_embedding,
            initializer=initializer or keras.initializers.TruncatedNormal(stddev=0.02),
            position_initializer=position_initializer,
            **kwargs,
        )

    def call(self, tokens):
        prepended = super().call(tokens[:, 1:])
        return ops.concatenate([tokens[:, :1], prepended], axis=1)


@keras.saving.register_keras_serializable(package="keras_vit")
class DistillationTokenPooling(keras.layers.Layer):
    """Returns the second token of a sequence, DeiT's distillation token.

    Args:
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, length, width)` laid out as `DistillationToken`
            leaves it.

    Returns:
        Tensor `(batch, width)`.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def call(self, tokens):
        return tokens[:, 1]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])
