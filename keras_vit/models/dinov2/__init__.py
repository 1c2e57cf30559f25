"""DINOv2 (Oquab et al. 2023) and DINOv2 with registers (Darcet et al., ICLR 2024).

The whole family lives in this folder: its layers (`layers.py`), builder
(`builder.py`, and by name in `named.py`), named sizes (`sizes.py`), what the shared inspection asks of a
built model (`inspection.py`) and checkpoints (`checkpoints.py`:
names, converters, evaluation preprocessing). This `__init__` registers it
with the shared code, once (`keras_vit.models.registration`).
"""

from keras_vit.families import FamilySpec
from keras_vit.models.dinov2 import checkpoints
from keras_vit.models.dinov2.builder import DINOv2
from keras_vit.models.dinov2.inspection import architecture_of
from keras_vit.models.dinov2.layers import DINOv2Block, LayerScale, RegisterTokens, SwiGLUBlock
from keras_vit.models.dinov2.sizes import ARCHITECTURE_KEYS, ARCHITECTURES
from keras_vit.models.registration import register_family

SPEC = FamilySpec(
    name="DINOv2",
    builders={"DINOv2": DINOv2},
    architectures=ARCHITECTURES,
    architecture_keys=ARCHITECTURE_KEYS,
    block_classes=(DINOv2Block,),
    architecture_of=architecture_of,
    checkpoint_layout=checkpoints.checkpoint_layout,
    convert=checkpoints.convert,
    is_keras_file=lambda arrays: any(key.endswith("/ls1/gamma") for key in arrays),
    checkpoints=checkpoints.known_checkpoints(),
    expected_files=(
        "a DINOv2 checkpoint: a timm `vit_*_patch14[_reg4]_dinov2` or transformers `Dinov2Model` / "
        "`Dinov2WithRegistersModel` state dict (.safetensors) or a keras_vit .keras file of a DINOv2 model"
    ),
)

register_family(SPEC)

__all__ = ["DINOv2", "DINOv2Block", "LayerScale", "RegisterTokens", "SwiGLUBlock", "SPEC"]
