"""The BiT ResNet of the hybrid models: weight-standardized convolutions and GroupNorm.

ViT Sec. 4.1: the ResNet baseline and the hybrid backbones replace Batch
Normalization with Group Normalization (Wu & He 2018) and use standardized
convolutions (Qiao et al. 2019), as in BiT (Kolesnikov et al. 2020). Units are
post-activation bottlenecks with a projection shortcut, as in the reference
hybrid (`vit_jax/models_resnet.py`).
"""

import keras
from keras import ops

from keras_vit.layers.validation import check_positive_int, to_pair


@keras.saving.register_keras_serializable(package="keras_vit")
class StandardizedConv2D(keras.layers.Conv2D):
    """2D convolution whose kernel is standardized before every use.

    Each output filter is shifted and scaled to zero mean and unit standard
    deviation over its (height, width, input channel) entries:
    `W_hat = (W - mean(W)) / (std(W) + epsilon)`, as in the reference hybrid.

    Args:
        filters: int. Number of output channels.
        kernel_size: int or tuple of 2 ints.
        epsilon: float. Added to the standard deviation. Defaults to 1e-5.
        **kwargs: `keras.layers.Conv2D` arguments (`strides`, `padding`, ...).
    """

    def __init__(self, filters, kernel_size, epsilon=1e-5, **kwargs):
        super().__init__(filters, kernel_size, **kwargs)
        self.epsilon = epsilon

    def convolution_op(self, inputs, kernel):
        # Standardize in float32 even under mixed precision: the mean and std of
        # small kernels lose most of their digits in bfloat16.
        kernel = ops.cast(kernel, "float32")
        mean = ops.mean(kernel, axis=(0, 1, 2), keepdims=True)
        std = ops.std(kernel, axis=(0, 1, 2), keepdims=True)
        kernel = ops.cast((kernel - mean) / (std + self.epsilon), inputs.dtype)
        return super().convolution_op(inputs, kernel)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config


def _strided_shape(input_shape, strides, channels):
    """Output shape of a "same"-padded strided layer with `channels` outputs."""
    batch, height, width = input_shape[:3]
    height = None if height is None else -(-height // strides[0])
    width = None if width is None else -(-width // strides[1])
    return (batch, height, width, channels)


def _group_norm(dtype, name, zero_scale=False):
    # 32 groups and epsilon 1e-6: Flax's GroupNorm defaults, used by the reference.
    return keras.layers.GroupNormalization(
        groups=32,
        epsilon=1e-6,
        gamma_initializer="zeros" if zero_scale else "ones",
        dtype=dtype,
        name=name,
    )


@keras.saving.register_keras_serializable(package="keras_vit")
class BottleneckUnit(keras.layers.Layer):
    """Post-activation bottleneck residual unit with GroupNorm (BiT / ViT hybrid).

    `relu(shortcut(x) + GN(conv1x1(relu(GN(conv3x3(relu(GN(conv1x1(x)))))))))`,
    with the stride on the 3x3 convolution, a standardized 1x1 projection plus
    GroupNorm as shortcut when the shape changes, and the last GroupNorm scale
    initialized to zero so that each unit starts as the identity of its shortcut.

    Args:
        filters: int. Bottleneck width; the unit outputs `4 * filters` channels.
        strides: int or tuple of 2 ints. Stride of the 3x3 convolution.
            Defaults to 1.
        **kwargs: Base layer arguments.
    """

    def __init__(self, filters, strides=1, **kwargs):
        super().__init__(**kwargs)
        check_positive_int(filters, "filters")
        self.filters = filters
        self.strides = to_pair(strides, "strides")

    def build(self, input_shape):
        def conv(filters, kernel_size, name, strides=1):
            return StandardizedConv2D(
                filters,
                kernel_size,
                strides=strides,
                padding="same",
                use_bias=False,
                dtype=self.dtype_policy,
                name=name,
            )

        out_channels = 4 * self.filters
        self.needs_projection = input_shape[-1] != out_channels or self.strides != (1, 1)
        self.conv1 = conv(self.filters, 1, "conv1")
        self.gn1 = _group_norm(self.dtype_policy, "gn1")
        self.conv2 = conv(self.filters, 3, "conv2", self.strides)
        self.gn2 = _group_norm(self.dtype_policy, "gn2")
        self.conv3 = conv(out_channels, 1, "conv3")
        self.gn3 = _group_norm(self.dtype_policy, "gn3", zero_scale=True)
        self.conv1.build(input_shape)
        reduced = (*input_shape[:-1], self.filters)
        self.gn1.build(reduced)
        self.conv2.build(reduced)
        strided = _strided_shape(input_shape, self.strides, self.filters)
        self.gn2.build(strided)
        self.conv3.build(strided)
        self.gn3.build((*strided[:-1], out_channels))
        if self.needs_projection:
            self.conv_proj = conv(out_channels, 1, "conv_proj", self.strides)
            self.conv_proj.build(input_shape)
            self.gn_proj = _group_norm(self.dtype_policy, "gn_proj")
            self.gn_proj.build((*strided[:-1], out_channels))

    def call(self, x):
        shortcut = x
        if self.needs_projection:
            shortcut = self.gn_proj(self.conv_proj(x))
        y = ops.relu(self.gn1(self.conv1(x)))
        y = ops.relu(self.gn2(self.conv2(y)))
        y = self.gn3(self.conv3(y))
        return ops.relu(shortcut + y)

    def compute_output_shape(self, input_shape):
        return _strided_shape(input_shape, self.strides, 4 * self.filters)

    def get_config(self):
        config = super().get_config()
        config.update({"filters": self.filters, "strides": self.strides})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class ResNetStage(keras.layers.Layer):
    """A stage of BiT bottleneck units; the first one carries the stride.

    Args:
        num_units: int. Number of bottleneck units.
        filters: int. Bottleneck width of every unit.
        strides: int or tuple of 2 ints. Stride of the first unit. Defaults to 1.
        **kwargs: Base layer arguments.
    """

    def __init__(self, num_units, filters, strides=1, **kwargs):
        super().__init__(**kwargs)
        check_positive_int(num_units, "num_units")
        check_positive_int(filters, "filters")
        self.num_units = num_units
        self.filters = filters
        self.strides = to_pair(strides, "strides")

    def build(self, input_shape):
        self.units = []
        shape = input_shape
        for index in range(self.num_units):
            unit = BottleneckUnit(
                self.filters,
                strides=self.strides if index == 0 else 1,
                dtype=self.dtype_policy,
                name=f"unit{index + 1}",
            )
            unit.build(shape)
            shape = unit.compute_output_shape(shape)
            self.units.append(unit)

    def call(self, x):
        for unit in self.units:
            x = unit(x)
        return x

    def compute_output_shape(self, input_shape):
        return _strided_shape(input_shape, self.strides, 4 * self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_units": self.num_units, "filters": self.filters, "strides": self.strides}
        )
        return config
