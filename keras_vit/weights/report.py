"""The report `load_weights` returns: what it did with each weight."""

import dataclasses


@dataclasses.dataclass
class LoadReport:
    """What `load_weights` did with each weight.

    Attributes:
        source: str. The file read.
        format: str. `"npz"`, `"safetensors"` or `"keras"`.
        loaded: list of `(model weight, shape)` copied as they were.
        resampled: list of `(model weight, checkpoint shape, model shape)`:
            position embeddings of another grid, Swin bias tables of another
            window.
        skipped: list of `(checkpoint key, reason)` not loaded.
        missing: list of `(model weight, reason)` left as initialized.
        layout: str. The layout of the keys, e.g. `"official ViT"`,
            `"timm ViT"`, `"transformers ViT"`, `"transformers DeiT"`,
            `"keras_vit"`, or a registered family's (`"timm ConViT"`,
            `"timm Swin"`, `"Microsoft Swin"`, `"transformers Swin"`, ...).
    """

    source: str
    format: str
    loaded: list = dataclasses.field(default_factory=list)
    resampled: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    missing: list = dataclasses.field(default_factory=list)
    layout: str = ""

    @property
    def exact(self):
        """True when every weight was loaded unchanged and nothing was left over."""
        return not (self.resampled or self.skipped or self.missing)

    def table(self):
        """The report as a plain-text table, one row per weight."""
        rows = [("status", "weight", "detail")]
        rows += [("loaded", name, str(tuple(shape))) for name, shape in self.loaded]
        rows += [("resampled", name, f"{tuple(a)} -> {tuple(b)}") for name, a, b in self.resampled]
        rows += [("skipped", name, reason) for name, reason in self.skipped]
        rows += [("missing", name, reason) for name, reason in self.missing]
        widths = [max(len(row[i]) for row in rows) for i in range(2)]
        lines = [f"{s:<{widths[0]}}  {w:<{widths[1]}}  {d}" for s, w, d in rows]
        lines.insert(1, "-" * len(lines[0]))
        layout = f", {self.layout}" if self.layout else ""
        summary = (
            f"{self.source} ({self.format}{layout}): {len(self.loaded)} loaded, "
            f"{len(self.resampled)} resampled, {len(self.skipped)} skipped, "
            f"{len(self.missing)} missing"
        )
        return "\n".join([summary, *lines])

    def __str__(self):
        return self.table()
