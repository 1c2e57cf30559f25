"""Layers of the feature extraction: patch tokens as a map, and ViTDet's pyramid levels.

`PatchTokenMap` lays a block's patch tokens out on the patch grid, the form
dense-prediction heads read (timm's NCHW intermediates, channels-last here).

`SimpleFeaturePyramidLevel` is one level of ViTDet's simple feature pyramid
(Li et al. 2022, "Exploring Plain Vision Transformer Backbones for Object
Detection", Sec. 3, Fig. 2c), which builds a multi-scale pyramid from the
last feature map of a plain ViT alone: the stride-16 map is upsampled by
stride-2 transposed convolutions (two, with LayerNorm and GELU between them,
for stride 4), kept (stride 16) or max-pooled (stride 32); every level then
passes through a 1x1 and a 3x3 convolution, each followed by a LayerNorm over
the channels, as in FPN's lateral and output convolutions.
"""

import math
import numbers

import keras
from keras import ops

from keras_vit.layers.normalization import LayerNormalization
from keras_vit.layers.validation import check_non_negative_float, check_positive_int

# detectron2's `c2_xavier_fill`, the initialization of ViTDet's pyramid
# convolutions: kaiming_uniform(a=1), i.e. uniform with variance 1 / fan_in.
PYRAMID_KERNEL_INIT = {"class_name": "VarianceScaling",
                       "config": {"scale": 1.0, "mode": "fan_in", "distribution": "uniform"}}


def scale_steps(scale, name="scale"):
    """Returns `k` with `scale == 2**k`, or raises a ValueError naming `name`.

    Args:
        scale: float. Resolution factor of a pyramid level over its input.
        name: str. Argument name used in the error message.
    """
    is_number = isinstance(scale, numbers.Real) and not isinstance(scale, bool)
    steps = math.log2(scale) if is_number and scale > 0 else None
    if steps is None or not math.isfinite(steps) or steps != round(steps):
        raise ValueError(
            f"`{name}` must be a power of two (such as 4, 2, 1, 0.5). Received: {name}={scale!r}"
        )
    return int(round(steps))


