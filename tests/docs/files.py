"""Files a page's code reads, made before its blocks run: what stands for the reader's own.

`PAGE_FILES[page](folder)` writes them into the folder the page's Python blocks run in.
"""

import os

import numpy as np
from PIL import Image

# What the guide calls the AugReg ViT-Ti/16 file (keras_vit.weights.KNOWN_CHECKPOINTS["ViT_Ti16/augreg"].url,
# downloaded elsewhere and saved under this name): random weights in that file's layout and shapes.
OFFLINE_CHECKPOINT = "vit_ti16_augreg.npz"


def photo_folder(root, per_class=(8, 4), seed=0):
    """`root/{train,validation}/{bird,cat,dog}/*.jpg`: JPEG photos of 120 to 400 pixels a side.

    Each class has its own colour cast over noise, so that a few steps learn it.
    """
    rng = np.random.default_rng(seed)
    tints = {"bird": (200, 120, 60), "cat": (60, 200, 120), "dog": (90, 90, 210)}
    for split, count in zip(("train", "validation"), per_class):
        for name, tint in tints.items():
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
            for index in range(count):
                height, width = rng.integers(120, 401, 2)
                pixels = rng.normal(tint, 40, (height, width, 3)).clip(0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(os.path.join(root, split, name, f"{index}.jpg"), quality=90)
    return root


def fine_tune_files(folder):
    """The fine-tuning guide's: `photos/`, a new `photo.jpg` (a bird) and the offline checkpoint file."""
    from tests.weights.checkpoints import official_npz_arrays, save_npz

    photo_folder(os.path.join(folder, "photos"))
    rng = np.random.default_rng(1)
    Image.fromarray(rng.normal((200, 120, 60), 40, (250, 333, 3)).clip(0, 255).astype(np.uint8)).save(
        os.path.join(folder, "photo.jpg"))
    # ViT-Ti/16 at 224 px: width 192, 3 heads, MLP 768, 12 blocks, a 14 x 14 grid, 1000 classes.
    save_npz(os.path.join(folder, OFFLINE_CHECKPOINT),
             official_npz_arrays(hidden=192, heads=3, mlp=768, depth=12, patch=16, grid=14, classes=1000))


PAGE_FILES = {"docs/guides/fine-tune.md": fine_tune_files}
