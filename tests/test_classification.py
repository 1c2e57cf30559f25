"""Photo to label: `image_classifier` and `classify` against `eval_transform` and the bare model.

A random-weight ViT at the checkpoint's size stands in for the downloaded weights (which
cannot be fetched here); what is tested is the path from a photograph of any size to the
top-5 labels, with the checkpoint's own preprocessing inside the model and in its export.
Tolerance: 1e-3 on logits of O(1) (the in-model transform and `eval_transform` round the same
resized pixels to integers; an integer landing on the other side of .5 moves a pixel by 1).
"""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.preprocessing import eval_transform
from tests.testing import to_numpy

TOLERANCE = 1e-3
CHECKPOINTS = ["ViT_B16/augreg", "DeiT_S16/imagenet"]  # vit_jax's squash and DeiT's resize-and-crop


@pytest.fixture(scope="module")
def photographs():
    import skimage.data

    # 512 x 512, 300 x 451 and 427 x 640: one call per size.
    return [skimage.data.astronaut(), skimage.data.chelsea(), skimage.data.rocket()]


def _model(checkpoint):
    keras.utils.set_random_seed(0)
    preprocessing = "inception" if checkpoint.startswith("ViT") else "imagenet"
    return keras_vit.VisionTransformer(image_size=224, patch_size=16, hidden_size=32, num_layers=1, num_heads=2,
                                       mlp_dim=64, num_classes=1000, preprocessing=preprocessing,
                                       initialization="deit")


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_photographs_get_the_bare_models_top5_after_eval_transform(checkpoint, photographs, tmp_path):
    model = _model(checkpoint)
    classifier = keras_vit.image_classifier(checkpoint, model=model)
    transform = eval_transform(checkpoint)
    expected = [to_numpy(model(np.asarray(transform(photo))[None])) for photo in photographs]
    assert np.ptp(np.concatenate(expected)) > 0.1  # a real signal
    for photo, logits in zip(photographs, expected):
        np.testing.assert_allclose(to_numpy(classifier(photo[None])), logits, atol=TOLERANCE, rtol=0)
    # Files and arrays of different sizes in one call.
    path = tmp_path / "chelsea.png"
    from PIL import Image

    Image.fromarray(photographs[1]).save(path)
    labels = keras_vit.classify(classifier, [photographs[0], str(path), photographs[2]])
    reference = keras_vit.imagenet.decode_predictions(np.concatenate(expected))
    assert [[i for i, _, _ in row] for row in labels] == [[i for i, _, _ in row] for row in reference]
    assert len(labels[0]) == 5 and labels[0][0][1] == keras_vit.imagenet.imagenet_class_names()[labels[0][0][0]][1]


def test_the_saved_model_serves_photographs_of_any_size_with_the_same_top5(photographs, tmp_path):
    import tensorflow as tf

    classifier = keras_vit.image_classifier("DeiT_S16/imagenet", model=_model("DeiT_S16/imagenet"))
    if keras.backend.backend() != "tensorflow":
        # A free-size SavedModel is traced with symbolic sizes, which only TensorFlow's resize takes.
        with pytest.raises(ValueError, match="export a model with the transform inside from .* TensorFlow"):
            keras_vit.export.saved_model(classifier, str(tmp_path / "served"))
        assert not (tmp_path / "served").exists()
        return
    path = keras_vit.export.saved_model(classifier, str(tmp_path / "served"))
    served = tf.saved_model.load(path)  # held: its functions reference its variables
    for photo in photographs:
        probabilities = served.serve(tf.constant(photo[None])).numpy()
        logits = to_numpy(classifier(photo[None]))
        expected = keras_vit.imagenet.decode_predictions(logits)
        assert [i for i, _, _ in keras_vit.imagenet.decode_predictions(probabilities, from_logits=False)[0]] == [
            i for i, _, _ in expected[0]
        ]


def _top5(scores):
    return list(np.argsort(-scores[0])[:5])


