"""Pieces shared by the model builders: argument checks, preprocessing, heads."""

import keras

from keras_vit.layers.image_check import ImageShapeCheck
from keras_vit.layers.pooling import ClassTokenPooling
from keras_vit.layers.position import check_interpolation
from keras_vit.layers.validation import (
    check_bool,
    check_dtype_policy,
    check_positive_int,
    check_rate,
    to_pair,
)
from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD  # ImageNet's statistics in [0, 1]
from keras_vit.weights.loading import load_weights
from keras_vit.weights.registry import is_checkpoint_file
from keras_vit.checkpoints import find_checkpoint

POOLINGS = ("token", "gap")

PREPROCESSINGS = ("inception", "imagenet", None)

INITIALIZATIONS = ("vit", "deit")
# DeiT (and ConViT, which follows it) initializes every linear kernel, the
# position embeddings and the tokens with a truncated normal of standard
# deviation 0.02, and biases with zeros; the patch convolution keeps PyTorch's
# default, as the DeiT code leaves it to `nn.Conv2d`.
DEIT_INIT = {"class_name": "TruncatedNormal", "config": {"stddev": 0.02}}


def initializers(initialization):
    """The initializers of a ViT-like model under `initialization`.

    `"vit"` is the reference ViT's (Flax defaults: LeCun-normal patch kernel,
    Xavier-uniform block kernels, MLP biases of normal(1e-6), a zero class
    token and a zero classifier, ViT App. B.1.1); `"deit"` is DeiT's (see
    `DEIT_INIT`), classifier included.

    Args:
        initialization: str. One of `INITIALIZATIONS`.

    Returns:
        Dict with the keys `patch_kernel`, `position`, `class_token`, `kernel`,
        `mlp_bias` and `head_kernel`; a None value means the layer's default.

    Raises:
        ValueError: for another value, naming the argument.
    """
    if initialization not in INITIALIZATIONS:
        raise ValueError(
            f"`initialization` must be one of {INITIALIZATIONS}. "
            f"Received: initialization={initialization!r}"
        )
    if initialization == "vit":
        return dict(patch_kernel="lecun_normal", position=None, class_token="zeros",
                    kernel="glorot_uniform", mlp_bias=None, head_kernel="zeros")
    return dict(
        # PyTorch's default convolution initialization: kaiming_uniform(a=sqrt(5)).
        patch_kernel=keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform"),
        position=DEIT_INIT, class_token=DEIT_INIT, kernel=DEIT_INIT, mlp_bias="zeros",
        head_kernel=DEIT_INIT,
    )


