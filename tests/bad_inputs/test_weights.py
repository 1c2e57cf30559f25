"""Bad checkpoints and bad `load_weights` arguments: named errors, nothing assigned, nothing downloaded.

Each malformed file is generated here. Every message must name the file and
the offending entry; a failed load leaves the model's weights as they were.
"""

import hashlib
import json
import pathlib
import re
import struct

import keras
import numpy as np
import pytest
from safetensors.numpy import save_file

import keras_vit
from keras_vit import checkpoints
from keras_vit.weights import registry
from tests.testing import to_numpy
from tests.weights.checkpoints import TINY, official_npz_arrays, save_npz


def tiny(**overrides):
    return keras_vit.VisionTransformer(**{**TINY, "preprocessing": None, **overrides})


def weights_of(model):
    return [to_numpy(w).copy() for w in model.weights]


def assert_fails_unchanged(path, message, model=None):
    model = model or tiny()
    before = weights_of(model)
    with pytest.raises(ValueError, match=message):
        keras_vit.load_weights(model, path)
    for a, b in zip(weights_of(model), before):
        np.testing.assert_array_equal(a, b)


def npz_with(tmp_path, name="bad.npz", **changes):
    """The tiny official checkpoint with entries replaced (or deleted, for `"remove"`); `__` stands for `/`."""
    arrays = official_npz_arrays()
    for key, value in changes.items():
        key = key.replace("__", "/")
        if isinstance(value, str) and value == "remove":
            del arrays[key]
        else:
            arrays[key] = value
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


GET_FILE = keras.utils.get_file


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch):
    """Downloads are served from file:// only where a test registers one."""

    def refuse(*args, **kwargs):
        raise AssertionError("a bad checkpoint reached the network")

    monkeypatch.setattr(keras.utils, "get_file", refuse)


# ---- malformed .npz -----------------------------------------------------------

BLOCK = "Transformer/encoderblock_0/MultiHeadDotProductAttention_1"


@pytest.mark.parametrize(
    "key,value",
    [
        ("cls", None),  # a pickled None: object arrays are refused unread
        ("embedding/bias", np.array([{"a": 1}], dtype=object)),
    ],
)
def test_npz_object_entry(tmp_path, key, value):
    path = npz_with(tmp_path, **{key.replace("/", "__"): value})
    assert_fails_unchanged(path, rf"Could not read entry {re.escape(repr(key))} of '{re.escape(path)}' as .npz \(ValueError: Object arrays cannot be loaded")


@pytest.mark.parametrize(
    "key,value,dtype",
    [
        ("embedding/kernel", np.array(["0.1", "0.2"]), "<U3"),  # strings where numbers belong
        ("head/bias", np.array([b"x"] * 10), "|S1"),
        ("Transformer/encoder_norm/scale", np.ones(32, np.complex64), "complex64"),
    ],
)
def test_npz_entry_that_is_not_numbers(tmp_path, key, value, dtype):
    path = npz_with(tmp_path, **{key.replace("/", "__"): value})
    assert_fails_unchanged(path, rf"Entry {re.escape(repr(key))} of '{re.escape(path)}' holds {re.escape(dtype)} values .* not numbers")


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("embedding/kernel", np.zeros((192, 32), "float32"), r"a \(patch_height, patch_width, channels, hidden\) patch kernel"),
        ("Transformer/posembed_input/pos_embedding", np.float32(0.5), r"\(1, positions, hidden\) or \(positions, hidden\)"),
        ("Transformer/posembed_input/pos_embedding", np.zeros((2, 17, 32), "float32"), r"\(1, positions, hidden\)\."),
        (f"{BLOCK}/query/kernel", np.zeros((32, 32), "float32"), r"a \(hidden, heads, head_dim\) kernel"),
        (f"{BLOCK}/key/bias", np.zeros((2, 16, 1), "float32"), r"a \(heads, head_dim\) bias"),
        (f"{BLOCK}/out/kernel", np.float32(1.0), r"a \(heads, head_dim, hidden\) kernel"),
    ],
)
def test_npz_entry_of_the_wrong_rank(tmp_path, key, value, expected):
    path = npz_with(tmp_path, **{key.replace("/", "__"): value})
    assert_fails_unchanged(path, rf"{re.escape(path)}: entry {re.escape(repr(key))} has shape {re.escape(str(np.shape(value)))}; expected {expected}")


