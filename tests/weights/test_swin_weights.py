"""Swin checkpoints: timm, Microsoft and transformers files, window resampling, known names.

(Over 400 lines: Swin's three checkpoint layouts each need their converter, resampling and
error cases tested against the same references.)

Logits are compared with the reference that wrote the file at `ATOL` (max abs
difference; float32 through two stages of attention, the logits being O(1)).
"""

import os
import re

import numpy as np
import pytest

import keras_vit
from keras_vit.models.swin import SwinTransformer
from keras_vit.models.swin.checkpoints import timm_key_map
from keras_vit import checkpoints
from keras_vit.weights import registry
from keras_vit.weights.conversion import convert_checkpoint
from keras_vit.models.swin.checkpoints import SWIN_POSITION
from keras_vit.weights.position_embedding import resample_bias_table, resample_bicubic
from runs.reference import timm, torch
from tests.testing import parameter_gradients, to_numpy
from tests.weights.checkpoints import (
    TINY,
    official_npz_arrays,
    randomize_torch,
    save_npz,
    save_state_dict,
    timm_vit,
    torch_logits,
)

ATOL = 1e-4
# Float32 bicubic in torch against float64 in numpy, on values of about 1.
RESAMPLE_ATOL = 1e-5
# 56 px: stage 0 is 14 x 14 (2 x 2 windows of 7, the second block shifted by 3),
# stage 1 one 7 x 7 window. 72 x 100 px: stages of 18 x 25 and 9 x 13, neither a
# multiple of the window, so every block pads, and the shifted ones pad, then shift.
# In the sizes compared with transformers every map is larger than the window
# along both axes or along neither: where it is larger along one axis only (the
# 7 x 14 stage 1 at 56 x 112 px), transformers shrinks the window to min(H, W)
# along both and drops the shift, where timm and keras_vit decide per axis.
CONFIG = dict(embed_dim=32, depths=(2, 2), num_heads=(2, 4), window_size=7)
NON_MULTIPLE = (72, 100)


def swin(image_size=56, **overrides):
    return SwinTransformer(
        **{"image_size": image_size, "num_classes": 5, "preprocessing": None, **CONFIG, **overrides}
    )


