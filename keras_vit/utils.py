"""The public `keras_vit.utils` namespace: helpers that live in modules named for what they hold.

- `load_image`: `keras_vit.images`.
- `imagenet_class_names`, `decode_predictions`: `keras_vit.imagenet`.
- `write_atomically`, `write_text_atomically`, `file_sha256`: `keras_vit.files`.
"""

from keras_vit.files import file_sha256, write_atomically, write_text_atomically
from keras_vit.imagenet import decode_predictions, imagenet_class_names
from keras_vit.images import load_image

__all__ = [
    "decode_predictions",
    "file_sha256",
    "imagenet_class_names",
    "load_image",
    "write_atomically",
    "write_text_atomically",
]