def test_npz_scanned_entry_without_a_block_axis(tmp_path):
    arrays = official_npz_arrays(big_vision=True, scanned=True)
    key = "params/Transformer/encoderblock/LayerNorm_0/scale"
    arrays[key] = np.float32(1.0)
    path = save_npz(tmp_path / "scanned.npz", arrays)
    assert_fails_unchanged(path, rf"{re.escape(path)}: entry '{key}' has shape \(\); expected a scanned array with the blocks on axis 0")


def test_npz_attention_parts_of_different_shapes(tmp_path):
    path = npz_with(tmp_path, **{f"{BLOCK}/value/kernel".replace("/", "__"): np.zeros((32, 2, 8), "float32")})
    assert_fails_unchanged(path, rf"{re.escape(path)}: the attention query, key and value kernels of block 0 differ in shape")


def test_npz_attention_part_missing(tmp_path):
    path = npz_with(tmp_path, **{f"{BLOCK}/value/bias".replace("/", "__"): "remove"})
    assert_fails_unchanged(path, rf"{re.escape(path)}: block 0 of the checkpoint has \[.*\] but lacks its attention \['value'\] bias")


def test_npz_head_of_the_wrong_rank(tmp_path):
    # Not taken for a head of other classes (which would be dropped silently).
    path = npz_with(tmp_path, head__kernel=np.zeros(10, "float32"))
    assert_fails_unchanged(path, rf"{re.escape(path)}: weight 'head/kernel' has shape \(10,\) in the checkpoint; expected a 2-D \(features, classes\) kernel")


def test_npz_kernel_of_another_shape(tmp_path):
    path = npz_with(tmp_path, **{"Transformer/encoderblock_1/MlpBlock_3/Dense_0/kernel".replace("/", "__"): np.zeros((32, 65), "float32")})
    assert_fails_unchanged(path, rf"{re.escape(path)}: weight 'encoderblock_1/mlp/fc1/kernel' has shape \(32, 65\) in the checkpoint but \(32, 64\)")


# ---- malformed .safetensors ---------------------------------------------------


def safetensors_file(path, header, data=b"\0" * 16):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return str(path)


F32 = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}


@pytest.mark.parametrize(
    "entry,problem",
    [
        ({**F32, "shape": "abc"}, r"has shape='abc'; expected a list of non-negative integers"),
        ({**F32, "shape": [2, -2]}, r"has shape=\[2, -2\]; expected a list of non-negative integers"),
        ({**F32, "dtype": 5}, r"has dtype=5; expected one of \["),
        ({**F32, "dtype": "STRING"}, r"has dtype='STRING'; expected one of \["),
        (None, r"is None; expected an object with 'dtype', 'shape' and 'data_offsets'"),
        ({"dtype": "F32", "shape": [4]}, r"has data_offsets=None; expected \[begin, end\]"),
        ({**F32, "data_offsets": [0, "16"]}, r"has data_offsets=\[0, '16'\]; expected \[begin, end\]"),
        ({**F32, "data_offsets": [16, 0]}, r"has data_offsets=\[16, 0\]; expected \[begin, end\] with 0 <= begin <= end"),
        ({**F32, "shape": [5]}, r"has data_offsets=\[0, 16\] \(16 bytes\) but dtype F32 and shape \[5\] take 20 bytes"),
    ],
)
def test_safetensors_header_entry(tmp_path, entry, problem):
    path = safetensors_file(tmp_path / "bad.safetensors", {"norm.weight": entry})
    assert_fails_unchanged(path, rf"Damaged safetensors header in '{re.escape(path)}': entry 'norm.weight' {problem}")


