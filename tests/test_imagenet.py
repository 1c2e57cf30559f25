"""keras_vit.imagenet: ImageNet-1k class names and top-k decoding."""

import numpy as np
import pytest

from keras_vit.imagenet import decode_predictions, imagenet_class_names


def test_imagenet_class_names_are_the_standard_1000():
    names = imagenet_class_names()
    assert len(names) == 1000 and len({wnid for wnid, _ in names}) == 1000
    assert names[0] == ("n01440764", "tench")
    assert names[1] == ("n01443537", "goldfish")
    assert names[999][0] == "n15075141"
    assert [wnid for wnid, _ in names] == sorted(wnid for wnid, _ in names)


def test_decode_predictions_top_k():
    logits = np.full((2, 1000), -5.0)
    logits[0, [1, 0]] = [3.0, 2.0]
    logits[1, 999] = 4.0
    decoded = decode_predictions(logits, top=2)
    assert [(i, name) for i, name, _ in decoded[0]] == [(1, "goldfish"), (0, "tench")]
    e = np.exp(logits[0] - logits[0].max())
    assert decoded[0][0][2] == pytest.approx(e[1] / e.sum())
    assert decoded[1][0][0] == 999
    probs = decode_predictions(np.array([[0.2, 0.7, 0.1]]), top=1, from_logits=False, class_names=["a", "b", "c"])
    assert probs == [[(1, "b", 0.7)]]


def test_decode_predictions_rejects_mismatched_names():
    with pytest.raises(ValueError, match="`class_names` has 2 names but the predictions have 3 classes"):
        decode_predictions(np.zeros((1, 3)), class_names=["a", "b"])
