"""`keras_vit/__init__.pyi`: the package's names for IDEs and type checkers, written from the table.

The general builders and the named variants join `keras_vit` from the variant
table when it is imported (`keras_vit.models.BUILDERS`, `NAMED_BUILDERS`), a
registered family's with the others, so no list in the source names them and a
new family adds none. Tools that read the source without running it (an IDE's
completion, a type checker) would then see none of them; the stub beside
`__init__.py` declares them: the imports `__init__.py` writes, as they are, and
every builder of the imported package as a function with its signature and
docstring. It is written by

    python -m keras_vit.stubs keras_vit/__init__.pyi

and a test fails when the file differs from what the imported package gives.
"""

import argparse
import ast
import inspect
import pathlib

import keras_vit
from keras_vit.files import write_text_atomically

_HEADER = (
    "# Written by `python -m keras_vit.stubs keras_vit/__init__.pyi` from the imported package: do not edit.\n"
    '"""keras_vit\'s public names, for IDEs and type checkers (see `keras_vit.stubs`)."""\n\n'
    "from typing import Any\n\nimport keras\n\n"
)


def _parameter(parameter):
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
    default = "" if parameter.default is inspect.Parameter.empty else f" = {parameter.default!r}"
    return f"{stars}{parameter.name}: Any{default}"


def _builder_stub(name, function):
    """A builder as a stub function: its signature and docstring, returning a `keras.Model`."""
    parameters, kinds = [], [parameter.kind for parameter in inspect.signature(function).parameters.values()]
    for index, parameter in enumerate(inspect.signature(function).parameters.values()):
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and inspect.Parameter.VAR_POSITIONAL not in kinds[:index] \
                and inspect.Parameter.KEYWORD_ONLY not in kinds[:index]:
            parameters.append("*")
        parameters.append(_parameter(parameter))
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY and inspect.Parameter.POSITIONAL_ONLY not in kinds[index + 1:]:
            parameters.append("/")
    doc = inspect.cleandoc(function.__doc__ or "").replace('"""', "'''")
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'def {name}({", ".join(parameters)}) -> keras.Model:\n    """{body.lstrip()}\n    """\n'


def _source_imports(package):
    """The `from ... import ...` statements of the package's `__init__.py`: `[(module, [(name, alias)])]`."""
    tree = ast.parse(pathlib.Path(package.__file__).read_text())
    return [(node.module, [(alias.name, alias.asname or alias.name) for alias in node.names])
            for node in tree.body if isinstance(node, ast.ImportFrom)]


def package_stub(package=keras_vit):
    """The text of `__init__.pyi` for the imported `package`.

    Its `__init__.py`'s imports as they are (each name imported `as` itself,
    which a type checker reads as a public re-export), then every public
    function of the imported package that none of them gives: the builders
    from the table, in the table's order.
    """
    lines, given = [_HEADER], set()
    for module, names in _source_imports(package):
        lines.append(f"from {module} import {', '.join(f'{name} as {alias}' for name, alias in names)}\n")
        given.update(alias for _, alias in names)
    builders = []
    for name, value in vars(package).items():
        if name.startswith("_") or name in given or not inspect.isfunction(value):
            continue
        if value.__code__.co_name == name:
            # Written in the source of its module (`VisionTransformer`): imported from there.
            lines.append(f"from {value.__module__} import {name} as {name}\n")
        else:
            # Made from the table (`make_builder`): no source defines it.
            builders.append(_builder_stub(name, value))
    return "".join(lines) + "\n\n" + "\n\n".join(builders)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="where to write the stub, e.g. keras_vit/__init__.pyi")
    args = parser.parse_args(argv)
    write_text_atomically(args.output, package_stub())
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
