"""`EvalTransform`: a checkpoint's evaluation transform as a Keras layer, for exported models.

Written with `keras.ops` (TensorFlow only where the TensorFlow backend traces
unknown sizes), so that importing it needs no TensorFlow: `import keras_vit`
registers it, and a `.keras` file that starts with it loads in a fresh process.
"""

import numbers

import keras

from keras_vit.preprocessing import resize_matrices
from keras_vit.preprocessing.checkpoints import (
    ACCEPTED_CHANNELS,
    EvalConfig,
    check_eval_settings,
    resized_size,
)


def _static(size):
    return size if isinstance(size, numbers.Integral) else None


@keras.saving.register_keras_serializable(package="keras_vit")
class EvalTransform(keras.layers.Layer):
    """A checkpoint's evaluation transform as the first layer of a model.

    Maps a batch of images of any (one) size, uint8 or float pixels in
    [0, 255], to float32 `(batch, image_size, image_size, 3)` in [0, 255] with
    the computation of `eval_transform`: resize (antialiased filters as PIL's,
    optionally rounded to integers as PIL's uint8 result is), then a centre
    crop by slicing with torchvision's offsets. Grayscale batches (1 channel)
    are repeated to RGB. Pixel values are not checked here (a compiled graph
    cannot raise on them): `eval_transform` checks single images.

    The resize is two matrix products with `tf.image.resize`'s weights
    (`keras_vit.preprocessing.resize_matrices`), equal to it to float32
    rounding, so that the model converts to LiteRT's builtin ops and to
    OpenVINO with the transform inside. On the TensorFlow backend the height
    and width may be unknown when traced (a SavedModel signature of
    `(None, None, None, 3)`); JAX needs them. `"area"` interpolation exists
    on the TensorFlow backend only (`tf.image.resize`).

    Args:
        image_size: int. Side of the square output.
        interpolation: str. `"bicubic"`, `"bilinear"`, `"nearest"` or
            `"area"`. Defaults to `"bicubic"`.
        crop_fraction: float in (0, 1]. Crop side over resized side. Defaults
            to 0.875.
        crop_mode: str. `"center"` (resize the shorter side, keep the aspect
            ratio) or `"squash"` (resize both sides). Defaults to `"center"`.
        antialias: bool. Widen the filter when downscaling. Defaults to True.
        round_to_uint8: bool. Round the resized pixels to integers in [0, 255].
            Defaults to True.
        **kwargs: Base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        images: Tensor `(batch, height, width, 1 or 3)`, uint8 or float.

    Returns:
        float32 tensor `(batch, image_size, image_size, 3)`.

    Example:
        ```python
        transform = EvalTransform.from_eval_config(eval_config("DeiT_S16/imagenet"))
        inputs = keras.Input((None, None, 3), dtype="uint8")
        probabilities = keras.layers.Softmax()(model(transform(inputs)))
        exported = keras.Model(inputs, probabilities)
        ```
    """

    def __init__(
        self,
        image_size,
        interpolation="bicubic",
        crop_fraction=0.875,
        crop_mode="center",
        antialias=True,
        round_to_uint8=True,
        **kwargs,
    ):
        # Pixels stay float32 whatever the dtype policy: float16 would round them.
        super().__init__(**{"autocast": False, **kwargs})
        check_eval_settings(image_size, interpolation, crop_fraction, crop_mode, antialias, round_to_uint8)
        if interpolation == "area" and keras.backend.backend() != "tensorflow":
            raise ValueError(
                '`interpolation` must be "bicubic", "bilinear" or "nearest" on the '
                f"{keras.backend.backend()} backend. Received: interpolation='area'"
            )
        self.image_size = image_size
        self.interpolation = interpolation
        self.crop_fraction = crop_fraction
        self.crop_mode = crop_mode
        self.antialias = antialias
        self.round_to_uint8 = round_to_uint8

    @classmethod
    def from_eval_config(cls, config, **kwargs):
        """The layer applying `config` (an `EvalConfig`); `kwargs` are base layer arguments."""
        if not isinstance(config, EvalConfig):
            raise ValueError(f"`config` must be an EvalConfig. Received: config={config!r}")
        return cls(**config.transform_settings(), **kwargs)

    def _check_shape(self, shape):
        shape = tuple(shape)
        if len(shape) != 4:
            raise ValueError(
                "`images` must be a batch of shape (batch, height, width, channels). Received: a tensor of "
                f"shape {shape}. Add a batch axis to one image, e.g. `image[None]`."
            )
        channels = _static(shape[3])
        if channels not in ACCEPTED_CHANNELS:  # unknown too: 1 or 3 decide the graph
            raise ValueError(
                "`images` must have 1 (grayscale, repeated to RGB) or 3 (RGB) channels. Received: a batch of "
                f"shape {shape}. For RGBA drop or composite the alpha channel first, e.g. `images[..., :3]`."
            )

    def _resized_shape(self, height, width):
        scale = resized_size(self.image_size, self.crop_fraction)
        if self.crop_mode == "squash":
            return scale, scale
        if _static(height) is not None and _static(width) is not None:
            # torchvision's Resize(int): the longer side is truncated.
            long_side = scale * max(height, width) // min(height, width)
            return (scale, long_side) if height <= width else (long_side, scale)
        height = keras.ops.cast(height, "int32")
        width = keras.ops.cast(width, "int32")
        long_side = scale * keras.ops.maximum(height, width) // keras.ops.minimum(height, width)
        return (
            keras.ops.where(height <= width, scale, long_side),
            keras.ops.where(height <= width, long_side, scale),
        )

    def _resize(self, images, size):
        static = all(_static(s) is not None for s in size)
        if not static and keras.backend.backend() != "tensorflow":
            # JAX resizes to sizes known when it traces; jax2tf's shape-polymorphic
            # export (a SavedModel of free size) traces them symbolically.
            raise ValueError(
                "EvalTransform resizes images of a size unknown when traced on the TensorFlow backend only "
                f"(the {keras.backend.backend()} backend resizes to sizes it knows): export a model with the "
                "transform inside from Keras' TensorFlow backend (KERAS_BACKEND=tensorflow), or give its "
                f"input a fixed height and width. Received: images resized to {tuple(size)}"
            )
        if self.interpolation in resize_matrices.MATRIX_INTERPOLATIONS:
            # Two matrix products: LiteRT's builtin ops and OpenVINO run them, where
            # TensorFlow's antialiased resize (ScaleAndTranslate) is neither's.
            return resize_matrices.resize(images, size, self.interpolation, self.antialias)
        if static:
            return keras.ops.image.resize(images, size, interpolation=self.interpolation, antialias=self.antialias)
        import tensorflow as tf

        return tf.image.resize(images, tf.stack(size), method=self.interpolation, antialias=self.antialias)

    def call(self, images):
        self._check_shape(images.shape)
        images = keras.ops.cast(images, "float32")
        if images.shape[3] == 1:
            images = keras.ops.repeat(images, 3, axis=3)
        shape = keras.ops.shape(images)
        height, width = self._resized_shape(shape[1], shape[2])
        images = self._resize(images, (height, width))
        if self.round_to_uint8:
            images = keras.ops.clip(keras.ops.floor(images + 0.5), 0.0, 255.0)
        size = self.image_size
        if _static(height) is not None and _static(width) is not None:
            # torchvision's int(round((H - h) / 2.0)): Python's round halves to even, as it does.
            top, left = round((height - size) / 2.0), round((width - size) / 2.0)
            return images[:, top:top + size, left:left + size, :]
        top = keras.ops.cast(keras.ops.round(keras.ops.cast(height - size, "float32") / 2.0), "int32")
        left = keras.ops.cast(keras.ops.round(keras.ops.cast(width - size, "float32") / 2.0), "int32")
        # Slicing at traced offsets loses the static size; the reshape states it.
        return keras.ops.reshape(images[:, top:top + size, left:left + size, :], (-1, size, size, 3))

    def compute_output_shape(self, input_shape):
        self._check_shape(input_shape)
        return (input_shape[0], self.image_size, self.image_size, 3)

    def compute_output_spec(self, images):
        return keras.KerasTensor(self.compute_output_shape(images.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": self.image_size,
                "interpolation": self.interpolation,
                "crop_fraction": self.crop_fraction,
                "crop_mode": self.crop_mode,
                "antialias": self.antialias,
                "round_to_uint8": self.round_to_uint8,
            }
        )
        return config


