"""Bad builder arguments: each is refused before anything is built, naming the argument.

One row per distinct bad input; the message must name the argument and show the
value received, so that it stays true as the code changes.
"""

import re

import keras
import pytest

import keras_vit
from keras_vit.layers import MultiHeadSelfAttention, TransformerBlock
from keras_vit.models.variants import TESTING_VARIANTS
from keras_vit.weights import registry


def build(family, **overrides):
    builder, config = TESTING_VARIANTS[family]
    return builder(**{**config, **overrides})


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch):
    """Every case here must fail before any network access."""

    def refuse(*args, **kwargs):
        raise AssertionError("a bad builder argument reached the download")

    monkeypatch.setattr(keras.utils, "get_file", refuse)
    monkeypatch.setattr(registry, "fetch", refuse)


# ---- shared arguments (VisionTransformer, hybrid, ConViT) ---------------------

RATE = r"must be a float in \[0, 1\)"
POSITIVE = r"must be a positive integer"
PAIR = r"must be a positive integer or a tuple of 2 positive integers"
DTYPE = r"`dtype` must be None or one of 'float32', 'bfloat16', 'mixed_bfloat16'"


@pytest.mark.parametrize(
    "family,overrides,message",
    [
        ("vit", {"dropout_rate": "0.1"}, rf"`dropout_rate` {RATE}. Received: dropout_rate='0.1'"),
        ("vit", {"dropout_rate": True}, rf"`dropout_rate` {RATE}. Received: dropout_rate=True"),
        ("vit", {"attention_dropout_rate": None}, rf"`attention_dropout_rate` {RATE}. Received: attention_dropout_rate=None"),
        ("convit", {"drop_path_rate": -0.1}, rf"`drop_path_rate` {RATE}. Received: drop_path_rate=-0.1"),
        ("vit", {"drop_path_rate": float("nan")}, rf"`drop_path_rate` {RATE}. Received: drop_path_rate=nan"),
        ("vit", {"image_size": "224"}, rf"`image_size` {PAIR}. Received: image_size='224'"),
        ("vit", {"image_size": (32.0, 32)}, rf"`image_size` {PAIR}. Received: image_size=\(32.0, 32\)"),
        ("convit", {"patch_size": True}, rf"`patch_size` {PAIR}. Received: patch_size=True"),
        ("vit", {"patch_size": (8, 8, 8)}, rf"`patch_size` {PAIR}. Received: patch_size=\(8, 8, 8\)"),
        ("vit", {"num_channels": 0}, rf"`num_channels` {POSITIVE}. Received: num_channels=0"),
        ("vit", {"hidden_size": "32"}, rf"`hidden_size` {POSITIVE}. Received: hidden_size='32'"),
        ("convit", {"num_heads": 2.0}, rf"`num_heads` {POSITIVE}. Received: num_heads=2.0"),
        ("vit", {"num_layers": None}, rf"`num_layers` {POSITIVE}. Received: num_layers=None"),
        ("vit", {"mlp_dim": -64}, rf"`mlp_dim` {POSITIVE}. Received: mlp_dim=-64"),
        ("vit", {"num_classes": "10"}, rf"`num_classes` {POSITIVE}. Received: num_classes='10'"),
        ("convit", {"representation_size": 0}, rf"`representation_size` {POSITIVE}. Received: representation_size=0"),
        ("vit", {"pooling": None}, r"`pooling` must be one of \('token', 'gap'\). Received: pooling=None"),
        ("vit", {"preprocessing": 1}, r"`preprocessing` must be one of \('inception', 'imagenet', None\). Received: preprocessing=1"),
        ("vit", {"classifier_activation": "softmaxx"}, r"`classifier_activation` must be None, an activation name .* Received: classifier_activation='softmaxx'"),
        ("vit", {"include_top": "False"}, r"`include_top` must be True or False. Received: include_top='False'"),
        ("convit", {"remat": "yes"}, r"`remat` must be True or False. Received: remat='yes'"),
        ("vit", {"dtype": "int32"}, rf"{DTYPE}.*Received: dtype='int32'"),
        ("hybrid", {"dtype": "uint8"}, rf"{DTYPE}.*Received: dtype='uint8'"),
        ("vit", {"dtype": "int8_from_float32"}, rf"{DTYPE}.*Received: dtype='int8_from_float32'"),
        ("vit", {"dtype": "float31"}, rf"{DTYPE}.*Received: dtype='float31'"),
        ("vit", {"dtype": 32}, rf"{DTYPE}.*Received: dtype=32"),
        ("convit", {"dtype": keras.DTypePolicy("int32")}, rf"{DTYPE}.*Received: dtype=<DTypePolicy \"int32\">"),
        ("vit", {"name": ""}, r"`name` must be a non-empty string. Received: name=''"),
        ("vit", {"name": 7}, r"`name` must be a non-empty string. Received: name=7"),
        ("vit", {"weights": 5}, r"`weights` must be a checkpoint file path or a known checkpoint name. Received: weights=5 \(of type int\)"),
        ("vit", {"weights": "imagenet21k"}, r"`weights` must be a checkpoint file or a known checkpoint name \(.*Received: weights='imagenet21k'"),
        ("vit", {"weights": "/data/vit_b16.npz"}, r"`weights` file not found: '/data/vit_b16.npz' does not exist"),
    ],
)
def test_shared_argument(family, overrides, message):
    with pytest.raises(ValueError, match=message):
        build(family, **overrides)