def test_safetensors_metadata_that_is_not_strings(tmp_path):
    path = safetensors_file(tmp_path / "meta.safetensors", {"__metadata__": {"format": 1}, "norm.weight": F32})
    assert_fails_unchanged(path, rf"Damaged safetensors header in '{re.escape(path)}': '__metadata__' must map names to strings")


def test_safetensors_header_that_is_not_json(tmp_path):
    path = tmp_path / "broken.safetensors"
    raw = b'{"norm.weight": {"dtype": "F32",'
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 16)
    assert_fails_unchanged(str(path), rf"Damaged safetensors header in '{re.escape(str(path))}'")


def test_safetensors_header_that_is_a_list(tmp_path):
    path = safetensors_file(tmp_path / "list.safetensors", [F32])
    assert_fails_unchanged(path, rf"Checkpoint '{re.escape(path)}' is named .safetensors but is not a .safetensors file")


@pytest.mark.parametrize(
    "key,shape,expected",
    [
        ("patch_embed.proj.weight", (32, 192), r"an \(out, in, height, width\) convolution weight"),
        ("pos_embed", (32,), r"\(1, positions, hidden\) or \(positions, hidden\)"),
        ("patch_embed.backbone.stem.conv.weight", (64, 3, 7), r"an \(out, in, height, width\) convolution weight"),
    ],
)
def test_safetensors_entry_of_the_wrong_rank(tmp_path, key, shape, expected):
    path = str(tmp_path / "rank.safetensors")
    save_file({key: np.zeros(shape, "float32"), "cls_token": np.zeros((1, 1, 32), "float32")}, path)
    assert_fails_unchanged(path, rf"{re.escape(path)}: entry {re.escape(repr(key))} has shape {re.escape(str(shape))}; expected {expected}")


# ---- bad files and arguments --------------------------------------------------


def test_empty_file(tmp_path):
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")
    assert_fails_unchanged(str(path), rf"Checkpoint '{re.escape(str(path))}' is named .npz but is not a .npz file: "
                                      r"a .npz file is a zip archive .* this one begins with b''")


def test_directory_instead_of_a_file(tmp_path):
    assert_fails_unchanged(str(tmp_path), rf"Checkpoint '{re.escape(str(tmp_path))}' is a directory, not a checkpoint file")


def test_missing_path_object(tmp_path):
    path = pathlib.Path(tmp_path / "missing.npz")
    assert_fails_unchanged(path, rf"`checkpoint` file not found: '{re.escape(str(path))}' does not exist")


def test_path_object_that_exists_loads(tmp_path):
    path = pathlib.Path(save_npz(tmp_path / "good.npz", official_npz_arrays()))
    assert keras_vit.load_weights(tiny(), path).exact


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda m, p: keras_vit.load_weights(m, None), r"`checkpoint` must be a checkpoint file path or a known checkpoint name. Received: checkpoint=None \(of type NoneType\)"),
        (lambda m, p: keras_vit.load_weights(m, 3.0), r"Received: checkpoint=3.0 \(of type float\)"),
        (lambda m, p: keras_vit.load_weights(p, m), r"`model` must be a keras_vit `keras.Model` \(the first argument; the checkpoint is the second\). Received: model='.*good.npz'"),
        (lambda m, p: keras_vit.load_weights(m, p, strict="yes"), r"`strict` must be True or False. Received: strict='yes'"),
        (lambda m, p: keras_vit.load_weights(m, p, keep_pre_logits=1), r"`keep_pre_logits` must be True or False. Received: keep_pre_logits=1"),
    ],
)
def test_bad_load_weights_argument(tmp_path, call, message):
    path = save_npz(tmp_path / "good.npz", official_npz_arrays())
    model = tiny()
    before = weights_of(model)
    with pytest.raises(ValueError, match=message):
        call(model, path)
    for a, b in zip(weights_of(model), before):
        np.testing.assert_array_equal(a, b)


# ---- known names: checked against the model before any download ----------------


@pytest.fixture
def vit_ti16():
    return keras_vit.ViT_Ti16(image_size=32, num_classes=10)


