"""timm, imported as an independent reference implementation (by the tests, benchmarks and experiments).

torchvision has no CPU build here: its wheel installs but its compiled ops do not
load, and `import torchvision` then fails while registering fake kernels for the
`nms` and `qnms` ops. timm imports torchvision (for its data transforms, which
these tests do not use), so the two op schemas are declared first; every other
torchvision op registration is skipped by torchvision itself when ops are absent.
"""

import contextlib

import torch


def _declare_torchvision_ops():
    try:
        import torchvision  # noqa: F401

        return
    except Exception:  # noqa: BLE001 - any failure means the ops must be declared
        pass
    import sys

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    library = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _declare_torchvision_ops.library = library  # keep the definitions alive


_declare_torchvision_ops()
import timm  # noqa: E402

__all__ = ["posterize_as_earlier_pillows", "timm", "torch"]


@contextlib.contextmanager
def posterize_as_earlier_pillows():
    """PIL's `ImageOps.posterize` keeping 0 bits (a black image), as Pillow did before version 12.

    timm's `Posterize` asks for 0 bits below level 2.5 and `PosterizeIncreasing` at
    level 10 (reached under `rand-m9-mstd0.5-inc1` with its magnitude noise, about one
    image in 770); Pillow 12+ raises there, the Pillows timm and DeiT ran on returned
    black, as `keras_vit.preprocessing` does. The patch holds inside the block
    (DataLoader workers forked inside it inherit it).
    """
    from PIL import Image, ImageOps

    original = ImageOps.posterize

    def posterize(image, bits):
        return Image.new(image.mode, image.size, 0) if bits <= 0 else original(image, bits)

    ImageOps.posterize = posterize
    try:
        yield
    finally:
        ImageOps.posterize = original
