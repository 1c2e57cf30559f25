"""keras_vit.analysis.flops: ViT-B vs Axial-ViT-B (ViT App. D.5, Fig. 12) by hand, and as traced."""

import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import analysis
from keras_vit.architectures import ARCHITECTURES
from keras_vit.models import axial as axial_family
from keras_vit.models.axial import SPEC as AXIAL

AXIAL_VARIANTS = {name: config for name, (_, config) in AXIAL.architectures.items()}

# image 32 x 48, patch 8: a 4 x 6 grid; width 32, 2 heads, 2 blocks.
TINY = dict(image_size=(32, 48), patch_size=8, hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64,
            num_classes=10)


def hand_block_macs(lines, width, mlp_dim):
    """One block's products, line by line: each line of `n` tokens attends within itself.

    ViT's block has one line (every token); an axial block has one per row or column.
    """
    tokens = sum(lines)
    qkv, out = 3 * tokens * width * width, tokens * width * width
    scores = sum(n * n * width for n in lines)  # q k^T, all heads together
    mix = sum(n * n * width for n in lines)  # A v
    fc1, fc2 = tokens * width * mlp_dim, tokens * mlp_dim * width
    return qkv + out + scores + mix + fc1 + fc2


def hand_forward_macs(rows, cols, patch, depth_lines, width=768, mlp_dim=3072, classes=1000):
    embedding = rows * cols * patch * patch * 3 * width
    return embedding + sum(hand_block_macs(lines, width, mlp_dim) for lines in depth_lines) + width * classes


@pytest.mark.parametrize("patch", [16, 32])
def test_vit_b_and_axial_vit_b_at_224_against_a_hand_count(patch):
    side = 224 // patch
    vit_lines = [[side * side + 1]] * 12  # the patches and the class token, attended together
    axial_lines = [[side] * side] * 24  # 12 row blocks and 12 column blocks, `side` lines of `side`
    vit = analysis.vit_forward_macs(**ARCHITECTURES[f"ViT_B{patch}"][1])
    axial = axial_family.axial_vit_forward_macs(**AXIAL_VARIANTS[f"AxialViT_B{patch}"])
    assert vit == hand_forward_macs(side, side, patch, vit_lines)
    assert axial == hand_forward_macs(side, side, patch, axial_lines)
    # Fig. 12: Axial-ViT costs more than its ViT, nearly twice: every block's
    # projections and MLP run twice, the shorter attention saves little.
    assert 1.85 < axial / vit < 1.95
    expected_gmacs = {16: (17.56, 33.51), 32: (4.41, 8.45)}[patch]
    assert (round(vit / 1e9, 2), round(axial / 1e9, 2)) == expected_gmacs


def test_axial_block_attends_lines_of_the_grid():
    # A row block of a 4 x 6 grid attends 4 lines of 6, a column block 6 lines of 4.
    assert axial_family.axial_block_macs((4, 6), 32, 64, "row") == hand_block_macs([6] * 4, 32, 64)
    assert axial_family.axial_block_macs((4, 6), 32, 64, "column") == hand_block_macs([4] * 6, 32, 64)
    assert analysis.encoder_block_macs(24, 32, 64) == hand_block_macs([24], 32, 64)


@pytest.mark.parametrize(
    "builder,count,overrides",
    [
        (keras_vit.AxialViT, axial_family.axial_vit_forward_macs, {}),
        (keras_vit.AxialViT, axial_family.axial_vit_forward_macs, {"image_size": 32, "representation_size": 16}),
        (keras_vit.VisionTransformer, analysis.vit_forward_macs, {}),
        (keras_vit.VisionTransformer, analysis.vit_forward_macs, {"pooling": "gap", "include_top": False}),
    ],
)
def test_built_model_count_equals_count_from_arguments(builder, count, overrides):
    arguments = {**TINY, **overrides}
    model = builder(**arguments)
    assert analysis.forward_macs(model) == count(**arguments)
    assert analysis.inference_flops(model) == 2 * count(**arguments)
    assert analysis.train_flops(model) == 6 * count(**arguments)


def traced_macs(model, batch=2):
    """Multiply-adds of every product JAX traces in the model's forward pass, per image.

    Read from the jaxpr, nested calls included: a `dot_general` costs its
    output's size times its contracted size. An independent count of what the
    layers actually multiply, not of what the formulas say they should.
    """
    import jax

    images = np.zeros((batch, *model.input_shape[1:]), "float32")
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    jaxpr = jax.make_jaxpr(
        lambda t, n, x: model.stateless_call(t, n, x, training=False)[0]
    )(trainable, non_trainable, images)
    total = _jaxpr_macs(jaxpr.jaxpr)
    assert total % batch == 0
    return total // batch


def _jaxpr_macs(jaxpr):
    total = 0
    for equation in jaxpr.eqns:
        if equation.primitive.name == "conv_general_dilated":
            # Each output value is a product over the kernel's window and input channels.
            kernel = equation.invars[1].aval.shape
            output_features = kernel[equation.params["dimension_numbers"].rhs_spec[0]]
            total += math.prod(equation.outvars[0].aval.shape) * math.prod(kernel) // output_features
        if equation.primitive.name == "dot_general":
            (contracted, _), _ = equation.params["dimension_numbers"]
            lhs = equation.invars[0].aval.shape
            total += math.prod(equation.outvars[0].aval.shape) * math.prod(lhs[d] for d in contracted)
        for value in equation.params.values():
            for inner in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr holds its Jaxpr
                if hasattr(inner, "eqns"):
                    total += _jaxpr_macs(inner)
    return total


TINY_SWIN = dict(image_size=32, patch_size=4, embed_dim=16, depths=(2, 2), num_heads=(2, 4), window_size=4,
                 num_classes=10)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="traces the forward pass with JAX")
@pytest.mark.parametrize("builder, arguments", [
    (keras_vit.AxialViT, TINY),
    (keras_vit.VisionTransformer, TINY),
    # The ablations whose products differ: relative attention's q r^T, and Swin
    # without the content term (no query and key projections, no q k^T).
    (keras_vit.VisionTransformer, {**TINY, "position_embedding": "relative"}),
    (keras_vit.SwinTransformer, TINY_SWIN),
    (keras_vit.SwinTransformer, {**TINY_SWIN, "position_embedding": "relative_without_content"}),
])
def test_analytic_count_equals_the_traced_products(builder, arguments):
    model = builder(**arguments)
    assert traced_macs(model) == analysis.forward_macs(model)


def test_dynamic_image_size_has_no_static_count():
    model = keras_vit.AxialViT(**TINY, dynamic_image_size=True)
    with pytest.raises(ValueError, match=r"build it with a fixed image size"):
        analysis.forward_macs(model)
    with pytest.raises(ValueError, match=r"`image_size` must be divisible by `patch_size`. Received: image_size=30"):
        axial_family.axial_vit_forward_macs(image_size=30, patch_size=8)