# ---- the hybrid's ResNet ------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"resnet_width": 0}, rf"`resnet_width` {POSITIVE}. Received: resnet_width=0"),
        ({"resnet_width": 1.5}, rf"`resnet_width` {POSITIVE}. Received: resnet_width=1.5"),
        ({"resnet_stages": "abc"}, r"`resnet_stages` must be None \(a pure ViT\) or a tuple .* Received: resnet_stages='abc'"),
        ({"resnet_stages": (1, 0)}, r"`resnet_stages` must be None .* Received: resnet_stages=\(1, 0\)"),
        ({"resnet_stages": 3}, r"`resnet_stages` must be None .* Received: resnet_stages=3"),
    ],
)
def test_resnet_argument(overrides, message):
    with pytest.raises(ValueError, match=message):
        build("hybrid", **overrides)


# ---- ConViT's own -------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"num_gpsa_layers": True}, r"`num_gpsa_layers` must be an integer in \[0, num_layers=3\]. Received: num_gpsa_layers=True"),
        ({"num_gpsa_layers": "2"}, r"`num_gpsa_layers` must be an integer in \[0, num_layers=3\]. Received: num_gpsa_layers='2'"),
        ({"num_gpsa_layers": -1}, r"`num_gpsa_layers` must be an integer in \[0, num_layers=3\]. Received: num_gpsa_layers=-1"),
        ({"locality_strength": "1.0"}, r"`locality_strength` must be a finite number >= 0. Received: locality_strength='1.0'"),
        ({"locality_strength": float("nan")}, r"`locality_strength` must be a finite number >= 0. Received: locality_strength=nan"),
        ({"locality_strength": -1.0}, r"`locality_strength` must be a finite number >= 0. Received: locality_strength=-1.0"),
    ],
)
def test_convit_argument(overrides, message):
    with pytest.raises(ValueError, match=message):
        build("convit", **overrides)


# ---- Swin's own -----------------------------------------------------------------


@pytest.mark.parametrize(
    "builder,overrides,message",
    [
        (keras_vit.Swin_T, {"image_size": 3}, r"`image_size` must be at least `patch_size` on each side \(one patch\)\. Received: image_size=3, patch_size=4$"),
        (keras_vit.SwinTransformer, {"image_size": (16, 1), "patch_size": 2, "embed_dim": 8, "depths": (2,), "num_heads": (2,)}, r"Received: image_size=\(16, 1\), patch_size=2$"),
    ],
)
def test_swin_image_smaller_than_a_patch(builder, overrides, message):
    # Was Keras' convolution error, naming neither argument.
    with pytest.raises(ValueError, match=message):
        builder(**overrides)


# ---- layers used on their own -------------------------------------------------


def test_layer_arguments():
    with pytest.raises(ValueError, match=rf"`dropout_rate` {RATE}. Received: dropout_rate='0.1'"):
        TransformerBlock(2, 64, dropout_rate="0.1")
    with pytest.raises(ValueError, match=rf"`attention_dropout_rate` {RATE}. Received: attention_dropout_rate=\[0.1\]"):
        MultiHeadSelfAttention(2, attention_dropout_rate=[0.1])


# ---- variants and known checkpoints -------------------------------------------


@pytest.mark.parametrize(
    "variant",
    ["vit_b16", None, ["ViT_B16"]],
)
def test_unknown_variant(variant):
    expected = r"Unknown variant. Expected one of \[.*'ViT_B16'.*\]. Received: variant=" + re.escape(repr(variant))
    with pytest.raises(ValueError, match=expected):
        keras_vit.build_variant(variant)


