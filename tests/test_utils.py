"""keras_vit.utils: the public namespace re-exports each helper from the module that holds it."""

from keras_vit import files, imagenet, images, utils


def test_utils_re_exports_the_helpers_from_their_modules():
    homes = {
        "load_image": images,
        "imagenet_class_names": imagenet,
        "decode_predictions": imagenet,
        "write_atomically": files,
        "write_text_atomically": files,
        "file_sha256": files,
    }
    assert sorted(utils.__all__) == sorted(homes)
    for name, module in homes.items():
        assert getattr(utils, name) is getattr(module, name), name
