"""Intermediate features of the ViT-like models (Axial-ViT too), and ViTDet's simple feature pyramid.

`features` taps the transformer blocks (and a hybrid's ResNet stages) of a
model that is already built, as timm's `forward_intermediates` does: the
returned `keras.Model` shares the layers, and so the weights, of the model it
was cut from, and holds only what the chosen outputs need (no head).
`simple_feature_pyramid` puts ViTDet's multi-scale neck (Li et al. 2022,
"Exploring Plain Vision Transformer Backbones for Object Detection", Sec. 3)
on one block's map.

Layers are found by their class and their order in the graph, never by name,
so models loaded from `.keras` files and renamed models work as well.
"""

import math

import keras

from keras_vit import inspection
from keras_vit.layers.patching import PatchEncoder, Patches
from keras_vit.layers.pyramid import PatchTokenMap, SimpleFeaturePyramidLevel
from keras_vit.layers.validation import check_bool, check_positive_int

OUTPUTS = ("tokens", "maps")
PYRAMID_STRIDES = (4, 8, 16, 32)


class _Backbone:
    """What `features` needs of a model: its blocks, final norm, patch grid and ResNet levels."""

    def __init__(self, model):
        inspection.check_model(model)
        spec = inspection.registered_family(model)
        if spec is not None and spec.features_refusal:
            raise ValueError(f"{spec.features_refusal} Received: model={model.name!r}")
        # A registered family's blocks may take the patch grid itself (Axial-ViT's
        # row and column blocks): their outputs are the maps, with no prefix tokens to drop.
        self.blocks = inspection.layers_of(model, inspection.vit_block_classes())
        encoders = inspection.layers_of(model, PatchEncoder)
        patches = inspection.layers_of(model, Patches)
        if not self.blocks or len(encoders) != 1 or len(patches) != 1 or len(model.inputs) != 1:
            raise ValueError(
                "`model` must be a keras_vit model with one patch grid (a ViT, DeiT or hybrid ResNet+ViT, "
                "or a registered family's: built by a keras_vit builder or one of its "
                "variants, or loaded from a .keras file of one), with its blocks "
                f"({', '.join(cls.__name__ for cls in inspection.vit_block_classes())}) at the top level. "
                f"Received: model={model.name!r}"
            )
        self.model = model
        self.input = model.inputs[0]
        self.width = self.blocks[-1].output.shape[-1]
        # The tokens lie on the patch grid that `PatchEncoder` embeds; its
        # height and width are static, or None for a variable image size.
        self.patch_grid = encoders[0].input
        self.grid = tuple(self.patch_grid.shape[1:3])
        self.num_prefix_tokens = inspection.prefix_token_counts(model)
        self.stride = inspection.token_stride(model)
        self.resnet_levels = inspection.resnet_levels(model)

    def _output(self, index, norm):
        """The output of block `index`, through the final LayerNorm if `norm`."""
        x = self.blocks[index].output
        if not norm:
            return x
        # The backbone's end (`keras_vit.backbone`), looked up only when asked
        # for: a model cut after a block has none.
        return inspection.final_norm(self.model)(x)

    def tokens(self, index, norm, name):
        """Block `index`'s output as a `(batch, tokens, D)` sequence."""
        x = self._output(index, norm)
        if len(x.shape) == 4:
            # ConViT's GPSA blocks (with a variable image size) and Axial-ViT's
            # blocks take the patch grid as a map.
            policy = self.blocks[index].dtype_policy
            x = keras.layers.Reshape((-1, self.width), dtype=policy, name=f"{name}_tokens")(x)
        return x

    def map(self, index, norm, name):
        """Block `index`'s patch tokens as a `(batch, h, w, D)` map, prefix tokens dropped."""
        x = self._output(index, norm)
        if len(x.shape) == 4:
            return x
        return PatchTokenMap(
            self.num_prefix_tokens[index], dtype=self.blocks[index].dtype_policy, name=f"{name}_map"
        )([x, self.patch_grid])


def _take_indices(value, count, name, what):
    """Absolute, sorted, distinct indices for timm's `indices` convention.

    None takes all `count`, an int `n` the last `n`, a list or tuple the given
    indices (negative ones count from the end).
    """
    accepted = (
        f"`{name}` must be None (all {count} {what}), an integer n in [1, {count}] "
        f"(the last n) or a list of indices in [{-count}, {count - 1}]"
    )
    if value is None:
        return list(range(count))
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= count:
            raise ValueError(f"{accepted}. Received: {name}={value!r}")
        return list(range(count - value, count))
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(i, int) and not isinstance(i, bool) and -count <= i < count for i in value
    ):
        raise ValueError(f"{accepted}. Received: {name}={value!r}")
    return sorted({i % count for i in value})


