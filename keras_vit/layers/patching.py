"""Patch extraction and patch embedding with position embeddings.

With the tokens of `keras_vit.layers.tokens` these layers compute Eq. 1 of the
ViT paper:

    z_0 = [x_class; x_p^1 E; x_p^2 E; ...; x_p^N E] + E_pos

`Patches` cuts the image into flattened patches, `PatchEncoder` applies `E` and
adds the patch rows of `E_pos`, and `ClassToken` prepends `x_class` together with
its own row of `E_pos`. Splitting `E_pos` this way computes exactly Eq. 1 with the
same parameters, and keeps the patch grid (which is what gets interpolated when the
resolution changes, ViT Sec. 3.2) apart from the class slot (which never is).
"""

import keras
from keras import ops

from keras_vit.layers.dtype_policies import resolve_dtype_policies, with_quantized_dtypes
from keras_vit.layers.position import (
    add_grid_weights,
    check_grid_layout,
    check_interpolation,
    grid_of_weights,
    resample_grid,
)
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.validation import check_bool, check_positive_int, to_pair


def _static(size):
    """`size` if it is a Python int, else None (unknown, a tensor or a JAX symbolic dimension)."""
    return size if isinstance(size, int) and not isinstance(size, bool) else None


@keras.saving.register_keras_serializable(package="keras_vit")
class Patches(keras.layers.Layer):
    """Cuts images into non-overlapping flattened patches.

    Patches are taken with a reshape and a transpose (no gather and no
    convolution), so that a following dense projection is exactly the strided
    convolution of the reference implementations: each patch is flattened in
    (row, column, channel) order, the order of a `(ph, pw, C, D)` kernel reshaped
    to `(ph * pw * C, D)`. Height and width may be unknown until the call
    (a model of dynamic image size).

    Args:
        patch_size: int or tuple of 2 ints. Patch height and width in pixels.
        dynamic_padding: bool. Pad images whose size the patch does not divide
            with zeros at the bottom and right, to the next multiple of the
            patch (timm's `dynamic_img_pad`); otherwise such a size is an
            error. Defaults to `False`.
        **kwargs: Base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        images: Tensor of shape `(batch, height, width, channels)`; height and
            width must be multiples of the patch size unless `dynamic_padding`.

    Returns:
        Tensor of shape `(batch, ceil(height / ph), ceil(width / pw),
        ph * pw * channels)`: the patch grid, each patch flattened.
    """

    def __init__(self, patch_size, dynamic_padding=False, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = to_pair(patch_size, "patch_size")
        check_bool(dynamic_padding, "dynamic_padding")
        self.dynamic_padding = dynamic_padding

    def _grid(self, input_shape):
        """The static `(grid_h, grid_w, channels)`; None for a size not known yet."""
        if len(input_shape) != 4:
            raise ValueError(
                "Patches expects images of shape (batch, height, width, "
                f"channels). Received: input_shape={tuple(input_shape)}"
            )
        height, width, channels = (_static(s) for s in input_shape[1:])
        if channels is None:
            raise ValueError(
                f"Patches needs a static number of channels. Received: input_shape={tuple(input_shape)}"
            )
        grid = []
        for axis, size, patch in (("height", height, self.patch_size[0]), ("width", width, self.patch_size[1])):
            if size is not None and size % patch and not self.dynamic_padding:
                raise ValueError(
                    f"Image {axis} must be a multiple of the patch size "
                    f"{self.patch_size} (or build with dynamic_padding=True). Received: "
                    f"input_shape={tuple(input_shape)}, patch_size={self.patch_size}"
                )
            grid.append(None if size is None else -(-size // patch))
        return grid[0], grid[1], channels

    def call(self, images):
        _, _, channels = self._grid(images.shape)
        ph, pw = self.patch_size
        shape = ops.shape(images)
        height, width = shape[1], shape[2]
        if self.dynamic_padding:
            # Sizes are ints, or tensors (TensorFlow) or symbolic dimensions
            # (JAX export) that support the same arithmetic.
            grid_h, grid_w = -(-height // ph), -(-width // pw)
            pad_h, pad_w = grid_h * ph - height, grid_w * pw - width
            if _static(pad_h) != 0 or _static(pad_w) != 0:
                images = ops.pad(images, [[0, 0], [0, pad_h], [0, pad_w], [0, 0]])
        else:
            grid_h, grid_w = height // ph, width // pw
            if _static(height) is None or _static(width) is None:
                images = self._check_divisible(images, height, width)
        x = ops.reshape(images, (shape[0], grid_h, ph, grid_w, pw, channels))
        x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
        return ops.reshape(x, (shape[0], grid_h, grid_w, ph * pw * channels))

    def _check_divisible(self, images, height, width):
        """For sizes known only when the graph runs (a SavedModel of unknown size)."""
        ph, pw = self.patch_size
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            # `ImageShapeCheck` cannot see these sizes; without this the
            # reshape below would fail with a message about element counts.
            with tf.control_dependencies(
                [
                    tf.debugging.assert_equal(
                        tf.stack([height % ph, width % pw]),
                        0,
                        message=f"Image height and width must be multiples of the patch size "
                        f"(patch_size={self.patch_size}); pad or resize the images, or build "
                        "the model with dynamic_padding=True",
                    )
                ]
            ):
                return tf.identity(images)
        # JAX shape-polymorphic export: a no-op for the sizes the patches
        # divide, which lets JAX prove that the reshape fits (other sizes lose
        # their last rows and columns: JAX has no run-time assertion).
        return images[:, : (height // ph) * ph, : (width // pw) * pw]

    def compute_output_shape(self, input_shape):
        grid_h, grid_w, channels = self._grid(input_shape)
        ph, pw = self.patch_size
        return (input_shape[0], grid_h, grid_w, ph * pw * channels)

    def get_config(self):
        config = super().get_config()
        config.update({"patch_size": self.patch_size, "dynamic_padding": self.dynamic_padding})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class PatchEncoder(keras.layers.Layer):
    """Projects flattened patches to the model width and adds position embeddings.

    The learned 1D position embeddings of the ViT (Sec. 3.1, App. D.3) are stored
    as a `(grid_h, grid_w, hidden_size)` grid, so that non-square grids keep their
    layout when they are resampled to another resolution. The 2D ones of App.
    D.3 (`position_layout="learned_2d"`) are an X and a Y table of D / 2 each
    (see `keras_vit.layers.position.GRID_LAYOUTS`).

    With `dynamic_grid`, a patch grid of another size than the stored one is
    accepted and the embeddings are resampled to it in the call (timm's
    `dynamic_img_size`); the weight keeps its grid, so checkpoints load
    unchanged, and at the stored grid the embeddings are added as they are.

    Args:
        hidden_size: int. Width D of the transformer.
        use_position_embedding: bool. Whether to add learned position embeddings.
            Defaults to `True`.
        position_layout: str. Their layout, one of
            `keras_vit.layers.position.GRID_LAYOUTS`: `"learned_1d"` (one
            embedding per patch, the weight `position_embedding`) or
            `"learned_2d"` (the weights `position_embedding_x`, `(grid_w,
            D / 2)`, and `position_embedding_y`, `(grid_h, D / 2)`,
            concatenated by the patch's coordinates; D must be even).
            Defaults to `"learned_1d"`.
        kernel_initializer: Initializer of the projection kernel. Defaults
            to `"lecun_normal"` (the default of the reference Flax convolution).
        position_initializer: Initializer of the position embeddings. Defaults
            to a normal with standard deviation 0.02, as in the reference ViT.
        grid_size: int, tuple of 2 ints or None. The grid the position
            embeddings are stored for; None takes the grid of the input at
            build time, which must then be static. Defaults to `None`.
        dynamic_grid: bool. Accept other grids, resampling the embeddings.
            Defaults to `False` (another grid is an error).
        interpolation: str. How to resample: one of
            `keras_vit.layers.position.INTERPOLATIONS`. Defaults to `"bicubic"`.
        antialias: bool. PyTorch's antialiased form of the interpolation.
            Defaults to `True` (with `"bicubic"`: timm's `dynamic_img_size`).
        flatten: bool. Return the tokens as a sequence `(batch, grid_h * grid_w,
            D)`; `False` keeps the grid `(batch, grid_h, grid_w, D)` (ConViT's
            GPSA blocks read it from there). Defaults to `True`.
        **kwargs: Base layer arguments.

    Call arguments:
        patches: Tensor of shape `(batch, grid_h, grid_w, patch_dim)` from
            `Patches` (or a feature map, for the hybrid models).

    Returns:
        Tensor of shape `(batch, grid_h * grid_w, hidden_size)`, or
        `(batch, grid_h, grid_w, hidden_size)` without `flatten`.
    """

    def __init__(
        self,
        hidden_size,
        use_position_embedding=True,
        position_layout="learned_1d",
        kernel_initializer="lecun_normal",
        position_initializer=None,
        grid_size=None,
        dynamic_grid=False,
        interpolation="bicubic",
        antialias=True,
        flatten=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(hidden_size, "hidden_size")
        check_bool(dynamic_grid, "dynamic_grid")
        check_bool(flatten, "flatten")
        check_interpolation(interpolation, antialias)
        check_grid_layout(position_layout, hidden_size)
        self.hidden_size = hidden_size
        self.use_position_embedding = use_position_embedding
        self.position_layout = position_layout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.position_initializer = keras.initializers.get(
            position_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.grid_size = None if grid_size is None else to_pair(grid_size, "grid_size")
        self.dynamic_grid = dynamic_grid
        self.interpolation = interpolation
        self.antialias = antialias
        self.flatten = flatten

    def build(self, input_shape):
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "PatchEncoder expects a patch grid of shape (batch, grid_h, grid_w, "
                f"patch_dim) with a static patch_dim. Received: input_shape={input_shape}"
            )
        if self.grid_size is None:
            if None in input_shape[1:3]:
                raise ValueError(
                    "PatchEncoder needs the `grid_size` of its position embeddings for "
                    f"an input grid of unknown size. Received: input_shape={input_shape}, "
                    "grid_size=None"
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
            add_grid_weights(
                self, self.position_layout, self.grid_size, self.hidden_size, self.position_initializer
            )
        resolve_dtype_policies(self)

    def call(self, patches):
        grid = tuple(_static(s) for s in patches.shape[1:3])
        if not self.dynamic_grid and grid != self.grid_size:
            raise ValueError(
                f"PatchEncoder was built for a {self.grid_size} patch grid, i.e. "
                "for images of another size (build with dynamic_grid=True to "
                "resample its position embeddings). Received a patch grid of shape "
                f"{tuple(patches.shape[1:3])}"
            )
        return self.add_position(self.project(patches))

    def project(self, patches):
        """The patch embeddings `(batch, grid_h, grid_w, D)`, before position embeddings.

        The first half of `call`, apart so that masked patch prediction
        (`keras_vit.models.masked_patch_prediction`) can corrupt the embeddings
        before their positions are added, as ViT App. B.1.2 does.
        """
        return dense_on_tokens(self.projection, patches)

    def add_position(self, x):
        """The second half of `call`: adds the position embeddings to `project`'s grid, then flattens."""
        grid = tuple(_static(s) for s in x.shape[1:3])
        if self.use_position_embedding:
            position = grid_of_weights(self, self.position_layout)
            if grid != self.grid_size:
                # The 2D layout resamples as its grid: interpolation rows sum
                # to 1, so the X half stays constant along columns and the Y
                # half along rows, as if each table were resampled on its axis.
                shape = ops.shape(x)
                position = resample_grid(position, (shape[1], shape[2]), self.interpolation, self.antialias)
            x = x + ops.cast(position, x.dtype)
        if not self.flatten:
            return x
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1] * shape[2], self.hidden_size))

    def compute_output_shape(self, input_shape):
        if not self.flatten:
            return (*input_shape[:3], self.hidden_size)
        rows, cols = input_shape[1:3]
        length = None if rows is None or cols is None else rows * cols
        return (input_shape[0], length, self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "use_position_embedding": self.use_position_embedding,
                "position_layout": self.position_layout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "position_initializer": keras.initializers.serialize(self.position_initializer),
                "grid_size": self.grid_size,
                "dynamic_grid": self.dynamic_grid,
                "interpolation": self.interpolation,
                "antialias": self.antialias,
                "flatten": self.flatten,
            }
        )
        return with_quantized_dtypes(self, config)
