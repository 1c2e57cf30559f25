"""Evaluation transforms: a decoded RGB image of any size to the pixels a checkpoint was evaluated on.

Two forms of one computation, both returning float32 pixels in [0, 255] (the
models normalise inside):

- `eval_transform(name_or_config, **overrides)`: a function of one image
  `(height, width, channels)`, numpy or TensorFlow, that traces inside
  `tf.data.Dataset.map` with unknown height and width.
- `EvalTransform(...)` (`keras_vit.preprocessing.layers`): a Keras layer on a
  batch, written with `keras.ops`, so that an exported model can take uint8
  images of any size to class probabilities on the TensorFlow and JAX backends.

The resize follows the reference code of each checkpoint (see
`keras_vit.preprocessing.checkpoints`): torchvision's `Resize` + `CenterCrop`
on PIL images (antialiased filters, uint8 results) for DeiT, ConViT, Swin and
timm, TensorFlow's plain `tf.image.resize` in float for vit_jax.
"""

import numpy as np
import tensorflow as tf

from keras_vit.preprocessing.checkpoints import (
    ACCEPTED_CHANNELS,
    REFERENCES,
    EvalConfig,
    eval_config,
)
from keras_vit.preprocessing.resizing import center_crop, resize, shorter_side_size


def _channel_error(shape):
    return ValueError(
        "`image` must have 1 (grayscale, repeated to RGB) or 3 (RGB) channels. Received: an image of "
        f"shape {tuple(shape)}. For RGBA drop or composite the alpha channel first, e.g. `image[..., :3]`."
    )


def _range_error(dtype, low, high):
    return ValueError(
        "`image` values must lie in [0, 255]: uint8, or integer or float pixels on that scale. "
        f"Received: a {dtype} image with values in [{low}, {high}]. An image in [0, 1] must be "
        "multiplied by 255 first."
    )


def _check_numeric(dtype, shape):
    if not (dtype.is_integer or dtype.is_floating) or dtype == tf.bool:
        raise ValueError(
            "`image` must hold integer or floating point pixels (uint8, or float in [0, 255]). "
            f"Received: an image of dtype {dtype.name} and shape {tuple(shape)}"
        )


def _check_rank(shape):
    if shape.rank is not None and shape.rank != 3:
        raise ValueError(
            "`image` must be one image of shape (height, width, channels). Received: an image of shape "
            f"{tuple(shape)}. Map a batch image by image (or use the `EvalTransform` layer); give a 2-D "
            "grayscale image a channel axis, e.g. `image[..., None]`."
        )


def checked_rgb_image(image):
    """One image as a `tf.Tensor` of shape `(height, width, 3)`, checked; grayscale repeated to RGB.

    Eager values (numpy arrays, eager tensors) are checked at once; in a traced
    function (`tf.data`, `tf.function`) the value checks become
    `tf.debugging` assertions that fail when the image flows.

    Args:
        image: uint8, integer or float array or tensor of shape `(height, width,
            1 or 3)`, values in [0, 255].

    Returns:
        Tensor of the input's dtype and shape `(height, width, 3)`.

    Raises:
        ValueError: for a rank other than 3, a channel count other than 1 or 3,
            a non-numeric dtype, an empty image, or (eagerly) values outside
            [0, 255].
    """
    if not isinstance(image, tf.Tensor):
        image = np.asarray(image)
        if image.dtype.kind not in "uif":
            raise ValueError(
                "`image` must hold integer or floating point pixels (uint8, or float in [0, 255]). "
                f"Received: an image of dtype {image.dtype} and shape {image.shape}"
            )
    image = tf.convert_to_tensor(image)
    shape = image.shape
    _check_numeric(image.dtype, shape)
    _check_rank(shape)
    channels = shape[-1] if shape.rank is not None else None
    if channels is not None and channels not in ACCEPTED_CHANNELS:
        raise _channel_error(shape)
    if not tf.is_symbolic_tensor(image):
        if 0 in shape:
            raise ValueError(
                f"`image` must have a positive height and width. Received: an image of shape {tuple(shape)}"
            )
        if image.dtype != tf.uint8:
            values = image.numpy()
            # Written so that NaN fails too.
            if not np.all((values >= 0) & (values <= 255)):
                raise _range_error(image.dtype.name, np.nanmin(values), np.nanmax(values))
    else:
        checks = [tf.debugging.assert_rank(image, 3, message="`image` must have shape (height, width, channels)")]
        if image.dtype != tf.uint8:
            in_range = tf.reduce_all((image >= 0) & (image <= 255))
            checks.append(tf.debugging.Assert(in_range, [
                "`image` values must lie in [0, 255] (uint8, or pixels on that scale); received values in",
                tf.reduce_min(image), tf.reduce_max(image),
            ]))
        if channels is None:
            count = tf.shape(image)[-1]
            checks.append(tf.debugging.Assert((count == 1) | (count == 3), [
                "`image` must have 1 (grayscale) or 3 (RGB) channels; received an image of shape", tf.shape(image),
            ]))
        with tf.control_dependencies(checks):
            image = tf.identity(image)
    if channels == 1:
        return tf.tile(image, [1, 1, 3])
    if channels is None:
        image = tf.cond(tf.shape(image)[-1] == 1, lambda: tf.tile(image, [1, 1, 3]), lambda: image)
        image = tf.ensure_shape(image, (None, None, 3))
    return image