def features(model, blocks=None, output="maps", norm=False, stages=None, name=None):
    """A model giving the outputs of chosen transformer blocks (timm's `forward_intermediates`).

    Works for the ViT, DeiT (with or without the distillation token), the
    hybrid ResNet+ViT, ConViT and Axial-ViT built by keras_vit (an Axial-ViT's
    blocks are its row and column blocks, two per ViT block, in graph order:
    block `2 i` is `encoderblock_{i}_row`). The returned model shares
    the layers and weights of `model`. Swin is refused with a pointer to its
    own `return_stages=True`, which gives its stage maps.

    Args:
        model: A `keras.Model` built by `keras_vit.VisionTransformer`,
            `keras_vit.ConViT` or `keras_vit.AxialViT` (or a variant, or loaded
            from a `.keras` file of one), with or without its top.
        blocks: None, int or list of ints. Which blocks: None for all, an int
            `n` for the last `n`, a list for those indices (from 0; negative
            ones count from the end), as timm's `indices`; an index given twice
            (`1` and `-1` of two blocks) gives one output. `[]` for none (with
            `stages`). Defaults to None.
        output: `"tokens"` or `"maps"`. `"tokens"`: each block's whole output
            `(batch, tokens, D)`, prefix tokens (class, distillation) first as
            the block sees them. `"maps"`: the patch tokens only, laid out on
            the patch grid `(batch, h, w, D)`, as timm's NCHW intermediates
            but channels-last. A model built with `dynamic_image_size` gives
            the grid of each input it is called on. Defaults to `"maps"`.
        norm: bool. Pass each output through the model's final LayerNorm
            (timm's `norm=True`). Defaults to False.
        stages: None, int or list of ints. For a hybrid, also return its
            ResNet levels, chosen as `blocks` are: level 0 is the root (stride
            2, after its GroupNorm and ReLU, before the max-pool), level `i`
            the output of ResNet stage `i` (stride `2**(i + 1)`), as timm's
            `ResNetV2.forward_intermediates`. Always maps, never normalized.
            Defaults to None (none).
        name: str or None. Name of the returned model. Defaults to
            `"{model.name}_features"`.

    Returns:
        A `keras.Model` taking the inputs of `model` and returning a dict:
        `"block_{i}"` for each chosen block `i` (absolute index) and
        `"stage_{i}"` for each chosen ResNet level.

    Raises:
        ValueError: for a model that is not a keras_vit ViT, DeiT, hybrid,
            ConViT or Axial-ViT, or for an invalid argument, naming it.
    """
    backbone = _Backbone(model)
    if output not in OUTPUTS:
        raise ValueError(f"`output` must be one of {OUTPUTS}. Received: output={output!r}")
    check_bool(norm, "norm")
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"`name` must be None or a non-empty string. Received: name={name!r}")
    block_indices = _take_indices(blocks, len(backbone.blocks), "blocks", "blocks")
    level_indices = []
    if stages is not None:
        if not backbone.resnet_levels:
            raise ValueError(
                "`stages` selects the ResNet levels of a hybrid ResNet+ViT (`resnet_stages` "
                f"set), and `model` has no ResNet. Received: stages={stages!r}, model={model.name!r}"
            )
        levels = len(backbone.resnet_levels)
        level_indices = _take_indices(stages, levels, "stages", "ResNet levels")
    if not block_indices and not level_indices:
        raise ValueError(
            "Nothing to return: choose at least one block (or, for a hybrid, one ResNet level "
            f"with `stages`). Received: blocks={blocks!r}, stages={stages!r}"
        )
    outputs = {}
    for index in level_indices:
        outputs[f"stage_{index}"] = backbone.resnet_levels[index]
    for index in block_indices:
        key = f"block_{index}"
        outputs[key] = backbone.map(index, norm, key) if output == "maps" else backbone.tokens(index, norm, key)
    return keras.Model(backbone.input, outputs, name=name or f"{model.name}_features")


def _check_strides(strides):
    """Returns `strides` sorted, after checking they are distinct powers of two."""
    accepted = "`strides` must be a non-empty list of distinct powers of two, such as (4, 8, 16, 32)"
    if not isinstance(strides, (list, tuple)) or not strides or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 1 and not s & (s - 1) for s in strides
    ) or len(set(strides)) != len(strides):
        raise ValueError(f"{accepted}. Received: strides={strides!r}")
    return sorted(strides)


