"""Real photographs for the preprocessing tests: scikit-image's bundled images, at several sizes.

The four photographs (512x512, 300x451, 400x600, 427x640) are cut into square, landscape
and portrait images, so that resizing and cropping see every aspect they meet in practice.
"""

import numpy as np
import pytest


def _photographs():
    import skimage.data

    images = {name: getattr(skimage.data, name)() for name in ("astronaut", "chelsea", "coffee", "rocket")}
    # A portrait (taller than wide) and a small image that must be upscaled.
    images["rocket_portrait"] = np.ascontiguousarray(images["rocket"][:, 120:420])
    images["chelsea_small"] = np.ascontiguousarray(images["chelsea"][100:220, 150:310])
    return images


@pytest.fixture(scope="session")
def photographs():
    """`{name: uint8 array (H, W, 3)}`: six photographs of different sizes and aspects."""
    return _photographs()
