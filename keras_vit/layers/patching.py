"""Patch extraction, patch embedding with position embeddings, the class and distillation tokens.

Together these layers compute Eq. 1 of the ViT paper:

    z_0 = [x_class; x_p^1 E; x_p^2 E; ...; x_p^N E] + E_pos

`Patches` cuts the image into flattened patches, `PatchEncoder` applies `E` and
adds the patch rows of `E_pos`, and `ClassToken` prepends `x_class` together with
its own row of `E_pos`. Splitting `E_pos` this way computes exactly Eq. 1 with the
same parameters, and keeps the patch grid (which is what gets interpolated when the
resolution changes, ViT Sec. 3.2) apart from the class slot (which never is).

DeiT (Touvron et al. 2021, Sec. 5 and Fig. 2) adds a distillation token after the
class token, with a slot of `E_pos` of its own: `DistillationToken` inserts it,
and `DistillationTokenPooling` reads its output for the second head.
"""

import keras
from keras import ops

from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.validation import check_positive_int, to_pair


@keras.saving.register_keras_serializable(package="keras_vit")
class Patches(keras.layers.Layer):
    """Cuts images into non-overlapping flattened patches.

    Patches are taken with a reshape and a transpose (no gather and no
    convolution), so that a following dense projection is exactly the strided
    convolution of the reference implementations: each patch is flattened in
    (row, column, channel) order, the order of a `(ph, pw, C, D)` kernel reshaped
    to `(ph * pw * C, D)`.

    Args:
        patch_size: int or tuple of 2 ints. Patch height and width in pixels.
        **kwargs: Base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        images: Tensor of shape `(batch, height, width, channels)`; height and
            width must be multiples of the patch size.

    Returns:
        Tensor of shape `(batch, height // ph, width // pw, ph * pw * channels)`:
        the patch grid, each patch flattened.
    """

    def __init__(self, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = to_pair(patch_size, "patch_size")

    def _grid(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                "Patches expects images of shape (batch, height, width, "
                f"channels). Received: input_shape={tuple(input_shape)}"
            )
        height, width, channels = input_shape[1:]
        ph, pw = self.patch_size
        for axis, size, patch in (("height", height, ph), ("width", width, pw)):
            if size is None:
                raise ValueError(
                    f"Patches needs a static image {axis}. "
                    f"Received: input_shape={tuple(input_shape)}"
                )
            if size % patch:
                raise ValueError(
                    f"Image {axis} must be a multiple of the patch size "
                    f"{self.patch_size}. Received: input_shape="
                    f"{tuple(input_shape)}, patch_size={self.patch_size}"
                )
        return height // ph, width // pw, channels

    def call(self, images):
        grid_h, grid_w, channels = self._grid(images.shape)
        ph, pw = self.patch_size
        x = ops.reshape(images, (-1, grid_h, ph, grid_w, pw, channels))
        x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
        return ops.reshape(x, (-1, grid_h, grid_w, ph * pw * channels))

    def compute_output_shape(self, input_shape):
        grid_h, grid_w, channels = self._grid(input_shape)
        ph, pw = self.patch_size
        return (input_shape[0], grid_h, grid_w, ph * pw * channels)

    def get_config(self):
        config = super().get_config()
        config.update({"patch_size": self.patch_size})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class PatchEncoder(keras.layers.Layer):
    """Projects flattened patches to the model width and adds position embeddings.

    The learned 1D position embeddings of the ViT (Sec. 3.1, App. D.4) are stored
    as a `(grid_h, grid_w, hidden_size)` grid, so that non-square grids keep their
    layout when they are resampled to another resolution.

    Args:
        hidden_size: int. Width D of the transformer.
        use_position_embedding: bool. Whether to add learned position embeddings.
            Defaults to `True`.
        kernel_initializer: Initializer of the projection kernel. Defaults to
            `"lecun_normal"` (the default of the reference Flax convolution).
        position_initializer: Initializer of the position embeddings. Defaults
            to a normal with standard deviation 0.02, as in the reference ViT.
        **kwargs: Base layer arguments.

    Call arguments:
        patches: Tensor of shape `(batch, grid_h, grid_w, patch_dim)` from
            `Patches` (or a feature map, for the hybrid models).

    Returns:
        Tensor of shape `(batch, grid_h * grid_w, hidden_size)`.
    """

    def __init__(
        self,
        hidden_size,
        use_position_embedding=True,
        kernel_initializer="lecun_normal",
        position_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(hidden_size, "hidden_size")
        self.hidden_size = hidden_size
        self.use_position_embedding = use_position_embedding
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.position_initializer = keras.initializers.get(
            position_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.grid_size = None

    def build(self, input_shape):
        if len(input_shape) != 4 or None in input_shape[1:]:
            raise ValueError(
                "PatchEncoder expects a patch grid of static shape (batch, "
                f"grid_h, grid_w, patch_dim). Received: input_shape={input_shape}"
            )
        self.grid_size = tuple(input_shape[1:3])
        self.projection = keras.layers.Dense(
            self.hidden_size,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build(input_shape)
        if self.use_position_embedding:
            self.position_embedding = self.add_weight(
                shape=(*self.grid_size, self.hidden_size),
                initializer=self.position_initializer,
                name="position_embedding",
            )

    def call(self, patches):
        if tuple(patches.shape[1:3]) != self.grid_size:
            raise ValueError(
                f"PatchEncoder was built for a {self.grid_size} patch grid, i.e. "
                "for images of another size. Received a patch grid of shape "
                f"{tuple(patches.shape[1:3])}"
            )
        x = dense_on_tokens(self.projection, patches)
        if self.use_position_embedding:
            x = x + ops.cast(self.position_embedding, x.dtype)
        return ops.reshape(x, (-1, self.grid_size[0] * self.grid_size[1], self.hidden_size))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1] * input_shape[2], self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "use_position_embedding": self.use_position_embedding,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "position_initializer": keras.initializers.serialize(self.position_initializer),
            }
        )
        return config


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
