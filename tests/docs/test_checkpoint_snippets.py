"""Every documentation snippet that names a checkpoint agrees with the checkpoint's record (#62).

The pages' ```python blocks (and README.md's) are read, their commented-out lines too,
since the lines that download are shown as comments. For each block:

- a builder called with a checkpoint name, `ViT_B16(weights="augreg", ...)`, passes what
  `build_variant` checks before it downloads: the name is known for the variant, and the
  snippet's literal arguments over the record's give the checkpoint's architecture;
- a name handed to `image_classifier`, `eval_transform`, `eval_config` or
  `get_checkpoint` is a known checkpoint;
- images for a checkpoint are prepared by that checkpoint's own transform: where a block
  names a transform or a classifier, every checkpoint it builds a model of has its own
  among them, and `utils.load_image` (a generic shorter-side resize and centre crop) is
  not used beside a checkpoint.

Nothing is downloaded or built.
"""

import ast
import re

import pytest

import keras_vit
from keras_vit.architectures import architecture
from keras_vit.checkpoints import find_checkpoint, get_checkpoint
from keras_vit.weights.registry import check_fits
from tests.docs import blocks

NAME_TAKERS = ("image_classifier", "eval_transform", "eval_config", "get_checkpoint")
TRANSFORMS = ("image_classifier", "eval_transform", "eval_config")
FILE_SUFFIXES = (".npz", ".keras", ".h5", ".safetensors", ".bin", ".pth")


def _parsed(text):
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _calls(code):
    """The calls of a block: those of its code and of its commented-out code.

    A run of comment lines is read as one piece of code where it parses (a call
    over several lines), else line by line (prose between the code is skipped).
    """
    trees, run = [_parsed(code)], []
    for line in [*code.splitlines(), ""]:
        text = line.strip()
        if text.startswith("#"):
            run.append(text.lstrip("#").strip())
            continue
        whole = _parsed("\n".join(run)) if run else None
        trees += [whole] if whole is not None else [_parsed(part) for part in run]
        run = []
    return [node for tree in trees if tree is not None for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _name(call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def check(code):
    """`(problems, names)`: what in `code` disagrees with the records, and the checkpoints it names."""
    found, built, transforms, loads = [], set(), set(), False
    for call in _calls(code):
        name = _name(call)
        keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
        arguments = list(call.args)
        if name == "build_variant" and arguments:
            # `build_variant("ViT_B16", weights=...)`: the variant's builder, called by name.
            name, arguments = _literal(arguments[0]), arguments[1:]
        # A named builder's first argument is `weights`; `image_classifier`'s is `checkpoint`.
        if arguments:
            keywords.setdefault("weights" if name in keras_vit.VARIANTS else "checkpoint", arguments[0])
        weights = _literal(keywords["weights"]) if "weights" in keywords else None
        if name in keras_vit.VARIANTS and isinstance(weights, str) and not weights.endswith(FILE_SUFFIXES):
            builder, config = keras_vit.VARIANTS[name]
            arguments = {key: _literal(value) for key, value in keywords.items() if key != "weights"}
            arguments = {key: value for key, value in arguments.items() if value is not None}
            try:
                key, record = find_checkpoint(weights, name)
                check_fits(key, architecture(builder.__name__, {**config, **record.config, **arguments}), name)
            except ValueError as error:
                found.append(f"{ast.unparse(call)}: {error}")
                continue
            built.add(key)
        elif name in NAME_TAKERS and isinstance(_literal(keywords.get("checkpoint", keywords.get("name"))), str):
            try:
                record = get_checkpoint(_literal(keywords.get("checkpoint", keywords.get("name"))))
            except ValueError as error:
                found.append(f"{ast.unparse(call)}: {error}")
                continue
            if name in TRANSFORMS:
                transforms.add(record.name)
        elif name == "load_image":
            loads = True
    if transforms:
        found += [f"{key} is built, but the block prepares images with {sorted(transforms)} only"
                  for key in sorted(built - transforms)]
    if loads and (built or transforms):
        found.append(f"utils.load_image prepares images for {sorted(built | transforms)}: use the checkpoint's "
                     "eval_transform")
    return found, built | transforms


def _snippets():
    return [(page, index, code) for page in [*blocks.pages(), "README.md"]
            for index, code in enumerate(blocks.blocks(page, "python"))]


@pytest.mark.parametrize("page", sorted({page for page, _, _ in _snippets()}))
def test_every_snippet_that_names_a_checkpoint_agrees_with_its_record(page):
    for _, index, code in (snippet for snippet in _snippets() if snippet[0] == page):
        found, _ = check(code)
        assert not found, f"{page}, python block {index}: {found}"


def test_the_check_finds_the_checkpoints_the_pages_name():
    # Something to check: the pages' builders and transforms, of every family with checkpoints.
    named = set().union(*(check(code)[1] for _, _, code in _snippets()))
    assert {"ViT_B16/augreg", "ViT_B16/imagenet21k+imagenet2012", "DeiT_S16/imagenet", "Swin_B384/imagenet",
            "ConViT_S/imagenet", "DINOv2_B14_reg4/lvd142m", "R50_ViT_B16/imagenet21k+imagenet2012"} <= named, named


@pytest.mark.parametrize("code, message", [
    ('m = keras_vit.ViT_B16(weights="augreg2")', r"augreg2"),
    ('m = keras_vit.ViT_B16(weights="imagenet21k", hidden_size=384)', r"hidden_size"),
    ('# m = keras_vit.DeiT_S16(weights="imagenet")\nt = eval_transform("ViT_B16/augreg")',
     r"DeiT_S16/imagenet is built, but the block prepares images with \['ViT_B16/augreg'\] only"),
    ('m = keras_vit.ViT_B16(weights="augreg")\nx = keras_vit.utils.load_image("cat.jpg")', r"load_image"),
    ('c = keras_vit.image_classifier("ViT_B16/no_such")', r"no_such"),
    ('c = keras_vit.image_classifier(checkpoint="ViT_B16/no_such")', r"no_such"),
    ('m = keras_vit.ViT_B16("augreg2")', r"augreg2"),
    ('m = keras_vit.build_variant("ViT_B16", weights="imagenet21k", hidden_size=384)', r"hidden_size"),
    # A call over several commented lines.
    ('#   model = keras_vit.ViT_B16(\n#       weights="imagenet21k", hidden_size=384)', r"hidden_size"),
])
def test_a_snippet_that_disagrees_with_its_record_is_caught(code, message):
    found, _ = check(code)
    assert found and re.search(message, " ".join(found)), found
