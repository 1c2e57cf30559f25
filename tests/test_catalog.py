"""The site's checkpoint table (`keras_vit.catalog`): a row per known checkpoint, each column from its source."""

import pathlib

import pytest

from keras_vit import preprocessing
from keras_vit.architectures import ARCHITECTURES
from keras_vit.preprocessing.checkpoints import EvalConfig
from keras_vit import catalog
from keras_vit.checkpoints import KNOWN_CHECKPOINTS
from tests.models.test_variants import EXPECTED_PARAMETERS


@pytest.fixture(scope="module")
def rows():
    return {row["checkpoint"]: row for row in catalog.checkpoint_rows()}


def _width_and_stride(variant):
    """The token width at the head and the patch stride (None for Swin) of a variant."""
    _, config = ARCHITECTURES[variant]
    if "embed_dim" in config:  # Swin: the last stage's width, 8 x the first
        return config["embed_dim"] * 8, None
    # BiT's stem and three stages: stride 16; ConViT's table leaves its patch at the default 16.
    return config["hidden_size"], 16 if "resnet_stages" in config else config.get("patch_size", 16)


def expected_parameters(key):
    """The variant's reference count (`EXPECTED_PARAMETERS`), moved to the checkpoint's settings by hand.

    The reference counts are at the variant's own resolution (384 px for the `384`
    ones) with 1000 classes; DINOv2's at 518 px without a head, as its files are.
    A head of other classes adds (width + 1) x (classes - 1000); a pre-logits layer
    width^2 + width; a ViT at another resolution (grid^2 - own grid^2) x width
    position embeddings.
    """
    variant = key.split("/")[0]
    config = KNOWN_CHECKPOINTS[key].config
    count = EXPECTED_PARAMETERS[variant]
    if variant.startswith("DINOv2"):
        return count
    width, stride = _width_and_stride(variant)
    count += (width + 1) * (config["num_classes"] - 1000)
    if config.get("representation_size"):
        count += width * width + width
    own_size = 384 if "384" in variant else 224
    if stride is not None and config["image_size"] != own_size:
        count += ((config["image_size"] // stride) ** 2 - (own_size // stride) ** 2) * width
    return count


def test_every_known_checkpoint_has_one_row_with_its_parameter_count(rows):
    assert list(rows) == list(KNOWN_CHECKPOINTS)
    for key, row in rows.items():
        assert row["parameters"] == expected_parameters(key), key
    # Spelled out for two: ViT-B/16's ImageNet-21k file (pre-logits and 21,843 classes; timm's
    # `vit_base_patch16_224.augreg_in21k`, without pre-logits, has 102,595,923) and its 384 px fine-tune.
    assert rows["ViT_B16/imagenet21k"]["parameters"] == 102_595_923 + 768 * 768 + 768
    assert rows["ViT_B16/imagenet21k+imagenet2012"]["parameters"] == EXPECTED_PARAMETERS["DeiT_B16_384"]


def test_columns_come_from_the_evaluation_transform_and_the_file(rows):
    for key, row in rows.items():
        config = preprocessing.eval_config(key)
        trained = KNOWN_CHECKPOINTS[key].config["image_size"]
        assert row["resolution"] == (str(trained) if trained == config.image_size
                                     else f"{trained}; evaluated at {config.image_size}")
        assert row["preprocessing"] == catalog.describe_transform(config)
        assert row["load"] == f'keras_vit.{key.split("/")[0]}(weights="{key.split("/", 1)[1]}")'
        assert row["file"] == ("`.npz` (vit_jax)" if KNOWN_CHECKPOINTS[key].url.endswith(".npz")
                               else "`.safetensors` (timm hub)")
    assert rows["ViT_B16/augreg"]["preprocessing"] == (
        "bilinear, no antialiasing: whole image to 224 x 224; mean 0.5, std 0.5")
    assert rows["DeiT_S16/imagenet"]["preprocessing"] == (
        "bicubic: shorter side to 256, centre crop 224; ImageNet mean/std")
    assert rows["Swin_B384/imagenet"]["preprocessing"] == "bicubic: whole image to 384 x 384; ImageNet mean/std"


def test_a_squash_with_a_crop_and_other_statistics_are_described():
    config = EvalConfig(image_size=224, crop_fraction=0.9, crop_mode="squash", mean=(0.1, 0.2, 0.3),
                        std=(0.5, 0.5, 0.5), interpolation="bilinear")
    assert catalog.describe_transform(config) == (
        "bilinear: whole image to 248 x 248, centre crop 224; mean (0.1, 0.2, 0.3), std 0.5")


def test_every_classifier_of_imagenet_1k_has_a_reported_top1_or_says_why_not(rows):
    for key, checkpoint in KNOWN_CHECKPOINTS.items():
        classes = checkpoint.config.get("num_classes")
        if checkpoint.top1 is not None:
            assert classes == 1000 and 50 < checkpoint.top1 < 100 and checkpoint.top1_source, key
            assert rows[key]["top1"] == f"{checkpoint.top1:g} ({checkpoint.top1_source})"
        else:
            assert checkpoint.top1_source.startswith(("none", "not reported")), key
            assert rows[key]["top1"] == f"— ({checkpoint.top1_source})"
        if classes not in (None, 1000):
            assert checkpoint.top1 is None, key  # a pre-training head is not scored on ImageNet-1k
    # Two figures as their sources print them: ViT Table 5 and DeiT's model zoo.
    assert KNOWN_CHECKPOINTS["ViT_B16/imagenet21k+imagenet2012"].top1 == 83.97
    assert KNOWN_CHECKPOINTS["DeiT_B16_384_distilled/imagenet"].top1 == 85.2


def test_the_table_has_a_row_per_checkpoint_and_an_unknown_file_format_is_refused(rows):
    text = catalog.checkpoint_table(list(rows.values()))
    table = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(table) == len(KNOWN_CHECKPOINTS)
    assert "| `ViT_B16/imagenet21k+imagenet2012` | 384 |" in text and "103,186,515" in text
    assert "| `DINOv2_S14/lvd142m` | 518; evaluated at 224 |" in text
    with pytest.raises(ValueError, match=r"url='https://example.com/model.pth'"):
        catalog.file_format(type(KNOWN_CHECKPOINTS["ViT_B16/augreg"])("https://example.com/model.pth"))


def test_the_sites_page_is_the_registrys_table(rows):
    page = pathlib.Path(__file__).resolve().parents[1] / "docs" / "checkpoints.md"
    assert page.read_text(encoding="utf-8") == catalog.checkpoint_table(list(rows.values())), (
        "docs/checkpoints.md differs from the registry: python -m keras_vit.catalog docs/checkpoints.md")


def test_the_command_writes_the_page(rows, tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "checkpoint_rows", lambda: list(rows.values()))
    assert catalog.main([str(tmp_path / "checkpoints.md")]) == 0
    assert (tmp_path / "checkpoints.md").read_text(encoding="utf-8") == catalog.checkpoint_table(list(rows.values()))