@pytest.mark.parametrize(
    "name,message",
    [
        ("ViT_B16/imagenet21k", r"The checkpoint 'ViT_B16/imagenet21k' is one of ViT_B16 and does not fit the model 'vit_ti16': hidden_size=768 vs hidden_size=192, num_heads=12 vs num_heads=3, mlp_dim=3072 vs mlp_dim=768 \(checkpoint vs model\). Nothing was downloaded."),
        ("ConViT_Ti/imagenet", r"'ConViT_Ti/imagenet' is one of ConViT_Ti and does not fit the model 'vit_ti16': builder='ConViT' vs builder='VisionTransformer', num_heads=4 vs num_heads=3"),
        ("R_ViT_Ti16/augreg", r"'R_ViT_Ti16/augreg' is one of R_ViT_Ti16 and does not fit the model 'vit_ti16': patch_size=\(8, 8\) vs patch_size=\(16, 16\), resnet_stages=\(\) vs resnet_stages=None"),
        ("imagenet21k", r"known checkpoint name \(or its part after '/' for a model built by that variant's builder; ViT_Ti16's are \['augreg'\]\)\..*list_checkpoints\(\) lists all \d+\. Received: checkpoint='imagenet21k'"),
    ],
)
def test_known_name_that_does_not_fit_the_model(vit_ti16, name, message):
    before = weights_of(vit_ti16)
    with pytest.raises(ValueError, match=message):
        keras_vit.load_weights(vit_ti16, name)
    for a, b in zip(weights_of(vit_ti16), before):
        np.testing.assert_array_equal(a, b)


def test_known_name_into_a_model_of_other_channels():
    model = keras_vit.ViT_Ti16(image_size=32, num_channels=1)
    with pytest.raises(ValueError, match=r"'ViT_Ti16/augreg' is one of ViT_Ti16 and does not fit the model 'vit_ti16': num_channels=3 vs num_channels=1"):
        keras_vit.load_weights(model, "augreg")


# ---- downloads whose file changed -----------------------------------------------


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A known checkpoint without a pinned hash, served from a local file:// address."""
    monkeypatch.setattr(keras.utils, "get_file", GET_FILE)  # from the local file only
    source = save_npz(tmp_path / "served.npz", official_npz_arrays())
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/served", checkpoints.KnownCheckpoint(f"file://{source}"))
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models" / "keras_vit" / "served.npz"


def test_tampered_cache_file_is_refused(served, tmp_path):
    keras_vit.load_weights(tiny(), "Tiny/served")  # the first use records the hash
    recorded = hashlib.sha256(served.read_bytes()).hexdigest()
    save_npz(tmp_path / "other.npz", official_npz_arrays(seed=1))
    served.write_bytes((tmp_path / "other.npz").read_bytes())
    actual = hashlib.sha256(served.read_bytes()).hexdigest()
    assert_fails_unchanged(
        "Tiny/served",
        rf"The cached checkpoint {re.escape(str(served))} changed since its first use: its sha256 is {actual} "
        rf"but {recorded} was recorded in {re.escape(str(served))}.sha256. Refusing to load it. Delete {re.escape(str(served))} to download it again",
    )


def test_damaged_hash_record_is_refused(served):
    keras_vit.load_weights(tiny(), "Tiny/served")
    pathlib.Path(f"{served}.sha256").write_text("not a hash\n")
    assert_fails_unchanged("Tiny/served", rf"The hash record {re.escape(str(served))}.sha256 of the cached checkpoint .* is damaged")


def test_tampered_file_with_a_pinned_hash_is_refused_and_removed(served, monkeypatch, tmp_path):
    source = tmp_path / "served.npz"
    pinned = hashlib.sha256(source.read_bytes()).hexdigest()
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/served", checkpoints.KnownCheckpoint(f"file://{source}", pinned))
    keras_vit.load_weights(tiny(), "Tiny/served")
    served.write_bytes(served.read_bytes() + b"tampered")
    assert_fails_unchanged("Tiny/served", rf"corrupt or incomplete: its sha256 is not the recorded {pinned} but [0-9a-f]{{64}}. The file {re.escape(str(served))} was removed")
    assert not served.exists()
