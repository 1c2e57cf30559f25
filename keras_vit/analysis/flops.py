"""Analytic multiply-accumulate (MAC) counts of keras_vit models, per image.

Counted: every matrix product and convolution (patch embedding, q/k/v and output
projections, q k^T and A v, the MLPs, GPSA's positional projection, the ResNet
convolutions, Swin's patch merging, pre-logits and heads). Not counted:
normalizations, softmaxes, activations, additions and Swin's relative position
bias, which are a few percent at most. Training costs 3x the forward pass
(forward, and two products per weight in the backward), so training FLOPs per
image = 6 x forward MACs (2 FLOPs per MAC). The Swin paper's "FLOPs" (Table 1)
are these MACs.

A pre-norm block on `N` tokens of width `D`, each attending to `A` tokens, with
an MLP of hidden width `M`, costs `4 N D^2 + 2 N A D + 2 N D M` (`encoder_block_macs`):
ViT's global attention has `A = N`; Axial-ViT's row block on a `(rows, cols)`
grid `A = cols`, its column block `A = rows` (ViT App. D.5). Axial-ViT's shorter
attention saves little next to the projections and the MLP it doubles, which is
why the paper's Fig. 12 finds it costlier than ViT: at 224 px, B/16 costs 17.6
GMACs and Axial-B/16 33.5 (`vit_forward_macs`, and
`keras_vit.models.axial.axial_vit_forward_macs` in Axial-ViT's folder).
"""

import math

from keras_vit.families import layer_macs
from keras_vit.layers.bit import ResNetStage, StandardizedConv2D
from keras_vit.layers.patching import PatchEncoder
from keras_vit.layers.relative_attention import RelativeSelfAttention
from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import check_positive_int, to_pair

# The dense layers after the pooling that `forward_macs` counts, by the builders' names.
_HEAD_NAMES = ("head", "head_dist", "pre_logits")


def encoder_block_macs(num_tokens, width, mlp_dim, attended=None):
    """MACs of one pre-norm transformer block (ViT Eq. 2-3, or an axial block of App. D.5).

    `4 N D^2` for the q, k, v and output projections, `2 N A D` for `q k^T` and
    `A v` (all heads together) and `2 N D M` for the MLP.

    Args:
        num_tokens: int. `N`, the tokens the block transforms.
        width: int. `D`.
        mlp_dim: int. `M`, the MLP's hidden width.
        attended: int or None. `A`, how many tokens each token attends to:
            None for global attention (`N`), the row length for a row block,
            the column length for a column block.

    Returns:
        int.
    """
    attended = num_tokens if attended is None else attended
    projections = 4 * num_tokens * width * width
    attention = 2 * num_tokens * attended * width
    mlp = 2 * num_tokens * width * mlp_dim
    return projections + attention + mlp


def block_macs(block, length, width):
    """MACs of one `TransformerBlock` on `length` tokens of `width`.

    Relative attention's query-offset products (`q r^T`: `N^2 D`) included; a
    registered family counts its own blocks (ConViT's GPSA positional scores).
    """
    macs = encoder_block_macs(length, width, block.mlp_dim)
    if isinstance(block.attention, RelativeSelfAttention):
        macs += length * length * width
    return macs


def vit_forward_macs(
    image_size=224,
    patch_size=16,
    num_channels=3,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    mlp_dim=3072,
    num_classes=1000,
    include_top=True,
    pooling="token",
    representation_size=None,
    distillation=False,
):
    """Forward MACs per image of a `VisionTransformer` (no ResNet stem) from its arguments.

    The same count as `forward_macs` of the built model, without building it:
    the patch embedding, `num_layers` blocks on the patches plus the class (and
    distillation) token, and the head. `num_heads` does not change the count
    and is taken so that a variant's table entry can be passed as it is.

    Returns:
        int.
    """
    (rows, cols), patch = patch_grid_and_size(image_size, patch_size)
    tokens = rows * cols + (1 + distillation if pooling == "token" else 0)
    total = rows * cols * patch[0] * patch[1] * num_channels * hidden_size
    total += num_layers * encoder_block_macs(tokens, hidden_size, mlp_dim)
    return total + head_macs(hidden_size, num_classes, include_top, representation_size, 1 + distillation)


