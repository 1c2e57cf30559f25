"""MkDocs hooks for the keras_vit site (mkdocs.yml, `hooks:`).

- The root files that scripts write (EXPERIMENTS.md by `experiments/*.py --write`,
  BENCHMARKS.md by `benchmarks/*.py`, CHANGELOG.md by hand) become pages of the site, and the
  experiments' figures are served beside them: they stay where the scripts write them, and the
  site never holds a stale copy.
- Mathematics is written in LaTeX between `$...$` (inline) or `$$...$$` (a display of its own)
  and turned into MathML when the site is built. Browsers render MathML themselves, so the site
  loads no script from a CDN and works offline; code (fenced or inline) is left alone.
"""

import os
import re

import latex2mathml.converter
from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# page in the site -> file at the repository's root.
ROOT_PAGES = {
    "experiments.md": "EXPERIMENTS.md",
    "benchmarks.md": "BENCHMARKS.md",
    "changelog.md": "CHANGELOG.md",
}
FIGURES = "experiments/figures"

_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.M | re.S)
_INLINE_CODE = re.compile(r"(`+).+?\1", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
# `$x$` with no space just inside the dollars, so "$5 and $6" in prose is not mathematics.
_INLINE = re.compile(r"(?<![\\$\w])\$(?=\S)(.+?)(?<=\S)\$(?![\w$])", re.S)


def on_files(files, config):
    for page, source in ROOT_PAGES.items():
        with open(os.path.join(ROOT, source), encoding="utf-8") as handle:
            files.append(File.generated(config, page, content=handle.read()))
    for name in sorted(os.listdir(os.path.join(ROOT, FIGURES))):
        if name.endswith(".png"):
            files.append(File.generated(config, f"{FIGURES}/{name}",
                                        abs_src_path=os.path.join(ROOT, FIGURES, name)))
    return files


# `\operatorname{W-MSA}` comes out of latex2mathml as letters and a minus sign ("W − MSA") after
# an empty operator; as text, an operator name reads as the word it is.
_OPERATOR_NAME = re.compile(r"\\operatorname\{([^{}]*)\}")


def _mathml(latex, display):
    latex = _OPERATOR_NAME.sub(r"\\text{\1}", latex.strip())
    return latex2mathml.converter.convert(latex, display="block" if display else "inline")


def _convert_math(text):
    # Protect code first: shell variables such as $OUT and LaTeX in code stay as written.
    protected = []

    def protect(match):
        protected.append(match.group(0))
        return f"\x00{len(protected) - 1}\x00"

    text = _FENCE.sub(protect, text)
    text = _INLINE_CODE.sub(protect, text)
    text = _DISPLAY.sub(lambda m: f"\n\n<div class=\"math\">{_mathml(m.group(1), True)}</div>\n\n", text)
    # In a span: a `<math>` element that begins a line (a formula wrapped to the start of one)
    # would otherwise end the paragraph as a block of raw HTML, and the formula stand alone.
    text = _INLINE.sub(lambda m: f'<span class="math-inline">{_mathml(m.group(1), False)}</span>', text)
    return re.sub(r"\x00(\d+)\x00", lambda m: protected[int(m.group(1))], text)


def on_page_markdown(markdown, page, config, files):
    return _convert_math(markdown)
