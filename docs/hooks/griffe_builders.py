"""A griffe extension: the named builders documented as the functions they are when imported.

`keras_vit.ViT_B16` and its siblings are made by `named_builder` from the variant table, so
griffe's reading of the source sees module attributes (`ViT_B16 = named_builder("ViT_B16")`
in each family's `named.py`) with no docstring or signature, although `help(keras_vit.ViT_B16)`
has both. This extension
replaces each such attribute by a function with the imported object's docstring and
signature, so the API reference shows them as `help()` does.
"""

import importlib
import inspect
import os
import sys

import griffe

# The repository root, where mkdocs.yml's `paths: ["."]` points griffe: importable here too.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _parameters(function):
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
        inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
        inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
        inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
        inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
    }
    return griffe.Parameters(*(
        griffe.Parameter(
            name, kind=kinds[parameter.kind],
            default=None if parameter.default is inspect.Parameter.empty else repr(parameter.default),
        )
        for name, parameter in inspect.signature(function).parameters.items()
    ))


def _function(name, value, lineno, endlineno):
    function = griffe.Function(name, lineno=lineno, endlineno=endlineno, parameters=_parameters(value))
    # Parsed as the Google-style sections it has (Args, Returns), as mkdocs.yml parses the others.
    function.docstring = griffe.Docstring(inspect.cleandoc(value.__doc__), parent=function, parser="google",
                                          parser_options={"warn_missing_types": False})
    return function


class NamedBuilders(griffe.Extension):
    """The functions a keras_vit module binds when imported become documented functions of it.

    A module attribute that is a function once imported, named as the attribute
    and with a docstring (each family's named builders), is documented as that
    function: its signature and docstring as `help()` shows them.
    """

    def on_module_members(self, *, node, mod, agent, **kwargs):
        if not mod.path.startswith("keras_vit"):
            return
        module = importlib.import_module(mod.path)
        for name, member in list(mod.members.items()):
            value = getattr(module, name, None)
            if member.is_alias or not member.is_attribute or not inspect.isfunction(value):
                continue
            if value.__name__ != name or not value.__doc__:
                continue
            mod.set_member(name, _function(name, value, member.lineno, member.endlineno))
