"""Hugging Face `transformers` ViT/DeiT files and timm DeiT files, against the models that wrote them.

Every file is generated here with random weights by the reference class
(`transformers` or timm on PyTorch CPU); the logits keras_vit computes after
loading it must equal the reference's to `ATOL` (max abs difference, on logits
of O(1)). transformers' ViT and DeiT normalize with `layer_norm_eps=1e-12` (the
hub configs' value) where keras_vit, timm and the original ViT and DeiT use
1e-6; on activations of unit variance that moves the logits by ~1e-6.
"""

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import keras_vit
from keras_vit.weights.position_embedding import resample_bicubic
from runs.reference import timm, torch
from tests.testing import to_numpy
from tests.weights.checkpoints import TINY, randomize_torch, save_state_dict, torch_logits

ATOL = 1e-4
# TINY's width, depth and heads in transformers' terms.
HF_TINY = dict(patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def images(size, seed=0):
    # Already normalized: both models get preprocessing switched off.
    return np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")


def keras_tiny(image_size=32, **overrides):
    return keras_vit.VisionTransformer(**{**TINY, "image_size": image_size, "preprocessing": None, **overrides})


def hf_model(cls_name, image_size=32, num_labels=10, seed=0, **overrides):
    import transformers

    config_cls = transformers.DeiTConfig if cls_name.startswith("DeiT") else transformers.ViTConfig
    config = config_cls(image_size=image_size, num_labels=num_labels, **HF_TINY, **overrides)
    return randomize_torch(getattr(transformers, cls_name)(config), seed)


def save_pretrained(model, directory):
    """The file transformers itself writes: the hub's names (`encoder.layer.0.attention.attention.query`)."""
    model.save_pretrained(str(directory))
    return str(directory / "model.safetensors")


def hf_outputs(model, x, **kwargs):
    with torch.no_grad():
        return model(pixel_values=torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), **kwargs)


def assert_close(ours, reference):
    ours, reference = to_numpy(ours), np.asarray(reference)
    assert np.abs(reference).max() > 0.1  # a real signal, not zeros
    np.testing.assert_allclose(ours, reference, atol=ATOL, rtol=0)


def save_arrays(path, arrays):
    save_file(arrays, str(path))
    return str(path)


def state_of(model):
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def timm_deit(distilled=True, image_size=32, seed=0):
    name = "deit_tiny_distilled_patch16_224" if distilled else "deit_tiny_patch16_224"
    model = timm.create_model(name, pretrained=False, img_size=image_size, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, mlp_ratio=2.0, num_classes=10)
    return randomize_torch(model, seed)


# ---- transformers ViT ---------------------------------------------------------------


def test_vit_for_image_classification_matches_transformers(tmp_path):
    reference = hf_model("ViTForImageClassification")
    model = keras_tiny()
    report = keras_vit.load_weights(model, save_pretrained(reference, tmp_path), strict=True)
    assert report.layout == "transformers ViT" and len(report.loaded) == len(model.weights)
    x = images((32, 32))
    assert_close(model(x), hf_outputs(reference, x).logits)


def test_in_memory_names_load_too(tmp_path):
    # transformers 5 names its modules `layers.{i}.attention.q_proj`, `mlp.fc1`, ...
    reference = hf_model("ViTForImageClassification")
    path = save_state_dict(tmp_path / "in_memory.safetensors", reference)
    assert any(".q_proj." in key for key in state_of(reference))
    model = keras_tiny()
    assert keras_vit.load_weights(model, path, strict=True).exact
    x = images((32, 32))
    assert_close(model(x), hf_outputs(reference, x).logits)


def test_vit_model_features_and_pooler_as_pre_logits(tmp_path):
    reference = hf_model("ViTModel")
    path = save_pretrained(reference, tmp_path)
    x = images((32, 32))
    expected = hf_outputs(reference, x)
    features = keras_tiny(include_top=False)
    report = keras_vit.load_weights(features, path)
    assert report.skipped == [("pre_logits/kernel", "the model has no 'pre_logits' layer"),
                              ("pre_logits/bias", "the model has no 'pre_logits' layer")]
    assert_close(features(x), expected.last_hidden_state[:, 0])
    # The pooler is Dense + tanh on the class token: the ViT's pre-logits layer.
    model = keras_tiny(representation_size=32)
    report = keras_vit.load_weights(model, path)
    assert sorted(name for name, _ in report.missing) == ["head/bias", "head/kernel"]
    pre_logits = keras.Model(model.inputs[0], model.get_layer("pre_logits").output)
    assert_close(pre_logits(x), expected.pooler_output)