def check_common_args(
    image_size,
    patch_size,
    num_channels,
    hidden_size,
    num_layers,
    num_heads,
    mlp_dim,
    pooling,
    preprocessing,
    dropout_rate,
    attention_dropout_rate,
    drop_path_rate,
):
    """Validates the arguments every builder shares; returns (image_size, patch_size) pairs."""
    image_size = to_pair(image_size, "image_size")
    patch_size = to_pair(patch_size, "patch_size")
    for name, value in (
        ("num_channels", num_channels),
        ("hidden_size", hidden_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("mlp_dim", mlp_dim),
    ):
        check_positive_int(value, name)
    if hidden_size % num_heads:
        raise ValueError(
            "`hidden_size` must be divisible by `num_heads`. "
            f"Received: hidden_size={hidden_size}, num_heads={num_heads}"
        )
    check_choice(pooling, "pooling", POOLINGS)
    check_choice(preprocessing, "preprocessing", PREPROCESSINGS)
    check_rates(dropout_rate, attention_dropout_rate, drop_path_rate)
    return image_size, patch_size


def check_choice(value, name, choices):
    """Raises a ValueError naming `name` unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={value!r}")


def check_rates(dropout_rate, attention_dropout_rate, drop_path_rate):
    """Checks the three rates of the blocks (dropout, attention dropout, stochastic depth)."""
    for name, rate in (
        ("dropout_rate", dropout_rate),
        ("attention_dropout_rate", attention_dropout_rate),
        ("drop_path_rate", drop_path_rate),
    ):
        check_rate(rate, name)


def check_model_args(
    num_classes,
    include_top,
    representation_size,
    classifier_activation,
    dtype,
    remat,
    weights,
    name,
):
    """Validates the head, precision and naming arguments every builder shares.

    Checked before any layer is built, so that a wrong value is named at once
    rather than surfacing from inside a layer (or after a download).
    """
    check_bool(include_top, "include_top")
    check_bool(remat, "remat")
    if include_top:
        check_positive_int(num_classes, "num_classes")
        if representation_size is not None:
            check_positive_int(representation_size, "representation_size")
        try:
            keras.activations.get(classifier_activation)
        except ValueError:
            raise ValueError(
                "`classifier_activation` must be None, an activation name such as "
                "'softmax', or a callable. Received: "
                f"classifier_activation={classifier_activation!r}"
            ) from None
    check_dtype_policy(dtype)
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty string. Received: name={name!r}")
    if weights is not None and not is_checkpoint_file(weights):
        find_checkpoint(weights, name)  # a known name, else a ValueError before any build


def check_dynamic_args(dynamic_image_size, dynamic_padding, position_interpolation, position_antialias):
    """Validates the arguments of dynamic image size and position-embedding resampling."""
    check_bool(dynamic_image_size, "dynamic_image_size")
    check_bool(dynamic_padding, "dynamic_padding")
    check_interpolation(
        position_interpolation, position_antialias, ("position_interpolation", "position_antialias")
    )


def image_input(
    image_size,
    num_channels,
    dtype,
    patch_size=None,
    dynamic_image_size=False,
    dynamic_padding=False,
    feature_stride=1,
):
    """The model's `Input` and its shape check (see `ImageShapeCheck`).

    With `dynamic_image_size` the input's height and width are None: the model
    takes any size its patches divide (any size at all with `dynamic_padding`).
    """
    size = (None, None) if dynamic_image_size else image_size
    images = keras.Input((*size, num_channels), name="images")
    checked = ImageShapeCheck(
        None if dynamic_image_size else image_size,
        num_channels,
        patch_size=patch_size,
        dynamic_padding=dynamic_padding,
        feature_stride=feature_stride,
        dtype=dtype,
        name="image_shape_check",
    )(images)
    return images, checked


def patch_grid(feature_size, patch_size, dynamic_padding):
    """The patch grid of a (feature map of an) image: cut whole, or padded up with `dynamic_padding`."""
    if dynamic_padding:
        return tuple(-(-f // p) for f, p in zip(feature_size, patch_size))
    return tuple(f // p for f, p in zip(feature_size, patch_size))


def check_grid(feature_size, patch_size, image_size, dynamic_padding=False):
    """Raises unless the (feature map of the) image divides into whole patches (or is padded)."""
    if dynamic_padding:
        return
    if feature_size[0] % patch_size[0] or feature_size[1] % patch_size[1]:
        detail = "" if feature_size == image_size else (
            f" (the ResNet backbone turns it into a {feature_size} feature map)"
        )
        raise ValueError(
            f"`image_size` must be divisible by `patch_size`{detail}. "
            f"Received: image_size={image_size}, patch_size={patch_size} (dynamic_padding=True "
            "pads the images instead)"
        )


def preprocess(x, mode, num_channels, dtype):
    """Maps [0, 255] pixels to the range the weights were trained with.

    `"inception"` maps to [-1, 1] (official ViT and hybrid weights);
    `"imagenet"` subtracts the ImageNet mean and divides by its standard
    deviation (DeiT, ConViT); `None` leaves the input as it is.
    """
    if mode is None:
        return x
    if mode == "inception":
        scale, offset = 1.0 / 127.5, -1.0
    else:
        mean, std = IMAGENET_MEAN, IMAGENET_STD
        if num_channels != 3:
            # Grayscale or multispectral input: the channel-averaged statistics.
            mean, std = [sum(mean) / 3] * num_channels, [sum(std) / 3] * num_channels
        scale = [1.0 / (255.0 * s) for s in std]
        offset = [-m / s for m, s in zip(mean, std)]
    return keras.layers.Rescaling(scale, offset, dtype=dtype, name="preprocessing")(x)


def classification_head(
    features,
    num_classes,
    representation_size,
    classifier_activation,
    dtype,
    kernel_initializer="zeros",
    name="head",
):
    """Optional pre-logits (Dense + tanh) and the classifier.

    ViT App. B.1.1: the classifier is a zero-initialized `D x K` layer (Swin's
    and DeiT's references initialize it as their other kernels:
    `kernel_initializer`). Its output is computed in float32 under mixed
    precision, for stable losses. The arguments were checked by
    `check_model_args`; `name` names the classifier (DeiT's second head is
    `"head_dist"`).
    """
    if representation_size is not None:
        features = keras.layers.Dense(
            representation_size,
            activation="tanh",
            kernel_initializer="lecun_normal",
            dtype=dtype,
            name="pre_logits",
        )(features)
    policy = check_dtype_policy(dtype)
    return keras.layers.Dense(
        num_classes,
        activation=classifier_activation,
        kernel_initializer=kernel_initializer,
        dtype="float32" if policy.compute_dtype != policy.variable_dtype else policy,
        name=name,
    )(features)


def pool(tokens, pooling, dtype):
    """Class-token (first token) or global-average pooling of the encoder output."""
    if pooling == "token":
        return ClassTokenPooling(dtype=dtype, name="token_pool")(tokens)
    return keras.layers.GlobalAveragePooling1D(dtype=dtype, name="gap")(tokens)


def finish_model(inputs, outputs, name, weights):
    """Wraps the graph in a `keras.Model` and loads `weights` if given."""
    model = keras.Model(inputs, outputs, name=name)
    if weights is not None:
        load_weights(model, weights)
    return model