def images(size, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")


def weights_of(model):
    return [to_numpy(w).copy() for w in model.weights]


def timm_swin(image_size=56, seed=0):
    model = timm.create_model(
        "swin_tiny_patch4_window7_224", pretrained=False, img_size=image_size, num_classes=5, **CONFIG
    )
    return randomize_torch(model, seed)


def transformers_swin(image_size=56, ape=False, seed=0):
    from transformers import SwinConfig, SwinForImageClassification

    config = SwinConfig(
        image_size=image_size, patch_size=4, embed_dim=CONFIG["embed_dim"], depths=list(CONFIG["depths"]),
        num_heads=list(CONFIG["num_heads"]), window_size=CONFIG["window_size"], num_labels=5,
        use_absolute_embeddings=ape,
    )
    return randomize_torch(SwinForImageClassification(config), seed)


def save_pretrained(model, directory):
    """The file transformers itself writes (the hub's names: `attention.self.query`, ...)."""
    model.save_pretrained(str(directory))
    return str(directory / "model.safetensors")


def transformers_logits(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).logits.numpy()


def state_of(model):
    return {key: value.detach().numpy().copy() for key, value in model.state_dict().items()}


def save_arrays(path, arrays):
    from safetensors.numpy import save_file

    save_file(arrays, str(path))
    return str(path)


def microsoft_arrays(timm_model):
    """timm's weights in the layout of Microsoft's own checkpoints, buffers included."""
    arrays = {}
    for key, value in state_of(timm_model).items():
        if m := re.fullmatch(r"layers\.(\d+)\.downsample\.(.+)", key):
            key = f"layers.{int(m[1]) - 1}.downsample.{m[2]}"
        arrays[key.replace("head.fc.", "head.")] = value
    for stage, depth in enumerate(CONFIG["depths"]):
        for block in range(depth):
            arrays[f"layers.{stage}.blocks.{block}.attn.relative_position_index"] = np.zeros((49, 49), "int64")
    arrays["layers.0.blocks.1.attn_mask"] = np.zeros((4, 49, 49), "float32")
    return arrays


# timm block modules -> transformers' (5.x module names; `mlp.fc1`, `mlp.fc2` are shared).
_TRANSFORMERS_BLOCK_NAMES = {
    "norm1": "layernorm_before", "norm2": "layernorm_after", "attn.proj": "attention.o_proj",
    "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2",
}
_TRANSFORMERS_TOP_NAMES = {
    "patch_embed.proj": "swin.embeddings.patch_embeddings.projection", "patch_embed.norm": "swin.embeddings.norm",
    "norm": "swin.layernorm", "head.fc": "classifier",
}


def transformers_state_from_timm(timm_model):
    """timm's weights under `SwinForImageClassification`'s module names, q, k, v split."""
    state = {}
    for key, value in state_of(timm_model).items():
        value = torch.from_numpy(value)
        if m := re.fullmatch(r"layers\.(\d+)\.downsample\.(.+)", key):
            state[f"swin.encoder.layers.{int(m[1]) - 1}.downsample.{m[2]}"] = value
        elif m := re.fullmatch(r"layers\.(\d+)\.blocks\.(\d+)\.(.+)\.(\w+)", key):
            block, module, leaf = f"swin.encoder.layers.{m[1]}.blocks.{m[2]}", m[3], m[4]
            if module == "attn.qkv":
                for part, chunk in zip("qkv", value.chunk(3)):
                    state[f"{block}.attention.{part}_proj.{leaf}"] = chunk
            elif leaf == "relative_position_bias_table":
                state[f"{block}.attention.relative_position_bias.{leaf}"] = value
            else:
                state[f"{block}.{_TRANSFORMERS_BLOCK_NAMES[module]}.{leaf}"] = value
        else:
            stem, leaf = key.rsplit(".", 1)
            state[f"{_TRANSFORMERS_TOP_NAMES[stem]}.{leaf}"] = value
    return state


# ---- each layout against the reference that wrote it ---------------------------


@pytest.mark.parametrize("image_size", [(56, 56), (56, 112)])
def test_timm_file_matches_timm(tmp_path, image_size):
    reference = timm_swin(image_size)
    path = save_state_dict(tmp_path / "timm_swin.safetensors", reference)
    model = swin(image_size)
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.layout == "timm Swin" and report.exact
    x = images(image_size)
    expected = torch_logits(reference, x)
    assert np.abs(expected).max() > 0.5
    np.testing.assert_allclose(to_numpy(model(x)), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("image_size,source", [((56, 56), "timm"), ((56, 112), "timm"), (NON_MULTIPLE, "transformers")])
def test_gradients_match_the_reference(tmp_path, image_size, source):
    # Every parameter's gradient equals the reference's for the same weights and
    # loss, in training mode (drop path off; the reference in eval mode, which only
    # skips drop path), so the layer norms' hand-written CPU gradient, the
    # shifted-window mask and patch merging are all in what is compared. Beyond
    # multiples of the window the reference is transformers (timm pads after
    # shifting there; see keras_vit/models/swin/layers.py). The reference's gradients are
    # put in our layout by the checkpoint converter (transposes, reshapes, q/k/v
    # concatenated: linear maps, so they carry gradients too). Tolerance: float32
    # sums in another order.
    reference = (timm_swin(image_size) if source == "timm" else transformers_swin(image_size)).eval()
    path = save_state_dict(tmp_path / "swin.safetensors", reference)
    model = swin(image_size, drop_path_rate=0.0)
    keras_vit.load_weights(model, path, strict=True)
    x = images(image_size)
    weights = np.random.default_rng(1).normal(size=(2, 5)).astype("float32")
    ours = parameter_gradients(model, x, weights, training=True)

    reference.zero_grad()
    logits = reference(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()))
    logits = logits if source == "timm" else logits.logits
    (logits * torch.from_numpy(weights)).sum().backward()
    grads = {name: p.grad.numpy() for name, p in reference.named_parameters()}
    expected = convert_checkpoint("safetensors", grads).weights
    assert sorted(expected) == sorted(ours)
    for name, gradient in ours.items():
        scale = np.abs(expected[name]).max()
        assert scale > 0, name
        np.testing.assert_allclose(gradient, expected[name], atol=1e-5 + 1e-4 * scale, rtol=1e-4, err_msg=name)


@pytest.mark.parametrize("image_size,ape", [((56, 56), False), (NON_MULTIPLE, False), (NON_MULTIPLE, True)])
def test_transformers_file_matches_transformers(tmp_path, image_size, ape):
    """transformers pads to whole windows before its cyclic shift, as keras_vit does.

    So it is the reference at sizes that are not multiples of the window too.
    With `ape`, its position embeddings are of the model's own 18 x 25 grid.
    """
    reference = transformers_swin(image_size, ape=ape)
    path = save_pretrained(reference, tmp_path)
    model = swin(image_size, absolute_position_embedding=ape)
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.layout == "transformers Swin" and report.exact
    x = images(image_size)
    np.testing.assert_allclose(to_numpy(model(x)), transformers_logits(reference, x), atol=ATOL, rtol=0)


def test_transformers_in_memory_names_load_too(tmp_path):
    # `save_file(model.state_dict())` writes transformers 5's module names
    # (`attention.q_proj`, `mlp.fc1`, ...), not the hub's.
    reference = transformers_swin()
    path = save_state_dict(tmp_path / "state.safetensors", reference)
    model = swin()
    assert keras_vit.load_weights(model, path, strict=True).layout == "transformers Swin"
    x = images((56, 56))
    np.testing.assert_allclose(to_numpy(model(x)), transformers_logits(reference, x), atol=ATOL, rtol=0)


def test_timm_file_beyond_multiples_of_the_window_matches_transformers(tmp_path):
    """At 72 x 100 px, a timm file's weights give transformers' logits, not timm's.

    timm 1.0.31 shifts the map before padding it to whole windows, while its mask
    is that of the padded map, so the two differ on every shifted block whose
    map is not a multiple of the window: with these weights and images, timm's
    logits differ from keras_vit's by up to 0.226 (max abs), the largest logit
    being 1.70, while transformers' differ by 6e-7 (measured once, not
    asserted). keras_vit pads, shifts, attends, shifts back and crops, as
    transformers and Microsoft's detection code do; transformers, given the
    same weights, is the reference here.
    """
    weights = timm_swin(NON_MULTIPLE)
    path = save_state_dict(tmp_path / "timm_swin.safetensors", weights)
    model = swin(NON_MULTIPLE)
    assert keras_vit.load_weights(model, path, strict=True).exact
    reference = transformers_swin(NON_MULTIPLE)
    reference.load_state_dict(transformers_state_from_timm(weights), strict=True)
    x = images(NON_MULTIPLE)
    np.testing.assert_allclose(to_numpy(model(x)), transformers_logits(reference, x), atol=ATOL, rtol=0)


def test_microsoft_layout_matches_timm(tmp_path):
    # Mergings at the end of the previous stage, `head.*`, and the index and
    # mask buffers, which are not weights.
    reference = timm_swin()
    path = save_arrays(tmp_path / "microsoft.safetensors", microsoft_arrays(reference))
    model = swin()
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.layout == "Microsoft Swin" and report.exact
    x = images((56, 56))
    np.testing.assert_allclose(to_numpy(model(x)), torch_logits(reference, x), atol=ATOL, rtol=0)


def test_the_builder_takes_a_file(tmp_path):
    reference = timm_swin()
    path = save_state_dict(tmp_path / "timm_swin.safetensors", reference)
    model = swin(weights=path)
    x = images((56, 56))
    np.testing.assert_allclose(to_numpy(model(x)), torch_logits(reference, x), atol=ATOL, rtol=0)


def test_head_of_other_classes_is_replaced_and_features_model_skips_it(tmp_path):
    path = save_state_dict(tmp_path / "timm_swin.safetensors", timm_swin())
    model = swin(num_classes=3)
    report = keras_vit.load_weights(model, path)
    assert "num_classes differs (5 in the checkpoint, 3 in the model)" in dict(report.skipped)["head/kernel"]
    assert not to_numpy(model.get_layer("head").kernel).any()
    report = keras_vit.load_weights(swin(include_top=False), path)
    assert dict(report.skipped) == {
        "head/kernel": "the model has no 'head' layer", "head/bias": "the model has no 'head' layer",
    }


# ---- windows and grids of another size --------------------------------------------


def torch_bicubic(grid, size):
    tensor = torch.from_numpy(np.ascontiguousarray(grid)).permute(2, 0, 1)[None]
    resized = torch.nn.functional.interpolate(tensor, size=size, mode="bicubic", align_corners=False)
    return resized[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize(
    "source,target", [((13, 13), (23, 23)), ((23, 23), (13, 13)), ((13, 13), (7, 7)), ((7, 13), (13, 9)), ((1, 1), (3, 3))]
)
def test_bicubic_resampling_matches_torch(source, target):
    grid = np.random.default_rng(0).normal(size=(*source, 3)).astype("float32")
    np.testing.assert_allclose(resample_bicubic(grid, target), torch_bicubic(grid, target), atol=RESAMPLE_ATOL, rtol=0)


def test_bias_table_resampling_is_per_head_over_the_offset_grid():
    # A (4, 7) window's table is a 7 x 13 grid of offsets, rows first.
    table = np.random.default_rng(1).normal(size=(7 * 13, 2)).astype("float32")
    expected = torch_bicubic(table.reshape(7, 13, 2), (13, 13)).reshape(169, 2)
    np.testing.assert_allclose(resample_bias_table(table, (7, 7), (4, 7)), expected, atol=RESAMPLE_ATOL, rtol=0)
    with pytest.raises(ValueError, match=r"pass the `window_size` of a table of another size. Received: table.shape=\(91, 2\)"):
        resample_bias_table(table, (7, 7))
    with pytest.raises(ValueError, match=r"`grid` must have shape \(rows, cols, channels\)"):
        resample_bicubic(table, (3, 3))


def test_another_window_resamples_every_bias_table(tmp_path):
    # 7 x 7 windows into 12 x 12 ones, as Swin's fine-tuning at 384 px does.
    reference = timm_swin()
    path = save_state_dict(tmp_path / "window7.safetensors", reference)
    model = swin(96, window_size=12)
    report = keras_vit.load_weights(model, path)
    state = state_of(reference)
    tables = [f"stage_{s}_block_{b}/attention/relative_position_bias_table" for s in range(2) for b in range(2)]
    heads = {name: CONFIG["num_heads"][int(name[6])] for name in tables}
    assert report.resampled == [(name, (169, heads[name]), (529, heads[name])) for name in tables]
    for name in tables:
        stage, block = name[6], name[14]
        source = state[f"layers.{stage}.blocks.{block}.attn.relative_position_bias_table"]
        expected = torch_bicubic(source.reshape(13, 13, -1), (23, 23)).reshape(529, -1)
        np.testing.assert_allclose(to_numpy(model.get_layer(name[:15]).attention.relative_position_bias_table),
                                   expected, atol=RESAMPLE_ATOL, rtol=0)
    assert "169" in report.table() and "529" in report.table()
    with pytest.raises(ValueError, match=r"strict loading found mismatches for \['stage_0_block_0/attention"):
        keras_vit.load_weights(swin(96, window_size=12), path, strict=True)


def test_another_image_size_with_the_same_window_needs_nothing(tmp_path):
    weights = timm_swin(56)
    path = save_state_dict(tmp_path / "timm_56.safetensors", weights)
    model = swin(112)
    assert keras_vit.load_weights(model, path, strict=True).exact
    reference = timm_swin(112, seed=1)
    reference.load_state_dict(weights.state_dict(), strict=True)
    x = images((112, 112))
    np.testing.assert_allclose(to_numpy(model(x)), torch_logits(reference, x), atol=ATOL, rtol=0)


def test_a_stage_smaller_than_the_window_gets_tables_of_its_own_window(tmp_path):
    # At 32 px stage 1 is 4 x 4: its blocks attend in one 4 x 4 window (timm's
    # rule), so their 13 x 13 tables are resampled to 7 x 7, as timm's own
    # checkpoint filter does.
    path = save_state_dict(tmp_path / "timm_56.safetensors", timm_swin(56))
    report = keras_vit.load_weights(swin(32), path)
    assert report.resampled == [
        (f"stage_1_block_{b}/attention/relative_position_bias_table", (169, 4), (49, 4)) for b in range(2)
    ]


def test_absolute_position_embedding_is_resampled_bicubically_to_the_new_grid(tmp_path):
    arrays = microsoft_arrays(timm_swin())
    arrays["absolute_pos_embed"] = np.random.default_rng(2).normal(size=(1, 196, 32)).astype("float32")
    path = save_arrays(tmp_path / "microsoft_ape.safetensors", arrays)
    model = swin(NON_MULTIPLE, absolute_position_embedding=True)
    report = keras_vit.load_weights(model, path)
    assert report.resampled == [(SWIN_POSITION, (14, 14, 32), (18, 25, 32))]
    expected = torch_bicubic(arrays["absolute_pos_embed"].reshape(14, 14, 32), (18, 25))
    np.testing.assert_allclose(to_numpy(model.get_layer("absolute_position_embedding").position_embedding),
                               expected, atol=RESAMPLE_ATOL, rtol=0)
    # A model without one skips it; a model with one needs it.
    assert ("position embeddings", "the model has no position embeddings") in keras_vit.load_weights(swin(), path).skipped
    plain = save_state_dict(tmp_path / "timm_swin.safetensors", timm_swin())
    with pytest.raises(ValueError, match=r"no value for 1 model weight\(s\): \['absolute_position_embedding/position_embedding'\]"):
        keras_vit.load_weights(swin(absolute_position_embedding=True), plain)


# ---- files of the other family, wrong shapes ---------------------------------------


def _assert_fails_unchanged(model, path, message):
    before = weights_of(model)
    with pytest.raises(ValueError, match=message):
        keras_vit.load_weights(model, path)
    for a, b in zip(weights_of(model), before):
        np.testing.assert_array_equal(a, b)


def test_files_of_the_other_family_are_refused_by_name(tmp_path):
    vit = keras_vit.VisionTransformer(**{**TINY, "preprocessing": None})
    swin_file = save_state_dict(tmp_path / "swin.safetensors", timm_swin())
    _assert_fails_unchanged(
        vit, swin_file,
        r"swin.safetensors holds a Swin checkpoint \(timm Swin layout\) and cannot be loaded into the "
        r"model 'vision_transformer', a ViT, DeiT or hybrid; expected a ViT, DeiT or hybrid checkpoint",
    )
    hf_file = save_pretrained(transformers_swin(), tmp_path)
    _assert_fails_unchanged(vit, hf_file, r"model.safetensors holds a Swin checkpoint \(transformers Swin layout\)")
    vit_file = save_state_dict(tmp_path / "vit.safetensors", randomize_torch(timm_vit()))
    _assert_fails_unchanged(
        swin(), vit_file,
        r"vit.safetensors holds a ViT checkpoint \(timm ViT layout\) and cannot be loaded into the model "
        r"'swin_transformer', a SwinTransformer; expected a Swin checkpoint: a timm, Microsoft or transformers",
    )
    npz = save_npz(tmp_path / "vit.npz", official_npz_arrays())
    _assert_fails_unchanged(swin(), npz, r"vit.npz holds a ViT checkpoint \(official ViT layout\)")
    swin_keras = str(tmp_path / "swin.keras")
    swin().save(swin_keras)
    _assert_fails_unchanged(vit, swin_keras, r"swin.keras holds a Swin checkpoint \(keras_vit layout\)")


def test_a_transformers_vit_file_into_a_swin_model_names_its_family(tmp_path):
    path = save_arrays(
        tmp_path / "hf_vit.safetensors",
        {"vit.embeddings.patch_embeddings.projection.weight": np.zeros((32, 3, 8, 8), "float32")},
    )
    _assert_fails_unchanged(swin(), path, r"hf_vit.safetensors holds a ViT checkpoint \(transformers ViT layout\) "
                                          r"and cannot be loaded into the model 'swin_transformer'")


def _timm_file(tmp_path, edit):
    arrays = state_of(timm_swin())
    edit(arrays)
    return save_arrays(tmp_path / "edited.safetensors", arrays)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda a: a.update({"layers.1.blocks.0.mlp.fc1.weight": np.zeros((64, 64), "float32")}),
         r"edited.safetensors: entry 'layers.1.blocks.0.mlp.fc1.weight' does not fit the model's "
         r"'stage_1_block_0/mlp/fc1/kernel': expected shape \(256, 64\) \(a checkpoint of another "
         r"model size\?\). Received: shape=\(64, 64\)"),
        (lambda a: a.update({"patch_embed.proj.weight": np.zeros((32, 3, 2, 2), "float32")}),
         r"entry 'patch_embed.proj.weight' does not fit the model's 'patch_embed/proj/kernel': "
         r"expected shape \(32, 3, 4, 4\).*Received: shape=\(32, 3, 2, 2\)"),
        (lambda a: a.update({"layers.0.blocks.0.attn.qkv.weight": np.zeros((3072,), "float32")}),
         r"edited.safetensors: entry 'layers.0.blocks.0.attn.qkv.weight' has shape \(3072,\); "
         r"expected an \(out, in\) Linear weight."),
        (lambda a: a.update({"layers.0.blocks.1.attn.relative_position_bias_table": np.zeros((169, 3), "float32")}),
         r"entry 'layers.0.blocks.1.attn.relative_position_bias_table' \(the model's "
         r"'stage_0_block_1/attention/relative_position_bias_table'\) has 3 heads but the model's has 2; "
         r"expected shape \(offsets, 2\).*Received: shape=\(169, 3\)"),
        (lambda a: a.update({"layers.0.blocks.1.attn.relative_position_bias_table": np.zeros((170, 2), "float32")}),
         r"entry 'layers.0.blocks.1.attn.relative_position_bias_table' \(the model's .*\): A bias table "
         r"of a square window has \(2M - 1\)\*\*2 rows.*Received: table.shape=\(170, 2\)"),
        (lambda a: a.pop("layers.1.blocks.1.norm2.weight"),
         r"no value for 1 model weight\(s\): \['stage_1_block_1/norm2/gamma'\]"),
    ],
)
def test_wrong_timm_entries_are_named(tmp_path, edit, message):
    _assert_fails_unchanged(swin(), _timm_file(tmp_path, edit), message)


