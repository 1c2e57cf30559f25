"""The Swin Transformer (Liu et al. 2021): a hierarchical ViT with shifted windows.

The whole family lives in this folder: its layers (`layers.py`, with the
window attention in `window_attention.py`), builder (`builder.py`, and by name in `named.py`), named
sizes and ablation switches (`sizes.py`), checkpoints (`checkpoints.py`: the
timm, Microsoft and transformers layouts; `releases.py`: the known files and
their evaluation transforms), FLOP counts (`flops.py`), what the shared inspection
and weight loader ask of a built model (`inspection.py`) and its attention
maps on windows (`analysis.py`). This `__init__` registers it with the shared
code, once (`keras_vit.models.registration`).
"""

from keras_vit.families import FamilySpec
from keras_vit.models.registration import register_family
from keras_vit.models.swin import checkpoints, releases, sizes
from keras_vit.models.swin.analysis import WindowGrid, attention_grid, window_attention_to_grid, window_grids
from keras_vit.models.swin.builder import SWIN_POSITION_EMBEDDINGS, SwinTransformer
from keras_vit.models.swin.flops import layer_macs, patch_merging_macs, swin_block_macs, swin_forward_macs
from keras_vit.models.swin.inspection import architecture_of, swin_arguments, swin_stages, weight_fitters
from keras_vit.models.swin.layers import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock
from keras_vit.models.swin.window_attention import WindowAttention
from keras_vit.weights.position_embedding import resample_bicubic

SPEC = FamilySpec(
    name="Swin",
    builders={"SwinTransformer": SwinTransformer},
    architectures=sizes.ARCHITECTURES,
    checkpoint_layout=checkpoints.checkpoint_layout,
    convert=checkpoints.convert,
    is_keras_file=checkpoints.is_keras_file,
    checkpoints=releases.known_checkpoints(),
    model_kind="a SwinTransformer",
    expected_files=(
        "a Swin checkpoint: a timm, Microsoft or transformers Swin state dict (.safetensors) or a keras_vit "
        ".keras file of a SwinTransformer"
    ),
    # Its blocks take maps, stage by stage: not ViT's one token grid.
    block_classes=(SwinTransformerBlock,),
    feature_blocks=False,
    architecture_of=architecture_of,
    layer_macs=layer_macs,
    attends_within=(
        "a Swin Transformer, whose blocks attend within windows of each stage's map (Swin Sec. 3.2): "
        "`keras_vit.models.swin.window_grids` gives each block's grid"
    ),
    features_refusal=(
        "`model` is a Swin Transformer, whose stages are already a feature hierarchy: build it with "
        "`keras_vit.SwinTransformer(..., include_top=False, return_stages=True)` (or a Swin variant with "
        "those arguments) for its stride 4-32 maps."
    ),
    # Swin's fine-tuning at another resolution resamples its absolute embedding bicubically,
    # and its bias tables to another window (Microsoft's `load_pretrained`).
    position_weight=checkpoints.SWIN_POSITION,
    resample_position=resample_bicubic,
    weight_fitters=weight_fitters,
    # Its attention maps lie on each block's windows, not on one patch grid.
    attention_grid=attention_grid,
    ablation_defaults=sizes.ABLATION_DEFAULTS,
    architecture_keys=sizes.ARCHITECTURE_KEYS,
    normalize_architecture=sizes.normalize_architecture,
)

register_family(SPEC)

__all__ = [
    "SwinTransformer", "SPEC", "SWIN_POSITION_EMBEDDINGS", "PatchMerging",
    "SwinPatchEmbedding", "SwinTransformerBlock", "WindowAttention", "WindowGrid", "window_attention_to_grid",
    "window_grids", "swin_forward_macs", "swin_block_macs", "patch_merging_macs", "swin_arguments", "swin_stages",
]
