"""Swin Table 4 in miniature: do shifted windows and the relative position bias help?

    python experiments/swin_ablations.py --workdir=/tmp/exp/swin_ablations --write

The claim (Liu et al. 2021, Sec. 4.4, Table 4; Swin-T on ImageNet-1K, top-1):
shifting the windows of every second block (SW-MSA) adds 1.1 points over
regular windows alone (80.2 -> 81.3), and the relative position bias B of
Eq. 4 beats no position terms (80.1) and an absolute embedding (80.5); adding
the absolute embedding to the bias gains nothing (81.3), and the bias without
the content term Q K^T / sqrt(d) ("rel. pos. w/o app.") loses 2 points (79.3).
Each row is builder arguments of `keras_vit.SwinTransformer`
(`docs/ablations.md`): `shifted_windows=False`; `position_embedding=` `"none"`,
`"absolute"`, `"absolute+relative"`, `"relative_without_content"` or
`"relative"` (Swin's own, the default).

The orderings checked: shifting helps (shifted above not shifted, both with
the relative bias); the relative bias beats no position terms and beats the
absolute embedding; and the content term matters (relative above relative
without it). Besides, the measured ranking of all the rows run is compared
with the paper's, pair by pair.

Setup. A small Swin: the images resized to 32 px and cut into 4x4 patches (an
8x8 grid), `--window_size` 4 (4 windows in the first stage; in the second,
where the patch merging has halved the grid to 4x4, one window covers the
map, so its blocks attend globally and do not shift), two stages of two
blocks (widths 32 and 64, 2 and 4 heads, MLP ratio 4), so that the first
stage has a regular-window block and a shifted one. Swin Table 4 trained on
all of ImageNet-1K; here all of the Fashion-MNIST training split
(`--fraction`, default 1) for `--epochs` full-data epochs (default 3: 1,404
steps at batch 128, about 2 minutes a run on an idle 2-core CPU, XLA
compilation included) with the `fashion_mnist_vit` preset's recipe (AdamW
1e-3, wd 0.05, clipping 1, label smoothing 0.1, flips; warmup and EMA scaled
to the run; no drop path). A first setup, 2x2 patches (a 16x16 grid, 16
windows) for 1 epoch, left every row far from converged (56-63%, seeds 2-4
points apart). Accuracy is each run's `summary.json` (EMA weights) on the first
`--test_size` test images.

Reading the result: as `convit_ablations.py`'s, with the same machinery
(`ablation.py`): an ordering reproduces when the difference of the two rows' means has
the paper's sign and exceeds the seed-to-seed spread (the pooled standard
deviation of the two rows); the summary sentence is computed from the
measured numbers.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiments import ablation, common  # noqa: E402

NAME = "swin_ablations"
TITLE = "Swin Table 4: shifted windows and position terms"
# arm -> (the paper's label, builder arguments over the base Swin, the paper's ImageNet-1K top-1 (%)).
ROWS = {
    "unshifted": ("w/o shifting (rel. pos.)", {"shifted_windows": False}, 80.2),
    "relative": ("shifted windows, rel. pos. (Swin)", {}, 81.3),
    "none": ("no pos.", {"position_embedding": "none"}, 80.1),
    "absolute": ("abs. pos.", {"position_embedding": "absolute"}, 80.5),
    "absolute_relative": ("abs. + rel. pos.", {"position_embedding": "absolute+relative"}, 81.3),
    "relative_without_content": ("rel. pos. w/o app.", {"position_embedding": "relative_without_content"}, 79.3),
}
# (the paper's ordering, rows that should be above, rows that should be below).
CLAIMS = (
    ("shifting helps: shifted above not shifted windows", ("relative",), ("unshifted",)),
    ("the relative bias beats no position terms", ("relative",), ("none",)),
    ("the relative bias beats the absolute embedding", ("relative",), ("absolute",)),
    ("the content term matters: rel. pos. above rel. pos. w/o app.", ("relative",), ("relative_without_content",)),
)
IMAGE_SIZE = 32
# Two stages of two blocks each: 8x8 patches (one regular-window block, one shifted), then 4x4 (one window).
MODEL = dict(patch_size=4, window_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], mlp_ratio=4.0)
TINY_MODEL = dict(embed_dim=16, mlp_ratio=2.0)
SWIN = ablation.Ablation(NAME, TITLE, "SwinTransformer", ROWS, CLAIMS, "paper: top-1 (%), ImageNet-1K",
                         image_size=IMAGE_SIZE)


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    ablation.add_ablation_arguments(parser, ROWS, fraction=1.0, epochs=3)
    parser.add_argument("--window_size", type=common.positive("window_size"), default=MODEL["window_size"],
                        help="M, the attention window in patches (default %(default)s; the first stage's grid is "
                        f"{IMAGE_SIZE // MODEL['patch_size']})")
    return ablation.check_ablation_arguments(parser, parser.parse_args(argv))


def base_kwargs(args):
    """The builder arguments of Swin's own row (shifted windows, relative position bias)."""
    return dict(MODEL, **(TINY_MODEL if args.tiny else {}), window_size=args.window_size,
                **(args.model_kwargs or {}))


def main(argv=None):
    args = parse_args(argv)
    return ablation.run(args, SWIN, base_kwargs(args), argv)


if __name__ == "__main__":
    sys.exit(main())