def _transformers_file(tmp_path, edit):
    reference = transformers_swin()
    reference.save_pretrained(str(tmp_path))
    from safetensors.numpy import load_file

    arrays = load_file(str(tmp_path / "model.safetensors"))
    edit(arrays)
    return save_arrays(tmp_path / "edited.safetensors", arrays)


_BLOCK = "swin.encoder.layers.1.blocks.0.attention.self"


@pytest.mark.parametrize(
    "edit,message",
    [
        # Every projection of a narrower model: the message gives q's, k's and v's shape.
        (lambda a: a.update({f"{_BLOCK}.{p}.weight": np.zeros((16, 16), "float32") for p in ("query", "key", "value")}),
         rf"entry '{_BLOCK}.{{query,key,value}}.weight' does not fit the model's "
         r"'stage_1_block_0/attention/qkv/kernel': expected shape \(64, 64\).*Received: shape=\(16, 16\)"),
        (lambda a: a.update({f"{_BLOCK}.key.weight": np.zeros((64, 32), "float32")}),
         r"the attention query, key and value weights of block layers.1.blocks.0 differ in shape; expected "
         r"three equal shapes. Received: \{.*'swin.encoder.layers.1.blocks.0.attention.self.key.weight': \(64, 32\)"),
        (lambda a: a.pop(f"{_BLOCK}.value.bias"),
         r"block layers.1.blocks.0 of the checkpoint has \['swin.*key.bias', 'swin.*query.bias'\] but lacks its attention "
         r"\['value'\] bias"),
        (lambda a: a.update({"swin.encoder.layers.0.downsample.reduction.weight": np.zeros((32, 128), "float32")}),
         r"entry 'swin.encoder.layers.0.downsample.reduction.weight' does not fit the model's "
         r"'stage_1_downsample/reduction/kernel': expected shape \(64, 128\).*Received: shape=\(32, 128\)"),
    ],
)
def test_wrong_transformers_entries_are_named(tmp_path, edit, message):
    _assert_fails_unchanged(swin(), _transformers_file(tmp_path, edit), message)


