"""A family registers once (`keras_vit.models.registration`), and the package's names come from the table."""

import ast
import inspect
import pathlib
import types

import pytest

import keras_vit
from keras_vit import architectures, checkpoints, families
from keras_vit.families import FamilySpec
from keras_vit.models import axial, registration, variants
from keras_vit.stubs import package_stub

STUB = pathlib.Path(keras_vit.__file__).with_name("__init__.pyi")


def _toy(**changes):
    def Toy(**kwargs):
        return kwargs

    fields = dict(name="Toy", builders={"Toy": Toy}, architectures={"Toy_T": ("Toy", {"hidden_size": 8})})
    return FamilySpec(**{**fields, **changes})


def _tables():
    return {
        "families": dict(families.FAMILIES), "builders": dict(variants.BUILDERS),
        "architectures": dict(architectures.ARCHITECTURES), "variants": dict(variants.VARIANTS),
        "named": dict(variants.NAMED_BUILDERS), "without_checkpoints": dict(variants.WITHOUT_CHECKPOINTS),
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


def test_the_package_holds_every_builder_of_the_table():
    for name, builder in variants.BUILDERS.items():
        assert getattr(keras_vit, name) is builder and getattr(keras_vit.models, name) is builder
    assert list(variants.NAMED_BUILDERS) == list(variants.VARIANTS)
    for name, builder in variants.NAMED_BUILDERS.items():
        assert getattr(keras_vit, name) is builder, name
        assert builder.__name__ == name and f"Builds {name} (" in inspect.getdoc(builder)
        assert list(inspect.signature(builder).parameters) == ["weights", "kwargs"]
    # A family's own package exports its named builders too.
    assert axial.AxialViT_B16 is keras_vit.AxialViT_B16 and "AxialViT_B16" in axial.__all__


def test_a_builder_of_a_family_without_checkpoints_says_so_and_refuses_one():
    doc = inspect.getdoc(keras_vit.AxialViT_B32)
    assert "weights: None: Axial-ViT has no published checkpoints" in doc
    with pytest.raises(ValueError, match=r"Axial-ViT has no published checkpoints .* Received: weights='imagenet'"):
        keras_vit.AxialViT_B32(weights="imagenet")


def test_the_stub_is_what_the_imported_package_gives():
    # `python -m keras_vit.stubs keras_vit/__init__.pyi` writes it; a new variant or family changes it.
    assert STUB.read_text() == package_stub(), "run: python -m keras_vit.stubs keras_vit/__init__.pyi"


def _declared(stub_text):
    tree = ast.parse(stub_text)
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module.startswith("keras_vit"):
            names |= {alias.asname for alias in node.names}
    return names


def test_the_stub_declares_every_public_name_and_no_other():
    declared = _declared(STUB.read_text())
    public = {name for name, value in vars(keras_vit).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert public <= declared, sorted(public - declared)
    assert declared - {"__version__"} <= set(vars(keras_vit)), sorted(declared - set(vars(keras_vit)))
    # Each named builder is a function there, with its docstring (an IDE's hover text).
    tree = ast.parse(STUB.read_text())
    functions = {node.name: ast.get_docstring(node) for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert set(functions) == set(variants.NAMED_BUILDERS)
    assert functions["ViT_B16"] == inspect.getdoc(keras_vit.ViT_B16)


def test_the_stub_writer_writes_the_whole_file_and_nothing_else(tmp_path, capsys):
    from keras_vit import stubs

    target = tmp_path / "stub.pyi"
    stubs.main([str(target)])
    assert target.read_text() == package_stub() and "wrote" in capsys.readouterr().out
    assert [path.name for path in tmp_path.iterdir()] == ["stub.pyi"]


def test_a_familys_own_layers_and_tools_are_its_packages_only():
    namespace = {}
    exec("from keras_vit.layers import *", namespace)
    assert "TransformerBlock" in namespace and not {"GPSA", "SwinTransformerBlock"} & set(namespace)
    assert not hasattr(keras_vit.layers, "GPSA") and not hasattr(keras_vit.analysis, "window_grids")
    from keras_vit.models import convit, swin

    assert {"GPSA", "GPSABlock", "gpsa_gating"} <= set(convit.__all__)
    assert {"SwinTransformerBlock", "window_grids", "swin_forward_macs"} <= set(swin.__all__)