# ---- transformers DeiT --------------------------------------------------------------


def test_deit_with_teacher_matches_transformers(tmp_path):
    reference = hf_model("DeiTForImageClassificationWithTeacher")
    model = keras_tiny(distillation=True)
    report = keras_vit.load_weights(model, save_pretrained(reference, tmp_path), strict=True)
    assert report.layout == "transformers DeiT" and len(report.loaded) == len(model.weights)
    x = images((32, 32))
    expected = hf_outputs(reference, x)
    assert_close(model(x), expected.logits)
    logits, distillation_logits = keras_vit.distillation_heads(model)(x)
    assert_close(logits, expected.cls_logits)
    assert_close(distillation_logits, expected.distillation_logits)


def test_deit_with_teacher_in_memory_names(tmp_path):
    reference = hf_model("DeiTForImageClassificationWithTeacher")
    model = keras_tiny(distillation=True)
    keras_vit.load_weights(model, save_state_dict(tmp_path / "m.safetensors", reference), strict=True)
    x = images((32, 32))
    assert_close(model(x), hf_outputs(reference, x).logits)


def test_deit_for_image_classification_is_the_class_head_alone(tmp_path):
    # Its classifier reads the class token only; the distillation head is left as initialized.
    reference = hf_model("DeiTForImageClassification")
    model = keras_tiny(distillation=True)
    report = keras_vit.load_weights(model, save_pretrained(reference, tmp_path))
    assert sorted(name for name, _ in report.missing) == ["head_dist/bias", "head_dist/kernel"]
    x = images((32, 32))
    logits, _ = keras_vit.distillation_heads(model)(x)
    assert_close(logits, hf_outputs(reference, x).logits)


# ---- another resolution -------------------------------------------------------------


def _bilinear(position, prefix, grid, new_grid):
    """The reference's position embeddings resampled by torch's bilinear mode (align_corners=False)."""
    tokens, patches = position[:, :prefix], position[:, prefix:]
    patches = patches.reshape(1, *grid, -1).permute(0, 3, 1, 2)
    patches = torch.nn.functional.interpolate(patches, size=new_grid, mode="bilinear", align_corners=False)
    return torch.cat([tokens, patches.permute(0, 2, 3, 1).reshape(1, -1, position.shape[-1])], dim=1)


@pytest.mark.parametrize("cls_name,prefix", [("ViTForImageClassification", 1), ("DeiTForImageClassificationWithTeacher", 2)])
def test_another_resolution_matches_transformers_at_that_resolution(tmp_path, cls_name, prefix):
    """A 32 px file loaded at 48 x 40 px equals transformers built at 48 x 40 px.

    The loader resamples the patch grid bilinearly (ViT Sec. 3.2; half-pixel
    centres); transformers' `interpolate_pos_encoding=True` resamples bicubically,
    at every call, so the two give other logits by design. Apples to apples, the
    reference is transformers' model built at the new size with the file's
    weights and its position grid resampled by torch's bilinear mode (4 x 4 to
    6 x 5; the class and distillation slots kept); the next test compares the
    bicubic path.
    """
    source = hf_model(cls_name)
    path = save_pretrained(source, tmp_path)
    reference = hf_model(cls_name, image_size=(48, 40))
    state = source.state_dict()
    key = next(k for k in state if k.endswith("position_embeddings"))
    state[key] = _bilinear(state[key], prefix, (4, 4), (6, 5))
    reference.load_state_dict(state)
    model = keras_tiny(image_size=(48, 40), distillation=prefix == 2)
    report = keras_vit.load_weights(model, path)
    assert report.resampled == [("patch_encoder/position_embedding", (4, 4, 32), (6, 5, 32))]
    x = images((48, 40))
    assert_close(model(x), hf_outputs(reference, x).logits)


@pytest.mark.parametrize("cls_name,prefix", [("ViTForImageClassification", 1), ("DeiTForImageClassificationWithTeacher", 2)])
def test_bicubic_grid_matches_interpolate_pos_encoding(tmp_path, cls_name, prefix):
    """transformers' `interpolate_pos_encoding=True` is the loaded model with a bicubic grid.

    The 32 px model run on 48 px images resamples its 4 x 4 grid to 6 x 6
    bicubically (torch, `align_corners=False`); keras_vit's
    `resample_bicubic` of the file's grid, set into the 48 px model, gives the
    same logits: the only difference from the loader's result is the kernel.
    """
    reference = hf_model(cls_name)
    path = save_pretrained(reference, tmp_path)
    model = keras_tiny(image_size=48, distillation=prefix == 2)
    keras_vit.load_weights(model, path)
    position = next(v for k, v in state_of(reference).items() if k.endswith("position_embeddings"))
    grid = position[0, prefix:].reshape(4, 4, 32)
    model.get_layer("patch_encoder").position_embedding.assign(resample_bicubic(grid, (6, 6)))
    x = images((48, 48))
    assert_close(model(x), hf_outputs(reference, x, interpolate_pos_encoding=True).logits)


