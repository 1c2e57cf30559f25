"""ConViT (d'Ascoli et al. 2021): a ViT whose first blocks use gated positional self-attention.

The whole family lives in this folder: GPSA (`gpsa.py`) and its block
(`layers.py`), builder (`builder.py`, and by name in `named.py`), named sizes and ablation switch
(`sizes.py`), checkpoints (`checkpoints.py`: timm's layout, the published
files and their evaluation transforms), FLOP counts (`flops.py`), what the
shared inspection asks of a built model (`inspection.py`) and the gates of
ConViT's Fig. 6 (`analysis.py`). This `__init__` registers it with the shared
code, once (`keras_vit.models.registration`).
"""

from keras_vit.families import FamilySpec
from keras_vit.models.convit import checkpoints, sizes
from keras_vit.models.convit.analysis import gpsa_gating, plot_gpsa_gating
from keras_vit.models.convit.builder import ConViT
from keras_vit.models.convit.flops import layer_macs
from keras_vit.models.convit.gpsa import GPSA
from keras_vit.models.convit.inspection import architecture_of, gpsa_blocks
from keras_vit.models.convit.layers import GPSABlock
from keras_vit.models.registration import register_family
from keras_vit.weights.position_embedding import resample_position_embedding

SPEC = FamilySpec(
    name="ConViT",
    builders={"ConViT": ConViT},
    architectures=sizes.ARCHITECTURES,
    checkpoint_layout=checkpoints.checkpoint_layout,
    convert=checkpoints.convert,
    is_keras_file=checkpoints.is_keras_file,
    checkpoints=checkpoints.known_checkpoints(),
    model_kind="a ConViT",
    expected_files=(
        "a ConViT checkpoint: a timm ConViT state dict (.safetensors) or a keras_vit .keras file of a ConViT"
    ),
    block_classes=(GPSABlock,),
    architecture_of=architecture_of,
    layer_macs=layer_macs,
    ablation_defaults=sizes.ABLATION_DEFAULTS,
    architecture_keys=sizes.ARCHITECTURE_KEYS,
    testing_variants={
        "convit": (ConViT, dict(image_size=32, patch_size=8, hidden_size=32, num_layers=3, num_heads=4, mlp_dim=64,
                                num_gpsa_layers=2, num_classes=10)),
    },
    # A checkpoint's grid resampled as a ViT's (bilinear, as timm's loader), not as the model
    # resamples per call.
    resample_position=resample_position_embedding,
    check_values=checkpoints.check_values,
)

register_family(SPEC)

__all__ = ["ConViT", "SPEC", "GPSA", "GPSABlock", "gpsa_blocks", "gpsa_gating", "plot_gpsa_gating"]