# ---- known checkpoints -------------------------------------------------------------


def test_swin_names_resolve_to_timm_hub_files():
    key, known = checkpoints.find_checkpoint("imagenet", "Swin_T")
    assert key == "Swin_T/imagenet"
    assert known.url == "https://huggingface.co/timm/swin_tiny_patch4_window7_224.ms_in1k/resolve/main/model.safetensors"
    hub = {
        "Swin_B384/imagenet21k+imagenet2012": ("swin_base_patch4_window12_384.ms_in22k_ft_in1k", 1000, 384),
        "Swin_L/imagenet21k": ("swin_large_patch4_window7_224.ms_in22k", 21841, 224),
    }
    for key, (tag, classes, size) in hub.items():
        known = checkpoints.KNOWN_CHECKPOINTS[key]
        assert f"/timm/{tag}/" in known.url
        assert (known.config["num_classes"], known.config["image_size"]) == (classes, size)


def test_a_known_name_with_another_window_passes_the_fit_check():
    # The window fixes the bias tables' shapes, but the loader resamples them, so a
    # window-12 checkpoint fits a window-7 model of the same widths and depths.
    actual = keras_vit.architectures.architecture(
        "SwinTransformer", dict(embed_dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32), window_size=7))
    registry.check_fits("Swin_B384/imagenet21k+imagenet2012", actual, "Swin_B")
    with pytest.raises(ValueError, match=r"embed_dim=128 vs embed_dim=96"):
        registry.check_fits("Swin_B384/imagenet21k+imagenet2012", {**actual, "embed_dim": 96}, "Swin_T")


