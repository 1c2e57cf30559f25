"""Targets of masked patch prediction (ViT, Dosovitskiy et al. 2021, App. B.1.2).

"We corrupt 50% of patch embeddings by either replacing their embeddings with a
learnable [mask] embedding (80%), a random other patch embedding (10%) or just
keeping them the same (10%) ... predicting the 3bit, mean color (i.e., 512
colors in total) of every corrupted patch". The appendix tried three targets:

- `mean_color_targets`: each patch's mean colour, quantized to `bits` per
  channel, one class of `2 ** (bits * C)` (512 for RGB at 3 bits);
- `downsized_patch_targets`: the patch shrunk to 4x4 by averaging, each cell's
  mean colour quantized the same way (16 classes of 512 per patch);
- `patch_pixel_targets`: the full patch, for L2 regression.

They take images as the models do, `(batch, height, width, channels)` in
[0, 255] (uint8 or float), and return one target per patch in the raster
order of `keras_vit.layers.Patches`. They are `keras.ops`, so they run on
every backend: inside a model's step, or on numpy arrays.
"""

from keras import ops


def _check_images(images, patch_size, bits=None):
    """`(height, width, channels)` of `images`, checked; raises a ValueError naming the argument."""
    if isinstance(patch_size, bool) or not isinstance(patch_size, int) or patch_size < 1:
        raise ValueError(f"`patch_size` must be a positive int. Received: patch_size={patch_size!r}")
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8):
        raise ValueError(f"`bits` must be an int in [1, 8]. Received: bits={bits!r}")
    shape = tuple(images.shape)
    if len(shape) != 4:
        raise ValueError(
            "`images` must be a batch of images (batch, height, width, channels). "
            f"Received: images of shape {shape}"
        )
    height, width, channels = shape[1:]
    if height is not None and width is not None and (height % patch_size or width % patch_size):
        raise ValueError(
            f"The image size ({height}, {width}) must be a multiple of `patch_size` on both sides. "
            f"Received: patch_size={patch_size}"
        )
    return height, width, channels


def _patch_pixels(images, patch_size):
    """`(batch, rows * cols, patch_size, patch_size, channels)` float32, patches in raster order."""
    height, width, channels = _check_images(images, patch_size)
    x = ops.cast(ops.convert_to_tensor(images), "float32")
    rows, cols = height // patch_size, width // patch_size
    x = ops.reshape(x, (-1, rows, patch_size, cols, patch_size, channels))
    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
    return ops.reshape(x, (-1, rows * cols, patch_size, patch_size, channels))


def _quantized_class(colors, bits):
    """Classes of `colors` `(..., C)` in [0, 255]: each channel's level `floor(c * 2**bits / 256)`,
    read as the digits of a base-`2**bits` number, the first channel most significant."""
    levels = 2**bits
    # A mean colour of exactly 255 falls in the top level, not one past it.
    digits = ops.clip(ops.floor(colors * (levels / 256.0)), 0, levels - 1)
    channels = colors.shape[-1]
    weights = ops.convert_to_tensor([float(levels ** (channels - 1 - c)) for c in range(channels)])
    return ops.cast(ops.sum(digits * weights, axis=-1), "int32")


def mean_color_targets(images, patch_size, bits=3):
    """The class of each patch's mean colour: ViT's default masked-patch target.

    Each channel's mean over the patch, `m` in [0, 255], falls in level
    `floor(m * 2**bits / 256)` of `2**bits`; the class is those levels read
    as a base-`2**bits` number, the first channel most significant (for RGB
    at 3 bits, `64 r + 8 g + b`, 512 classes).

    Args:
        images: `(batch, height, width, channels)`, uint8 or float in
            [0, 255]; height and width multiples of `patch_size`.
        patch_size: int. Side of the square patches, as the model's.
        bits: int in [1, 8]. Bits per channel. Defaults to 3.

    Returns:
        int32 tensor `(batch, num_patches)` in `[0, 2 ** (bits * channels))`,
        patches in raster order (row by row), as `keras_vit.layers.Patches`.

    Raises:
        ValueError: for images not of rank 4 or not divisible into patches,
            or a `patch_size` or `bits` out of range, naming the argument.
    """
    _check_images(images, patch_size, bits)
    means = ops.mean(_patch_pixels(images, patch_size), axis=(2, 3))
    return _quantized_class(means, bits)


def downsized_patch_targets(images, patch_size, size=4, bits=3):
    """Each patch averaged down to `size x size` cells, each cell's colour a class.

    ViT App. B.1.2's second target: "predicting a 4x4 downsized version of the
    16x16 patch with 3bit colors in parallel (i.e., 16 predictions of 512
    colors)". Cells are the means of `patch_size / size` square blocks,
    quantized as in `mean_color_targets`.

    Args:
        images: as in `mean_color_targets`.
        patch_size: int. Side of the patches; a multiple of `size`.
        size: int. Cells per side. Defaults to 4.
        bits: int in [1, 8]. Defaults to 3.

    Returns:
        int32 tensor `(batch, num_patches, size * size)`, cells in raster order.

    Raises:
        ValueError: as `mean_color_targets`, and for a `size` that does not
            divide `patch_size`.
    """
    _check_images(images, patch_size, bits)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1 or patch_size % size:
        raise ValueError(
            f"`size` must be a positive int dividing `patch_size` ({patch_size}). Received: size={size!r}"
        )
    patches = _patch_pixels(images, patch_size)
    block = patch_size // size
    channels = patches.shape[-1]
    num_patches = patches.shape[1]
    cells = ops.reshape(patches, (-1, num_patches, size, block, size, block, channels))
    means = ops.mean(cells, axis=(3, 5))  # (batch, patches, size, size, channels)
    return ops.reshape(_quantized_class(means, bits), (-1, num_patches, size * size))


def patch_pixel_targets(images, patch_size):
    """The full patch, flattened and scaled to [-1, 1], the range of ViT's inputs: the L2 target.

    Args:
        images: as in `mean_color_targets`.
        patch_size: int.

    Returns:
        float32 tensor `(batch, num_patches, patch_size * patch_size * channels)`,
        each patch's pixels row by row, channels last (`Patches`' order).
    """
    patches = _patch_pixels(images, patch_size)
    height, width, channels = _check_images(images, patch_size)
    flat = ops.reshape(patches, (-1, patches.shape[1], patch_size * patch_size * channels))
    return flat / 127.5 - 1.0


TARGETS = ("mean_color", "downsized", "pixels")
"""The prediction targets of masked patch prediction (ViT App. B.1.2): 3-bit mean colour, 4x4
downsized patch, pixels by L2.
"""


def num_target_classes(target, channels=3, bits=3):
    """Classes per prediction of a classification target (`2 ** (bits * channels)`); None for `"pixels"`."""
    if target not in TARGETS:
        raise ValueError(f"`target` must be one of {TARGETS}. Received: target={target!r}")
    return None if target == "pixels" else 2 ** (bits * channels)


__all__ = ["TARGETS", "downsized_patch_targets", "mean_color_targets", "num_target_classes",
           "patch_pixel_targets"]
