"""A family registers once (`keras_vit.models.registration`), and binds its builders by name in its folder."""

import ast
import importlib
import inspect
import pathlib

import pytest

import keras_vit
from keras_vit import architectures, checkpoints, families
from keras_vit.families import FamilySpec
from keras_vit.models import axial, registration, variants

MODELS = pathlib.Path(keras_vit.__file__).parent / "models"


def _toy(**changes):
    def Toy(**kwargs):
        return kwargs

    fields = dict(name="Toy", builders={"Toy": Toy}, architectures={"Toy_T": ("Toy", {"hidden_size": 8})})
    return FamilySpec(**{**fields, **changes})


def _tables():
    return {
        "families": dict(families.FAMILIES), "builders": dict(variants.BUILDERS),
        "architectures": dict(architectures.ARCHITECTURES), "variants": dict(variants.VARIANTS),
        "without_checkpoints": dict(variants.WITHOUT_CHECKPOINTS),
        "checkpoints": dict(checkpoints.KNOWN_CHECKPOINTS),
    }


@pytest.mark.parametrize("spec, message", [
    ("AxialViT", r"`spec` must be a keras_vit.families.FamilySpec. Received: spec='AxialViT'"),
    (axial.SPEC, r"Family 'AxialViT' is registered already"),
    (_toy(architectures={"Toy_T": ("Other", {})}), r"Family 'Toy' has variants of builders it does not give: \['Other'\]"),
    # The builder is new, the variant is not: the builder must not be left in its table.
    (_toy(architectures={"ViT_B16": ("Toy", {})}), r"Family 'Toy' registers variants that exist already: \['ViT_B16'\]"),
    (_toy(builders={"ConViT": lambda: None}, architectures={}),
     r"Family 'Toy' registers builders that exist already: \['ConViT'\]"),
    # A builder named as a function of the variants module would replace it.
    (_toy(builders={"build_variant": lambda: None}, architectures={}),
     r"Family 'Toy' registers names that exist already: \['build_variant'\]"),
    (_toy(checkpoints={"ViT_B16/augreg": checkpoints.KNOWN_CHECKPOINTS["ViT_B16/augreg"]}),
     r"Checkpoints registered already \(names compare in any case\): \['ViT_B16/augreg'\]"),
    # A record without the layout that picks its converter, or without its evaluation transform.
    (_toy(checkpoints={"Toy_T/data": checkpoints.KnownCheckpoint("https://example.com/toy.npz")}),
     r"Checkpoint 'Toy_T/data' has no layout or eval_config"),
    (_toy(builders={"backbone": lambda: None}, architectures={}),
     r"Family 'Toy' registers names that exist already: \['backbone'\]"),
    (_toy(checkpoint_layout=lambda fmt, arrays: None), r"Family 'Toy' gives `checkpoint_layout` without `convert`"),
    (_toy(position_weight="toy/position"), r"Family 'Toy' gives `position_weight` without `resample_position`"),
])
def test_a_refused_family_leaves_every_table_as_it_was(spec, message):
    before = _tables()
    with pytest.raises(ValueError, match=message):
        registration.register_family(spec)
    assert _tables() == before


def _named_modules():
    """Each family folder's `named` module, by folder."""
    return {path.parent.name: importlib.import_module(f"keras_vit.models.{path.parent.name}.named")
            for path in sorted(MODELS.glob("*/named.py"))}


def test_each_folder_binds_its_builders_by_name_and_the_package_gives_them():
    named = _named_modules()
    assert set(named) == {"vit", "convit", "swin", "axial", "dinov2"}
    bound = [name for module in named.values() for name in module.__all__]
    # Every general builder and named variant once, and nothing else.
    assert sorted(bound) == sorted([*variants.BUILDERS, *variants.VARIANTS])
    for folder, module in named.items():
        general, *sizes = module.__all__
        assert variants.BUILDERS[general] is getattr(module, general)
        # A folder's sizes are its builder's, in the table's order.
        assert sizes == [name for name, (builder, _) in variants.VARIANTS.items() if builder.__name__ == general]
        for name in module.__all__:
            assert getattr(keras_vit, name) is getattr(module, name) is getattr(keras_vit.models, name), name
        for name in sizes:
            builder = getattr(module, name)
            assert builder.__name__ == name and builder.__module__ == module.__name__
            assert f"Builds {name} (" in inspect.getdoc(builder)
            assert list(inspect.signature(builder).parameters) == ["weights", "kwargs"]


def test_no_module_writes_another_modules_names():
    # Names bound in the source, not written into a module's namespace from a table (`globals().update`).
    for path in pathlib.Path(keras_vit.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
                assert not (isinstance(node.func.value, ast.Call) and getattr(node.func.value.func, "id", "")
                            in ("globals", "vars")), f"{path}:{node.lineno}"


def test_a_named_builder_is_bound_to_a_known_variant_only():
    with pytest.raises(ValueError, match=r"Unknown variant\. Expected one of .* Received: variant='ViT_B17'"):
        variants.named_builder("ViT_B17")


def test_a_builder_of_a_family_without_checkpoints_says_so_and_refuses_one():
    doc = inspect.getdoc(keras_vit.AxialViT_B32)
    assert "weights: None: Axial-ViT has no published checkpoints" in doc
    with pytest.raises(ValueError, match=r"Axial-ViT has no published checkpoints .* Received: weights='imagenet'"):
        keras_vit.AxialViT_B32(weights="imagenet")


def test_a_familys_own_layers_and_tools_are_its_packages_only():
    namespace = {}
    exec("from keras_vit.layers import *", namespace)
    assert "TransformerBlock" in namespace and not {"GPSA", "SwinTransformerBlock"} & set(namespace)
    assert not hasattr(keras_vit.layers, "GPSA") and not hasattr(keras_vit.analysis, "window_grids")
    from keras_vit.models import convit, swin

    assert {"GPSA", "GPSABlock", "gpsa_gating"} <= set(convit.__all__)
    assert {"SwinTransformerBlock", "window_grids", "swin_forward_macs"} <= set(swin.__all__)


def test_design_md_measures_the_family_interface_as_it_is():
    # docs/design.md, "The family interface, measured": one row per FamilySpec member with the
    # families that give it, and the files of each folder.
    import dataclasses

    design = (pathlib.Path(keras_vit.__file__).parent.parent / "docs" / "design.md").read_text()
    default = FamilySpec(name="x", builders={}, architectures={})
    fields = dataclasses.fields(FamilySpec)
    for field in fields:
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        users = [spec.name for spec in families.FAMILIES.values()
                 if getattr(spec, field.name) != getattr(default, field.name)]
        # A member one family uses has a default (the interface's rule).
        assert len(users) >= 2 or not required, field.name
        row = f"| `{field.name}` | {'required' if required else 'yes'} | {len(users)} | {', '.join(users)} |"
        assert row in design, f"design.md lacks or misstates: {row}"
    assert design.count("| yes |") + design.count("| required |") == len(fields)
    for folder in sorted(path.parent for path in MODELS.glob("*/named.py")):
        files = ", ".join(f"`{path.name}`" for path in sorted(folder.glob("*.py")))
        assert f"| `{folder.name}/` | {files} |" in design, folder.name
