"""Pooling: the class token out of the encoder output, and max pooling with a cheap gradient."""

import keras
from keras import ops

from keras_vit.layers.validation import to_pair


@keras.saving.register_keras_serializable(package="keras_vit")
class ClassTokenPooling(keras.layers.Layer):
    """Returns the first token of a sequence, the [class] token (ViT Eq. 4).

    It takes only the base layer's arguments (`name`, `dtype`, ...).

    Call arguments:
        tokens: Tensor `(batch, length, width)`.

    Returns:
        Tensor `(batch, width)`.
    """

    def call(self, tokens):
        return tokens[:, 0]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])


def _pooling_pads(size, pool, stride, padding):
    """`(output size, pad before, pad after)` of one axis, as TensorFlow/Keras define them."""
    if padding == "valid":
        return (size - pool) // stride + 1, 0, 0
    output = -(-size // stride)
    total = max((output - 1) * stride + pool - size, 0)
    return output, total // 2, total - total // 2


@keras.saving.register_keras_serializable(package="keras_vit")
class SeparableMaxPooling2D(keras.layers.Layer):
    """2D max pooling computed as two 1D poolings over strided slices.

    The output equals `keras.layers.MaxPooling2D` with the same arguments
    (padding cells hold -inf and never win). What differs is the gradient:
    `MaxPooling2D`'s becomes a select-and-scatter that XLA:CPU expands into
    index tensors, a variadic reduce-window and a scatter (about 30% of the
    time in XLA ops of a small hybrid's training step in one profile); the
    slices' and maximums' gradients are elementwise selects and padded copies.
    Between equal inputs the gradient goes to one of them (the first), as
    `MaxPooling2D`'s does. Height and width must be static.

    Args:
        pool_size: int or tuple of 2 ints. Window size. Defaults to 2.
        strides: int, tuple of 2 ints or None (the pool size). Defaults to None.
        padding: `"valid"` or `"same"` (TensorFlow's: the extra cell after).
            Defaults to `"valid"`.
        **kwargs: Base layer arguments.

    Call arguments:
        images: Tensor `(batch, height, width, channels)`.
    """

    def __init__(self, pool_size=2, strides=None, padding="valid", **kwargs):
        super().__init__(**kwargs)
        self.pool_size = to_pair(pool_size, "pool_size")
        self.strides = to_pair(self.pool_size if strides is None else strides, "strides")
        if padding not in ("valid", "same"):
            raise ValueError(f"`padding` must be 'valid' or 'same'. Received: padding={padding!r}")
        self.padding = padding

    def _pool_axis(self, x, axis):
        pool, stride = self.pool_size[axis - 1], self.strides[axis - 1]
        output, before, after = _pooling_pads(x.shape[axis], pool, stride, self.padding)
        if before or after:
            pads = [[0, 0]] * 4
            pads[axis] = [before, after]
            # -inf never wins a window (each holds at least one real cell).
            x = ops.pad(x, pads, constant_values=float("-inf"))
        result = None
        for offset in range(pool):
            index = [slice(None)] * 4
            index[axis] = slice(offset, offset + stride * (output - 1) + 1, stride)
            part = x[tuple(index)]
            # `where`, not `maximum`: JAX splits a maximum's gradient between
            # equal inputs; this sends it to the earlier one on every backend.
            result = part if result is None else ops.where(result >= part, result, part)
        return result

    def call(self, images):
        return self._pool_axis(self._pool_axis(images, 1), 2)

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        for axis in (1, 2):
            if shape[axis] is not None:
                shape[axis] = _pooling_pads(shape[axis], self.pool_size[axis - 1], self.strides[axis - 1],
                                            self.padding)[0]
        return tuple(shape)

    def get_config(self):
        config = super().get_config()
        config.update({"pool_size": self.pool_size, "strides": self.strides, "padding": self.padding})
        return config
