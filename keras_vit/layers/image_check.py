"""The first layer of every model: refuses images of another shape, naming it."""

import keras

from keras_vit.layers.validation import check_bool, check_positive_int, to_pair


def _optional_pair(value, name):
    """`value` as a pair of positive ints or Nones (None: any size); None gives `(None, None)`."""
    if value is None:
        return (None, None)
    if isinstance(value, (tuple, list)) and len(value) == 2 and None in value:
        known = [v for v in value if v is not None]
        if known:
            to_pair(known[0], name)  # the same message for a bad known entry
        return tuple(value)
    try:
        return to_pair(value, name)
    except ValueError:
        raise ValueError(
            f"`{name}` must be None, a positive integer or a tuple of 2 positive "
            f"integers or Nones. Received: {name}={value!r}"
        ) from None


def _static(size):
    # Unknown sizes are None in a Keras shape, and JAX symbolic dimensions in
    # a shape-polymorphic export: both pass.
    return size if isinstance(size, int) and not isinstance(size, bool) else None


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

    A model of dynamic image size takes any height and width (`image_size`
    None) that cut into whole patches: `patch_size` says which. For a hybrid
    the patches are cut from the ResNet's feature map, whose size is
    `ceil(size / feature_stride)` (its "same" padding rounds up).

    Args:
        image_size: None, int or tuple of 2 ints or Nones. `(height, width)` the
            model takes; None for any.
        num_channels: int. Channels the model takes.
        patch_size: None, int or tuple of 2 ints. For sizes not fixed by
            `image_size`: the (feature-map) size must be a multiple of it.
            Defaults to `None` (no such check).
        dynamic_padding: bool. The model pads images to a multiple of the patch
            itself, so that any size passes. Defaults to `False`.
        feature_stride: int or tuple of 2 ints. Downsampling between the image
            and the map the patches are cut from (a hybrid's ResNet).
            Defaults to 1.
        **kwargs: Base layer arguments.

    Call arguments:
        images: Tensor of shape `(batch, height, width, num_channels)`.

    Returns:
        `images`, unchanged.

    Raises:
        ValueError: naming `num_channels`, `image_size` or `patch_size` for a
            batch of another shape; unknown (`None`) dimensions pass.
    """

    def __init__(
        self,
        image_size,
        num_channels,
        patch_size=None,
        dynamic_padding=False,
        feature_stride=1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.image_size = _optional_pair(image_size, "image_size")
        check_positive_int(num_channels, "num_channels")
        self.num_channels = num_channels
        self.patch_size = None if patch_size is None else to_pair(patch_size, "patch_size")
        check_bool(dynamic_padding, "dynamic_padding")
        self.dynamic_padding = dynamic_padding
        self.feature_stride = to_pair(feature_stride, "feature_stride")

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
        received = tuple(_static(s) for s in shape)
        if received[3] is not None and received[3] != channels:
            raise ValueError(
                f"This model takes images with {channels} channel(s) "
                f"(num_channels={channels}); received a batch of shape {shape}, "
                f"with {shape[3]} channel(s). Convert the images (e.g. grayscale to "
                f"RGB), or build the model with num_channels={shape[3]}."
            )
        pairs = zip(received[1:3], (height, width))
        if any(got is not None and want is not None and got != want for got, want in pairs):
            raise ValueError(
                f"This model takes images of size ({height}, {width}) "
                f"(image_size=({height}, {width})); received a batch of shape {shape}. "
                "Resize the images, or build the model with their size (pretrained "
                "position embeddings are resampled to it), or with "
                "dynamic_image_size=True."
            )
        if self.patch_size is None or self.dynamic_padding:
            return
        for axis, size, patch, stride in zip(("height", "width"), received[1:3], self.patch_size, self.feature_stride):
            if size is None:
                continue
            cells = -(-size // stride)
            if cells % patch:
                feature = "" if stride == 1 else f" (the ResNet turns it into {cells} feature-map cells)"
                raise ValueError(
                    f"This model cuts images into {self.patch_size[0]}x{self.patch_size[1]} "
                    f"patches (patch_size={self.patch_size}), which do not divide an image "
                    f"{axis} of {size}{feature}; received a batch of shape {shape}. Resize or "
                    "pad the images, or build the model with dynamic_padding=True."
                )

    def call(self, images):
        self._check(images.shape)
        return images

    def compute_output_shape(self, input_shape):
        self._check(input_shape)
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": self.image_size,
                "num_channels": self.num_channels,
                "patch_size": self.patch_size,
                "dynamic_padding": self.dynamic_padding,
                "feature_stride": self.feature_stride,
            }
        )
        return config