def eval_transform(name_or_config, reference="authors", **overrides):
    """The evaluation transform of a checkpoint, as a function of one image.

    The function maps one decoded image `(height, width, channels)` of any size
    (numpy array or `tf.Tensor`; uint8, or integer or float pixels in [0, 255];
    1 or 3 channels, grayscale repeated to RGB) to a float32 `tf.Tensor`
    `(image_size, image_size, 3)` in [0, 255]: resize (the shorter side to
    `floor(image_size / crop_fraction)` for `crop_mode="center"`, both sides for
    `"squash"`), then a centre crop, as `EvalConfig` describes. It traces in
    `tf.data.Dataset.map` with unknown height and width.

    Args:
        name_or_config: str or `EvalConfig`. A known checkpoint name (e.g.
            `"DeiT_S16/imagenet"`, `"ViT_B16/augreg"`; `keras_vit.list_checkpoints()`
            lists them) or an explicit configuration (e.g. from
            `eval_config_from_huggingface`).
        reference: str. For a name: `"authors"`, the transform the checkpoint's
            authors evaluated with, or `"timm"`, timm's re-tuned
            `pretrained_cfg` (e.g. crop fraction 0.9 for DeiT and Swin, a centre
            crop for the 384 px Swin models). Defaults to `"authors"`.
        **overrides: Settings replacing the configuration's: `image_size`,
            `interpolation`, `crop_fraction`, `crop_mode`, `antialias`,
            `round_to_uint8`. A new `image_size` keeps the crop fraction, so the
            resize follows it as timm's does (`floor(image_size / crop_fraction)`).

    Returns:
        A function `image -> tf.Tensor` with the `EvalConfig` it applies as
        its `config` attribute.

    Raises:
        ValueError: for an unknown checkpoint name (listing close or example
            names), an unknown `reference` or override, or an override value
            not accepted (e.g. a crop fraction outside (0, 1]). The function
            raises a ValueError for an image of another rank, of 2 or 4 or more
            channels, or with values outside [0, 255] (eagerly; in a traced
            function, a failed `tf.debugging` assertion).
    """
    if isinstance(name_or_config, EvalConfig):
        if reference not in REFERENCES:
            raise ValueError(f"`reference` must be one of {REFERENCES}. Received: reference={reference!r}")
        config = name_or_config
    else:
        config = eval_config(name_or_config, reference)
    config = config.replace(**overrides)
    image_size = config.image_size
    scale = config.resized_size

    @tf.autograph.experimental.do_not_convert  # as `train_transform`'s: nothing for AutoGraph to rewrite
    def transform(image):
        image = checked_rgb_image(image)
        if config.crop_mode == "center":
            shape = tf.shape(image)
            size = shorter_side_size(shape[0], shape[1], scale)
        else:
            size = (scale, scale)
        image = resize(image, size, config.interpolation, config.antialias, config.round_to_uint8)
        image = center_crop(image, (image_size, image_size))
        return tf.ensure_shape(image, (image_size, image_size, 3))

    transform.config = config
    return transform