# ---- timm DeiT ----------------------------------------------------------------------


@pytest.mark.parametrize("distilled", [False, True])
def test_timm_deit_matches_timm(tmp_path, distilled):
    reference = timm_deit(distilled)
    model = keras_tiny(distillation=distilled, initialization="deit")
    report = keras_vit.load_weights(model, save_state_dict(tmp_path / "deit.safetensors", reference), strict=True)
    assert report.layout == "timm ViT" and len(report.loaded) == len(model.weights)
    x = images((32, 32))
    assert_close(model(x), torch_logits(reference, x))


def test_timm_distilled_training_heads_match_distillation_heads(tmp_path):
    reference = timm_deit()
    model = keras_tiny(distillation=True)
    keras_vit.load_weights(model, save_state_dict(tmp_path / "deit.safetensors", reference), strict=True)
    # timm returns both heads' logits in training mode with distilled training on
    # (no dropout here, so training mode computes what inference does).
    reference.set_distilled_training(True)
    reference.train()
    x = images((32, 32))
    with torch.no_grad():
        expected = reference(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()))
    for ours, theirs in zip(keras_vit.distillation_heads(model)(x), expected):
        assert_close(ours, theirs.numpy())


def test_timm_distilled_at_another_resolution_matches_timm_resampling(tmp_path):
    """Against timm at 48 px with `resample_abs_pos_embed(..., num_prefix_tokens=2)`, bilinear.

    The same kernel as the loader's (bilinear, half-pixel centres, no
    antialiasing), so the logits must agree; it checks that both prefix slots
    stay out of the resampled grid.
    """
    from timm.layers import resample_abs_pos_embed

    source = timm_deit()
    path = save_state_dict(tmp_path / "deit.safetensors", source)
    state = source.state_dict()
    state["pos_embed"] = resample_abs_pos_embed(
        state["pos_embed"], new_size=(6, 6), old_size=(4, 4), num_prefix_tokens=2,
        interpolation="bilinear", antialias=False,
    )
    reference = timm_deit(image_size=48)
    reference.load_state_dict(state)
    model = keras_tiny(image_size=48, distillation=True)
    keras_vit.load_weights(model, path)
    x = images((48, 48))
    assert_close(model(x), torch_logits(reference.eval(), x))


def test_deit3_files_are_refused_by_name(tmp_path):
    # DeiT III adds LayerScale to every block; dropping it would compute another model.
    reference = randomize_torch(timm.create_model("deit3_small_patch16_224", pretrained=False, img_size=32, patch_size=8,
                                                  embed_dim=32, depth=2, num_heads=2, num_classes=10))
    path = save_state_dict(tmp_path / "deit3.safetensors", reference)
    _assert_fails_unchanged(keras_tiny(), path, r"deit3.safetensors: timm checkpoints with LayerScale .* DeiT III")


# ---- distilled and plain, heads -----------------------------------------------------


def test_distilled_file_into_a_plain_model_skips_the_distillation_parts(tmp_path):
    path = save_state_dict(tmp_path / "deit.safetensors", timm_deit())
    model = keras_tiny()
    report = keras_vit.load_weights(model, path)
    assert sorted(name for name, _ in report.skipped) == [
        "distillation_token/position_embedding", "distillation_token/token", "head_dist/bias", "head_dist/kernel"
    ]
    with pytest.raises(ValueError, match=r"deit.safetensors: strict loading found mismatches for .*'distillation_token/token'"):
        keras_vit.load_weights(keras_tiny(), path, strict=True)


def test_plain_file_into_a_distilled_model_leaves_the_token_and_head_as_initialized(tmp_path):
    reference = hf_model("ViTForImageClassification")
    model = keras_tiny(distillation=True)
    report = keras_vit.load_weights(model, save_pretrained(reference, tmp_path))
    assert sorted(name for name, _ in report.missing) == [
        "distillation_token/position_embedding", "distillation_token/token", "head_dist/bias", "head_dist/kernel"
    ]
    logits, _ = keras_vit.distillation_heads(model)(images((32, 32)))
    assert np.abs(to_numpy(logits)).max() > 0.1


