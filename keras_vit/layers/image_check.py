"""The first layer of every model: refuses images of another shape, naming it."""

import keras

from keras_vit.layers.validation import check_positive_int, to_pair


@keras.saving.register_keras_serializable(package="keras_vit")
class ImageShapeCheck(keras.layers.Layer):
    """Passes images through unchanged after checking their static shape.

    A functional model checks its input itself, with one gap: Keras lets a
    batch with a trailing axis of 1 through a model of 3 channels (it treats
    that axis as squeezable), after which per-channel preprocessing broadcasts
    the single channel and the model computes nonsense without a word. As the
    first layer of the graph this check closes the gap wherever the graph runs
    (eager, compiled, inside another model, after a `.keras` round trip), from
    static shapes only: it adds no computation.

    Args:
        image_size: int or tuple of 2 ints. `(height, width)` the model takes.
        num_channels: int. Channels the model takes.
        **kwargs: Base layer arguments.

    Call arguments:
        images: Tensor of shape `(batch, height, width, num_channels)`.

    Returns:
        `images`, unchanged.

    Raises:
        ValueError: naming `num_channels` or `image_size` for a batch of
            another shape; unknown (`None`) dimensions pass.
    """

    def __init__(self, image_size, num_channels, **kwargs):
        super().__init__(**kwargs)
        self.image_size = to_pair(image_size, "image_size")
        check_positive_int(num_channels, "num_channels")
        self.num_channels = num_channels

    def _check(self, shape):
        shape = tuple(shape)
        height, width = self.image_size
        channels = self.num_channels
        expected = f"(batch, {height}, {width}, {channels})"
        if len(shape) != 4:
            raise ValueError(
                f"This model takes a batch of images of shape {expected}; received "
                f"a tensor of shape {shape}. For a single image add a batch axis, "
                "e.g. `images[None]`."
            )
        if shape[3] is not None and shape[3] != channels:
            raise ValueError(
                f"This model takes images with {channels} channel(s) "
                f"(num_channels={channels}); received a batch of shape {shape}, "
                f"with {shape[3]} channel(s). Convert the images (e.g. grayscale to "
                f"RGB), or build the model with num_channels={shape[3]}."
            )
        if any(got is not None and got != want for got, want in zip(shape[1:3], (height, width))):
            raise ValueError(
                f"This model takes images of size ({height}, {width}) "
                f"(image_size=({height}, {width})); received a batch of shape {shape}. "
                "Resize the images, or build the model with their size (pretrained "
                "position embeddings are resampled to it)."
            )

    def call(self, images):
        self._check(images.shape)
        return images

    def compute_output_shape(self, input_shape):
        self._check(input_shape)
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"image_size": self.image_size, "num_channels": self.num_channels})
        return config