def simple_feature_pyramid(
    model, out_channels=256, strides=PYRAMID_STRIDES, block=-1, norm=False, name=None
):
    """ViTDet's simple feature pyramid on one block of a plain ViT (Li et al. 2022, Sec. 3).

    The block's map (stride `P`, e.g. 16 for patch 16) gives every level by
    itself, without FPN's top-down path: the level of stride `s` is
    `SimpleFeaturePyramidLevel(out_channels, scale=P / s)`, i.e. for `P / s =
    2**k` with `k > 0`, `k` stride-2 2x2 transposed convolutions (channels
    halved by each, LayerNorm + GELU between them); for `k = 0` the map
    itself; for `k < 0`, `-k` 2x2 max-poolings; then 1x1 conv, LayerNorm, 3x3
    conv, LayerNorm to `out_channels` (paper Fig. 2c; detectron2's
    `SimpleFeaturePyramid` without its extra `LastLevelMaxPool` level). With
    patch 16 this is the paper's {4x up, 2x up, identity, 2x max-pool}; with
    patch 8 it is {2x up, identity, 2x, 4x max-pool}. `P` is the token stride:
    the patch size, times the ResNet's downsampling for a hybrid. It must be
    the same along both axes and a power of two, as must each of `strides`.

    Args:
        model: A keras_vit ViT, DeiT, hybrid, ConViT or Axial-ViT, as for `features`.
        out_channels: int. Channels of every level. Defaults to 256.
        strides: list of ints. The levels' strides in pixels, distinct
            powers of two. Defaults to `(4, 8, 16, 32)`.
        block: int. The block whose map feeds the pyramid; negative counts
            from the end. Defaults to -1 (the last, as in ViTDet).
        norm: bool. Pass the block's output through the model's final
            LayerNorm first. ViTDet's backbone has no final norm, so defaults
            to False.
        name: str or None. Name of the returned model. Defaults to
            `"{model.name}_pyramid"`.

    Returns:
        A `keras.Model` taking the inputs of `model` and returning a dict
        `{"p{log2(s)}": map}`, e.g. `"p2"` for stride 4: channels-last maps of
        shape `(batch, h * P / s, w * P / s, out_channels)` on the `(h, w)`
        patch grid, rounded down where max-pooling halves an odd size.

    Raises:
        ValueError: for a model or an argument the pyramid cannot be built
            from, naming it.
    """
    backbone = _Backbone(model)
    check_positive_int(out_channels, "out_channels")
    strides = _check_strides(strides)
    count = len(backbone.blocks)
    if not isinstance(block, int) or isinstance(block, bool) or not -count <= block < count:
        raise ValueError(
            f"`block` must be a block index in [{-count}, {count - 1}]. Received: block={block!r}"
        )
    check_bool(norm, "norm")
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"`name` must be None or a non-empty string. Received: name={name!r}")
    token_stride = backbone.stride
    if token_stride[0] != token_stride[1] or token_stride[0] & (token_stride[0] - 1):
        raise ValueError(
            "The simple feature pyramid resamples the token map by powers of two, so the "
            "token stride (the patch size, times the ResNet's downsampling for a hybrid) "
            "must be the same power of two along both axes. "
            f"Received: model={model.name!r} with token stride {token_stride}"
        )
    token_stride = token_stride[0]
    base = backbone.map(block % count, norm, f"block_{block % count}")
    outputs = {}
    for stride in strides:
        steps = int(math.log2(token_stride)) - int(math.log2(stride))
        if steps < 0 and None not in backbone.grid and min(backbone.grid) < 2**-steps:
            raise ValueError(
                f"Stride {stride} max-pools the {backbone.grid} token map of stride {token_stride} "
                f"by {2**-steps}, which leaves nothing; use a larger image or smaller strides. "
                f"Received: strides={tuple(strides)}"
            )
        if steps > 0 and backbone.width < 2**steps:
            raise ValueError(
                f"Stride {stride} upsamples the stride-{token_stride} token map {2**steps}x, halving "
                f"its {backbone.width} channels {steps} times; use larger strides. "
                f"Received: strides={tuple(strides)}"
            )
        level = f"p{int(math.log2(stride))}"
        outputs[level] = SimpleFeaturePyramidLevel(
            out_channels,
            2.0**steps,
            dtype=backbone.blocks[block].dtype_policy,
            name=f"pyramid_{level}",
        )(base)
    return keras.Model(backbone.input, outputs, name=name or f"{model.name}_pyramid")