def test_litert_and_openvino_files_take_photographs_of_any_size_and_give_the_same_top5(photographs, tmp_path):
    # The transform inside resizes by matrix products (resize_matrices): builtin LiteRT ops, and ops
    # OpenVINO reads, where TensorFlow's antialiased resize is neither's. One file each, every photo size.
    classifier = keras_vit.image_classifier("DeiT_S16/imagenet", model=_model("DeiT_S16/imagenet"))
    lite_path = str(tmp_path / "classifier.tflite")
    if keras.backend.backend() != "tensorflow":
        # LiteRT from JAX lowers sizes known when traced; the transform needs them free.
        with pytest.raises(ValueError, match=r"needs the model's height and width fixed.*KERAS_BACKEND=tensorflow"):
            keras_vit.export.litert(classifier, lite_path)
        assert not (tmp_path / "classifier.tflite").exists()
        return
    interpreter = keras_vit.export.litert_interpreter(keras_vit.export.litert(classifier, lite_path))
    compiled = keras_vit.export.openvino_compiled(
        keras_vit.export.openvino(classifier, str(tmp_path / "classifier.xml")), "f32")
    for photo in photographs:
        logits = to_numpy(classifier(photo[None]))
        for name, output in (("LiteRT", keras_vit.export.litert_predict(interpreter, photo[None])),
                             ("OpenVINO", keras_vit.export.openvino_predict(compiled, photo[None]))):
            assert _top5(output) == _top5(logits), (name, photo.shape)
            np.testing.assert_allclose(output, logits, atol=TOLERANCE, rtol=0, err_msg=name)


def test_a_model_of_another_size_and_bad_images_are_refused():
    model = keras_vit.VisionTransformer(image_size=32, patch_size=8, hidden_size=32, num_layers=1, num_heads=2,
                                       mlp_dim=64, num_classes=1000)
    with pytest.raises(ValueError, match=r"gives \(224, 224\) images of 1 or 3 channels, and `model` takes "
                                         r"\(32, 32, 3\)"):
        keras_vit.image_classifier("ViT_B16/augreg", model=model)
    with pytest.raises(ValueError, match=r"`checkpoint` must be .*known checkpoint name.*ViT_B16's are \['augreg', .*checkpoint='ViT_B16/nonsense'"):
        keras_vit.image_classifier("ViT_B16/nonsense", model=model)
    with pytest.raises(ValueError, match=r"`checkpoint` must be a known .*Received: checkpoint=None"):
        keras_vit.image_classifier(None, model=model)
    # Any case names the checkpoint, as in `eval_config`.
    classifier = keras_vit.image_classifier("vit_b16/AugReg", model=_model("ViT_B16/augreg"))
    with pytest.raises(ValueError, match=r"Received: image 1 of shape \(4, 4, 4\)"):
        keras_vit.classify(classifier, [np.zeros((8, 8, 3)), np.zeros((4, 4, 4))])
    with pytest.raises(ValueError, match="Cannot read the image"):
        keras_vit.classify(classifier, "/no/such/photo.jpg")


def test_an_explicit_transform_goes_in_front_of_a_grayscale_model(photographs, tmp_path):
    # A training run's transform (train/pipeline.py's plain resize, as an EvalConfig) in front of a model
    # of 1-channel images: the classifier takes gray photos and gives the bare model's logits on the
    # transform's first channel. The plain float resize rounds nothing: atol 1e-4.
    from keras_vit.preprocessing import EvalConfig

    keras.utils.set_random_seed(0)
    model = keras_vit.VisionTransformer(image_size=32, patch_size=8, hidden_size=32, num_layers=1, num_heads=2,
                                       mlp_dim=64, num_classes=5, num_channels=1, initialization="deit")
    config = EvalConfig(image_size=32, interpolation="bilinear", crop_fraction=1.0, crop_mode="squash",
                        antialias=False, round_to_uint8=False)
    classifier = keras_vit.image_classifier(config, model=model)
    assert tuple(classifier.input_shape) == (None, None, None, 1)
    gray = np.round(photographs[1].mean(axis=-1, keepdims=True)).astype("uint8")  # 300 x 451
    expected = to_numpy(model(np.asarray(eval_transform(config)(gray))[None, ..., :1]))
    assert np.ptp(expected) > 0.1
    np.testing.assert_allclose(to_numpy(classifier(gray[None])), expected, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match=r"needs the `model` to put it in front of\. Received: .* and model=None"):
        keras_vit.image_classifier(config)
    # `classify` reads a colour photo file as Pillow's luma for it, and gives the model's ranking there.
    from PIL import Image

    path = str(tmp_path / "chelsea.png")
    Image.fromarray(photographs[1]).save(path)
    with Image.open(path) as image:
        luma = np.asarray(image.convert("L"))[..., None]
    logits = to_numpy(model(np.asarray(eval_transform(config)(luma))[None, ..., :1]))[0]
    names = ["a", "b", "c", "d", "e"]
    (ranked,) = keras_vit.classify(classifier, path, top=5, class_names=names)
    assert [index for index, _, _ in ranked] == list(np.argsort(-logits))
    assert ranked[0][1] == names[int(np.argmax(logits))]
