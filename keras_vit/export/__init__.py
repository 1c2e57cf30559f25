"""Export for serving: LiteRT (`.tflite`), OpenVINO, SavedModel and `.keras`; and running the files.

- `litert`, `litert_interpreter`, `litert_predict`: `keras_vit.export.litert_format`.
- `openvino`, `openvino_compiled`, `openvino_precision`, `openvino_predict`:
  `keras_vit.export.openvino_format`.
- `saved_model` (a `serve` signature from uint8 images to probabilities):
  `keras_vit.export.saved_model_format`; `keras_file`: `keras_vit.export.keras_format`.
- `keras_quantization_mode`, `dequantized_copy` (Keras int8 models as float):
  `keras_vit.export.dequantize`.

Every export writes under a temporary name beside its target and renames it
onto the target (`keras_vit.files`): a failed export leaves the old file.
"""

from keras_vit.export.dequantize import dequantized_copy, keras_quantization_mode
from keras_vit.export.keras_format import keras_file
from keras_vit.export.litert_format import QUANTIZE_MODES, check_quantize, litert, litert_interpreter, litert_predict
from keras_vit.export.openvino_format import (
    OPENVINO_PRECISIONS,
    openvino,
    openvino_compiled,
    openvino_precision,
    openvino_predict,
)
from keras_vit.export.saved_model_format import saved_model

__all__ = [
    "OPENVINO_PRECISIONS",
    "QUANTIZE_MODES",
    "check_quantize",
    "dequantized_copy",
    "keras_file",
    "keras_quantization_mode",
    "litert",
    "litert_interpreter",
    "litert_predict",
    "openvino",
    "openvino_compiled",
    "openvino_precision",
    "openvino_predict",
    "saved_model",
]
