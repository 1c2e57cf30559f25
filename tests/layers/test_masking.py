"""PatchCorruption (ViT App. B.1.2): exact counts, the 80/10/10 split, what each kind writes."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_vit.layers.masking import PatchCorruption


def _corrupt(layer, embeddings):
    corrupted, chosen = layer(embeddings)
    return ops.convert_to_numpy(corrupted), ops.convert_to_numpy(chosen)


def test_exact_fraction_per_image_and_each_kind_writes_what_the_paper_says():
    # Distinct embeddings (each patch its own random vector), so each output row tells which kind it is.
    batch, patches, width = 400, 20, 4
    embeddings = np.random.default_rng(0).normal(size=(batch, patches, width)).astype("float32")
    layer = PatchCorruption(rate=0.5, seed=1)
    corrupted, chosen = _corrupt(layer, embeddings)
    mask = ops.convert_to_numpy(layer.mask_embedding)
    assert chosen.shape == (batch, patches) and set(np.unique(chosen)) == {0.0, 1.0}
    np.testing.assert_array_equal(chosen.sum(axis=1), 10)  # round(0.5 * 20) in every image
    np.testing.assert_array_equal(corrupted[chosen == 0], embeddings[chosen == 0])  # unchosen untouched

    is_mask = np.all(corrupted == mask, axis=-1)
    kept = np.all(corrupted == embeddings, axis=-1)
    # A replaced patch equals another patch of the same image, at another position.
    same_image_other = np.array([[any(np.array_equal(corrupted[b, i], embeddings[b, j]) for j in range(patches) if j != i)
                                  for i in range(patches)] for b in range(batch)])
    assert not np.any(is_mask & (chosen == 0))
    kinds = np.stack([is_mask, same_image_other & ~kept, kept], -1)[chosen == 1]
    assert np.all(kinds.sum(-1) == 1)  # each chosen patch is exactly one kind
    fractions = kinds.mean(0)
    # 4,000 chosen patches: binomial standard errors 0.0063 (80%) and 0.0047 (10%); bounds at 4 s.e.
    np.testing.assert_allclose(fractions, [0.8, 0.1, 0.1], atol=0.026)


def test_bert_rate_rounds_and_seeds_repeat():
    embeddings = np.random.default_rng(1).normal(size=(3, 16, 8)).astype("float32")
    _, chosen = _corrupt(PatchCorruption(rate=0.15, seed=3), embeddings)
    np.testing.assert_array_equal(chosen.sum(axis=1), 2)  # round(0.15 * 16) = 2
    first, again = (_corrupt(PatchCorruption(rate=0.15, seed=3), embeddings)[1] for _ in range(2))
    np.testing.assert_array_equal(first, again)


def test_config_round_trip_and_in_a_functional_model():
    layer = PatchCorruption(rate=0.3, mask_rate=0.7, random_rate=0.2, seed=5, name="corrupt")
    config = layer.get_config()
    assert {k: config[k] for k in ("rate", "mask_rate", "random_rate", "seed")} == dict(
        rate=0.3, mask_rate=0.7, random_rate=0.2, seed=5)
    clone = PatchCorruption.from_config(config)
    inputs = keras.Input((6, 8))
    corrupted, chosen = clone(inputs)
    model = keras.Model(inputs, [corrupted, chosen])
    out, where = model(np.ones((2, 6, 8), "float32"))
    assert tuple(out.shape) == (2, 6, 8) and tuple(where.shape) == (2, 6)
    assert [w.path for w in model.weights] == ["corrupt/mask_embedding"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(rate=0.0), r"`rate` must be a float in \(0, 1\]. Received: rate=0.0"),
    (dict(mask_rate=1.5), r"`mask_rate` must be a float in \[0, 1\]. Received: mask_rate=1.5"),
    (dict(mask_rate=0.8, random_rate=0.3), r"at most 1.*Received: mask_rate=0.8, random_rate=0.3"),
])
def test_bad_rates_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PatchCorruption(**kwargs)


def test_needs_a_known_patch_count():
    with pytest.raises(ValueError, match=r"known number of patches and width. Received: input_shape=\(None, None, 8\)"):
        PatchCorruption()(keras.Input((None, 8)))


def test_saved_and_loaded_in_a_keras_file(tmp_path):
    inputs = keras.Input((4, 8))
    model = keras.Model(inputs, PatchCorruption(seed=2, name="corrupt")(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(ops.convert_to_numpy(loaded.get_layer("corrupt").mask_embedding),
                                  ops.convert_to_numpy(model.get_layer("corrupt").mask_embedding))