def test_a_swin_name_of_another_architecture_is_refused_before_downloading(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"'Swin_T/imagenet' is one of Swin_T and does not fit the model "
                                         r"'swin_transformer': .*embed_dim=96 vs embed_dim=32.*Nothing was downloaded"):
        keras_vit.load_weights(swin(), "Swin_T/imagenet")
    with pytest.raises(ValueError, match=r"depths=\(2, 2, 6, 2\) vs depths=\(2, 2, 18, 2\).*Nothing was downloaded"):
        keras_vit.Swin_S(weights="Swin_T/imagenet")
    vit = keras_vit.VisionTransformer(**{**TINY, "preprocessing": None})
    with pytest.raises(ValueError, match=r"builder='SwinTransformer' vs builder='VisionTransformer'"):
        keras_vit.load_weights(vit, "Swin_T/imagenet")
    assert not os.path.exists(tmp_path / "cache" / "models")


def test_a_swin_name_loads_the_cached_file(tmp_path, monkeypatch):
    # The file timm's hub serves, generated here and placed where `fetch` keeps it.
    reference = randomize_torch(timm.create_model("swin_tiny_patch4_window7_224", pretrained=False))
    cache = tmp_path / "cache" / "models" / "keras_vit"
    cache.mkdir(parents=True)
    save_state_dict(cache / "swin_tiny_patch4_window7_224.ms_in1k.safetensors", reference)
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    model = keras_vit.Swin_T(weights="imagenet", preprocessing=None)
    assert model.output_shape == (None, 1000) and model.input_shape == (None, 224, 224, 3)
    # The numerics are those of the tiny models above; here, every weight is the file's.
    state = state_of(reference)
    keras_layout = {"copy": lambda v: v, "transpose": lambda v: v.T, "conv": lambda v: v.transpose(2, 3, 1, 0)}
    table = timm_key_map((2, 2, 6, 2))
    assert len(model.weights) == len(table)
    for variable in model.weights:
        key, transform = table[variable.path]
        np.testing.assert_array_equal(to_numpy(variable), keras_layout[transform](state[key]))
    assert os.path.exists(cache / "swin_tiny_patch4_window7_224.ms_in1k.safetensors.sha256")