@keras.saving.register_keras_serializable(package="keras_vit")
class PatchTokenMap(keras.layers.Layer):
    """Drops the leading prefix tokens and lays the patch tokens out on the patch grid.

    The grid's height and width are read from a second input, the patch grid
    itself (the `Patches` output), when the call runs: so models built with
    a variable image size give maps of whatever size their input has.

    Args:
        num_prefix_tokens: int. Leading tokens that are not patches (the class
            and distillation tokens), dropped. Defaults to 0.
        **kwargs: Base layer arguments.

    Call arguments:
        inputs: List `[tokens, patch_grid]`: tokens `(batch, prefix + h * w,
            D)`, in row-major grid order, and any tensor `(batch, h, w, ...)`
            whose axes 1 and 2 give the grid.

    Returns:
        Tensor `(batch, h, w, D)`.
    """

    def __init__(self, num_prefix_tokens=0, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_prefix_tokens, int) or isinstance(num_prefix_tokens, bool) or num_prefix_tokens < 0:
            raise ValueError(
                "`num_prefix_tokens` must be an integer >= 0. "
                f"Received: num_prefix_tokens={num_prefix_tokens!r}"
            )
        self.num_prefix_tokens = num_prefix_tokens

    def call(self, inputs):
        tokens, patch_grid = inputs
        shape = ops.shape(patch_grid)
        patches = tokens[:, self.num_prefix_tokens:]
        return ops.reshape(patches, (-1, shape[1], shape[2], tokens.shape[-1]))

    def compute_output_shape(self, input_shape):
        tokens_shape, grid_shape = input_shape
        return (tokens_shape[0], grid_shape[1], grid_shape[2], tokens_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"num_prefix_tokens": self.num_prefix_tokens})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class SimpleFeaturePyramidLevel(keras.layers.Layer):
    """Resamples a channels-last map by a power of two and projects it to `out_channels`.

    ViTDet Sec. 3 ("Simple feature pyramid"): for `scale = 2**k` with `k > 0`,
    `k` transposed convolutions of kernel 2 and stride 2, each halving the
    channels, with LayerNorm and GELU between consecutive ones (`scale=4`:
    the paper's stride-4 path); for `k < 0`, `-k` max-poolings of size 2 and
    stride 2 (`scale=0.5`: the stride-32 path); for `scale=1` the map itself.
    Then a 1x1 convolution, LayerNorm, a 3x3 convolution and LayerNorm, both
    convolutions without bias, as detectron2's `SimpleFeaturePyramid`.
    LayerNorm normalizes each position over its channels.

    Args:
        out_channels: int. Channels of the output map.
        scale: float. Output resolution over input resolution, a power of two
            (4, 2, 1, 0.5, ...).
        layer_norm_epsilon: float. Defaults to 1e-6, as detectron2's LayerNorm.
        kernel_initializer: Initializer of every convolution kernel. Defaults
            to detectron2's `c2_xavier_fill` (uniform, variance 1 / fan_in).
        **kwargs: Base layer arguments.

    Call arguments:
        maps: Tensor `(batch, height, width, channels)`.

    Returns:
        Tensor `(batch, height * scale, width * scale, out_channels)`; a
        downsampling level rounds down, as the max-pooling does.
    """

    def __init__(
        self,
        out_channels,
        scale,
        layer_norm_epsilon=1e-6,
        kernel_initializer=PYRAMID_KERNEL_INIT,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(out_channels, "out_channels")
        self.steps = scale_steps(scale)
        check_non_negative_float(layer_norm_epsilon, "layer_norm_epsilon")
        self.out_channels = out_channels
        self.scale = scale
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _norm(self, name, shape):
        norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(shape)
        return norm

    def _conv(self, layer_cls, filters, kernel_size, name, shape, **options):
        conv = layer_cls(
            filters,
            kernel_size,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=name,
            **options,
        )
        conv.build(shape)
        return conv, conv.compute_output_shape(shape)

    def build(self, input_shape):
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "SimpleFeaturePyramidLevel expects maps of shape (batch, height, width, "
                f"channels) with static channels. Received: input_shape={tuple(input_shape)}"
            )
        channels = input_shape[-1]
        if self.steps > 0 and channels // 2**self.steps < 1:
            raise ValueError(
                f"Upsampling by scale={self.scale} halves the channels {self.steps} times, "
                f"which needs at least {2**self.steps} input channels. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        shape = tuple(input_shape)
        self.upsampling, self.upsampling_norms = [], []
        for step in range(max(self.steps, 0)):
            if step:
                self.upsampling_norms.append(self._norm(f"upsample_{step - 1}_norm", shape))
            conv, shape = self._conv(
                keras.layers.Conv2DTranspose, channels // 2 ** (step + 1), 2, f"upsample_{step}",
                shape, strides=2,
            )
            self.upsampling.append(conv)
        self.downsampling = [
            keras.layers.MaxPooling2D(2, strides=2, dtype=self.dtype_policy, name=f"downsample_{step}")
            for step in range(max(-self.steps, 0))
        ]
        for pool in self.downsampling:
            shape = pool.compute_output_shape(shape)
        self.lateral, shape = self._conv(
            keras.layers.Conv2D, self.out_channels, 1, "lateral", shape, use_bias=False
        )
        self.lateral_norm = self._norm("lateral_norm", shape)
        self.output_conv, shape = self._conv(
            keras.layers.Conv2D, self.out_channels, 3, "output", shape, padding="same", use_bias=False
        )
        self.output_norm = self._norm("output_norm", shape)

    def call(self, maps):
        x = maps
        for step, conv in enumerate(self.upsampling):
            if step:
                # The reference's GELU is PyTorch's exact (erf) form.
                x = keras.activations.gelu(self.upsampling_norms[step - 1](x), approximate=False)
            x = conv(x)
        for pool in self.downsampling:
            x = pool(x)
        x = self.lateral_norm(self.lateral(x))
        return self.output_norm(self.output_conv(x))

    def compute_output_shape(self, input_shape):
        batch, height, width, _ = input_shape

        def resize(size):
            if size is None:
                return None
            return size * 2**self.steps if self.steps >= 0 else size // 2 ** (-self.steps)

        return (batch, resize(height), resize(width), self.out_channels)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "out_channels": self.out_channels,
                "scale": self.scale,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