@pytest.mark.parametrize(
    "builder,overrides,message",
    [
        (keras_vit.ViT_B16, {"num_class": 10}, r"ViT_B16 \(a VisionTransformer\) got an unexpected keyword argument 'num_class'. Did you mean 'num_classes'\?"),
        (keras_vit.ConViT_Ti, {"resnet_stages": (1,)}, r"ConViT_Ti \(a ConViT\) got an unexpected keyword argument 'resnet_stages'. Accepted: \[.*'locality_strength'"),
    ],
)
def test_unknown_keyword(builder, overrides, message):
    with pytest.raises(TypeError, match=message):
        builder(**overrides)


@pytest.mark.parametrize(
    "builder,overrides,message",
    [
        # A checkpoint name that the variant does not have: its own are listed.
        (keras_vit.ViT_Ti16, {"weights": "imagenet21k"}, r"name \(or its part after '/' for a model built by that variant's builder; ViT_Ti16's are \['augreg'\]\)\..* Received: weights='imagenet21k'"),
        # A known checkpoint of another size, by its full name.
        (keras_vit.ViT_Ti16, {"weights": "ViT_B16/imagenet21k"}, r"The checkpoint 'ViT_B16/imagenet21k' is one of ViT_B16 and does not fit ViT_Ti16: hidden_size=768 vs hidden_size=192, num_heads=12 vs num_heads=3, mlp_dim=3072 vs mlp_dim=768 \(checkpoint vs model\). Nothing was downloaded."),
        # Another family of the same width.
        (keras_vit.ConViT_Ti, {"weights": "ViT_Ti16/augreg"}, r"'ViT_Ti16/augreg' is one of ViT_Ti16 and does not fit ConViT_Ti: builder='VisionTransformer' vs builder='ConViT'"),
        # A pure ViT checkpoint into the hybrid of the same transformer.
        (keras_vit.R50_ViT_B16, {"weights": "ViT_B16/augreg"}, r"does not fit R50_ViT_B16: patch_size=\(16, 16\) vs patch_size=\(1, 1\), resnet_stages=None vs resnet_stages=\(3, 4, 9\)"),
        # The right checkpoint, overridden into another architecture.
        (keras_vit.ViT_B16, {"weights": "imagenet21k", "num_channels": 1}, r"'ViT_B16/imagenet21k' is one of ViT_B16 and does not fit ViT_B16: num_channels=3 vs num_channels=1"),
        (keras_vit.ViT_S16, {"weights": "augreg", "num_layers": 6}, r"does not fit ViT_S16: num_layers=12 vs num_layers=6"),
    ],
)
def test_known_checkpoint_checked_before_building_or_downloading(builder, overrides, message):
    with pytest.raises(ValueError, match=message):
        builder(**overrides)


# ---- the builders' own `name` (issue item 7a) ---------------------------------


def test_name_names_the_model_in_builders_and_build_variant():
    assert keras_vit.ViT_Ti16(name="x", image_size=32).name == "x"
    assert keras_vit.build_variant("ViT_Ti16", name="y", image_size=32).name == "y"
    assert keras_vit.ConViT_Ti(name="z", image_size=32).name == "z"


_REMAT_TINY = {
    keras_vit.VisionTransformer: dict(image_size=16, patch_size=8, hidden_size=16, num_layers=2, num_heads=4,
                                      mlp_dim=32),
    keras_vit.ConViT: dict(image_size=16, patch_size=8, hidden_size=16, num_layers=2, num_heads=4, mlp_dim=32,
                           num_gpsa_layers=1),
    keras_vit.SwinTransformer: dict(image_size=16, patch_size=2, embed_dim=8, depths=(2,), num_heads=(2,),
                                    window_size=4),
}


@pytest.mark.parametrize("rate", ["dropout_rate", "attention_dropout_rate"])
@pytest.mark.parametrize("builder", list(_REMAT_TINY))
def test_remat_with_dropout_is_refused_alike_by_every_family(builder, rate):
    tiny = _REMAT_TINY[builder]
    with pytest.raises(ValueError, match=rf"^`remat=True` supports stochastic depth but not dropout.*"
                                         rf"Received: remat=True, {rate}=0.1$"):
        builder(**tiny, remat=True, **{rate: 0.1})
    with pytest.raises(ValueError, match=rf"Received: remat=True, {rate}=0.1"):
        keras_vit.layers.TransformerBlock(2, 32, remat=True, **{rate: 0.1})


@pytest.mark.parametrize("builder", list(_REMAT_TINY))
def test_remat_with_stochastic_depth_builds_in_every_family(builder):
    # Was refused by the ViT and ConViT builders while Swin took it, so `--config=deit --remat` failed.
    model = builder(**_REMAT_TINY[builder], remat=True, drop_path_rate=0.1)
    blocks = keras_vit.inspection.blocks(model)
    assert all(block.remat for block in blocks) and blocks[-1].drop_path_rate > 0