def test_heads_of_other_classes_are_both_replaced(tmp_path):
    path = save_pretrained(hf_model("DeiTForImageClassificationWithTeacher"), tmp_path)
    model = keras_tiny(distillation=True, num_classes=5)
    report = keras_vit.load_weights(model, path)
    assert sorted(name for name, _ in report.missing) == ["head/bias", "head/kernel", "head_dist/bias", "head_dist/kernel"]
    assert sorted(name for name, _ in report.skipped) == ["head/bias", "head/kernel", "head_dist/bias", "head_dist/kernel"]
    for name in ("head", "head_dist"):
        assert not to_numpy(model.get_layer(name).kernel).any()


# ---- files of the other family, broken files ----------------------------------------


def _swin():
    return keras_vit.SwinTransformer(image_size=56, embed_dim=32, depths=(2, 2), num_heads=(2, 4), window_size=7,
                                     num_classes=5, preprocessing=None)


def _assert_fails_unchanged(model, path, message):
    before = [to_numpy(w).copy() for w in model.weights]
    with pytest.raises(ValueError, match=message):
        keras_vit.load_weights(model, path)
    for variable, value in zip(model.weights, before):
        np.testing.assert_array_equal(to_numpy(variable), value)


def test_vit_and_deit_files_into_swin_are_refused_by_name(tmp_path):
    hf_vit = save_pretrained(hf_model("ViTForImageClassification"), tmp_path)
    _assert_fails_unchanged(
        _swin(), hf_vit,
        r"model.safetensors holds a ViT checkpoint \(transformers ViT layout\) and cannot be loaded into the "
        r"model 'swin_transformer', a SwinTransformer; expected a Swin checkpoint",
    )
    hf_deit = save_pretrained(hf_model("DeiTForImageClassificationWithTeacher"), tmp_path / "deit")
    _assert_fails_unchanged(_swin(), hf_deit, r"deit/model.safetensors holds a ViT checkpoint \(transformers DeiT layout\)")
    timm_file = save_state_dict(tmp_path / "timm_deit.safetensors", timm_deit())
    _assert_fails_unchanged(_swin(), timm_file, r"timm_deit.safetensors holds a ViT checkpoint \(timm ViT layout\)")


def test_swin_file_into_a_deit_model_is_refused_by_name(tmp_path):
    from transformers import SwinConfig, SwinForImageClassification

    swin = randomize_torch(SwinForImageClassification(SwinConfig(
        image_size=56, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=7, num_labels=5
    )))
    path = save_pretrained(swin, tmp_path)
    _assert_fails_unchanged(
        keras_tiny(distillation=True), path,
        r"model.safetensors holds a Swin checkpoint \(transformers Swin layout\) and cannot be loaded into the "
        r"model 'vision_transformer', a ViT, DeiT or hybrid; expected a ViT, DeiT or hybrid checkpoint: "
        r".* a timm ViT/DeiT/hybrid or transformers ViT/DeiT state dict",
    )


QUERY = "vit.encoder.layer.1.attention.attention.query.weight"


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda a: a.pop(QUERY.replace("query", "key")),
         r"broken.safetensors: block 1 of the checkpoint has \['vit.encoder.layer.1.attention.attention.query.weight', "
         r"'vit.encoder.layer.1.attention.attention.value.weight'\] but lacks its attention \['key'\] weight"),
        (lambda a: a.update({QUERY: np.zeros(1024, "float32")}),
         rf"broken.safetensors: entry '{QUERY}' has shape \(1024,\); expected an \(out, in\) Linear weight."),
        (lambda a: a.update({QUERY: np.zeros((16, 32), "float32")}),
         r"the attention query, key and value weights of block 1 differ in shape"),
        (lambda a: a.update({"vit.embeddings.patch_embeddings.projection.weight": np.zeros((32, 3, 4, 4), "float32")}),
         r"broken.safetensors: weight 'patch_encoder/projection/kernel' has shape \(48, 32\) in the checkpoint "
         r"but \(192, 32\) in the model"),
    ],
)
def test_broken_transformers_entries_are_named(tmp_path, edit, message):
    arrays = load_file(save_pretrained(hf_model("ViTForImageClassification"), tmp_path))
    edit(arrays)
    _assert_fails_unchanged(keras_tiny(), save_arrays(tmp_path / "broken.safetensors", arrays), message)