def patch_grid_and_size(image_size, patch_size):
    """`((rows, cols), (patch_h, patch_w))` of an image cut into patches; refuses sizes that do not divide."""
    image, patch = to_pair(image_size, "image_size"), to_pair(patch_size, "patch_size")
    if image[0] % patch[0] or image[1] % patch[1]:
        raise ValueError(
            f"`image_size` must be divisible by `patch_size`. Received: image_size={image_size}, "
            f"patch_size={patch_size}"
        )
    return (image[0] // patch[0], image[1] // patch[1]), patch


def head_macs(width, num_classes, include_top, representation_size, num_heads):
    """MACs of the pre-logits and `num_heads` classifier heads after the pooling (0 without a top)."""
    if not include_top:
        return 0
    check_positive_int(num_classes, "num_classes")
    if representation_size is None:
        return num_heads * width * num_classes
    return width * representation_size + representation_size * num_classes


def _conv_macs(layer, output_shape, in_channels):
    kh, kw = layer.kernel_size
    return output_shape[1] * output_shape[2] * kh * kw * in_channels * layer.filters


def _stage_macs(stage, input_shape):
    height, width, channels = input_shape[1:]
    total = 0
    for unit in stage.units:
        sh, sw = unit.strides
        out_h, out_w = math.ceil(height / sh), math.ceil(width / sw)
        f = unit.filters
        total += height * width * channels * f  # conv1 (1x1)
        total += out_h * out_w * 9 * f * f  # conv2 (3x3, strided)
        total += out_h * out_w * f * 4 * f  # conv3 (1x1)
        if unit.needs_projection:
            total += out_h * out_w * channels * 4 * f
        height, width, channels = out_h, out_w, 4 * f
    return total


def forward_macs(model):
    """Forward MACs per image of a keras_vit model (ViT, hybrid, DeiT, ConViT, Axial-ViT or Swin).

    Read from the layers' static shapes.

    Raises:
        ValueError: for a model built with `dynamic_image_size`, whose token
            count is known only per call.
    """
    if any(size is None for size in model.inputs[0].shape[1:]):
        raise ValueError(
            "`forward_macs` counts from the model's static shapes; build it with a fixed image size "
            f"(without `dynamic_image_size`). Received: a model with input shape {model.inputs[0].shape}"
        )
    total = 0
    for layer in model.layers:
        # A registered family's layers, by its own count (`FamilySpec.layer_macs`): asked first, since
        # a family's block may be a `TransformerBlock` with more to count (ConViT's GPSA).
        registered = layer_macs(layer)
        if registered is not None:
            total += registered
        elif isinstance(layer, StandardizedConv2D):
            total += _conv_macs(layer, layer.output.shape, layer.input.shape[-1])
        elif isinstance(layer, ResNetStage):
            total += _stage_macs(layer, layer.input.shape)
        elif isinstance(layer, PatchEncoder):
            rows, cols = layer.grid_size
            total += rows * cols * layer.input.shape[-1] * layer.hidden_size
        elif isinstance(layer, TransformerBlock):
            length, width = math.prod(layer.input.shape[1:-1]), layer.input.shape[-1]
            total += block_macs(layer, length, width)
        elif layer.name in _HEAD_NAMES:
            total += layer.input.shape[-1] * layer.units
    return total


def train_flops(model):
    """Training FLOPs per image: 6 x forward MACs."""
    return 6 * forward_macs(model)


def inference_flops(model):
    """Inference FLOPs per image: 2 x forward MACs."""
    return 2 * forward_macs(model)
