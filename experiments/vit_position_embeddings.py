"""ViT Table 8 in miniature: does a position embedding help, and does its kind matter?

    python experiments/vit_position_embeddings.py --workdir=/tmp/exp/vit_position_embeddings --write

The claim (Dosovitskiy et al. 2021, App. D.4, Table 8; ViT-B/16, ImageNet
5-shot linear accuracy): a model without position embeddings (61.4%) is
clearly worse than any with one (64.0-64.3%), while the kinds of embedding
differ little among themselves (a range of 0.33 points): learned 1-D (64.2),
learned 2-D (64.0) or 1-D relative attention (64.0), and added at the stem,
to every block's input (64.0) or to every block's input from one shared
table (64.3). The paper's reading: on a grid of patches (14x14, not 224x224
pixels) every strategy learns the spatial relations equally easily. Each row
is builder arguments of `keras_vit.VisionTransformer` (`docs/ablations.md`):
`position_embedding=` `"none"`, `"learned_1d"` (the default), `"learned_2d"`
or `"relative"`, and `position_embedding_at=` `"stem"` (the default),
`"every_layer"` or `"every_layer_shared"`.

The two findings checked: (1) any position embedding beats none: the weakest
embedding row run is above the "none" row by more than the seeds' spread
(the ordering check of `ablation.py`); (2) the kinds differ little: the
range of the embedding rows' means is smaller than the weakest one's margin
over "none" (as in the paper: 0.33 against 2.58 points), i.e. every kind is
nearer to every other than to no embedding at all. The table also says
whether that range is within the seeds' spread (the pooled standard deviation
of the embedding rows).

Setup. A small ViT (`MODEL`: width 64, 4 blocks, 4 heads, MLP 128) on 4x4
patches of the 28x28 images: a 7x7 grid of 49 tokens rather than the
`fashion_mnist_vit` preset's 4x4 grid of 7x7 patches, so that where a patch
sits carries more of the image (16 tokens of 7x7 pixels are nearly a bag of
large parts) and the grid is nearer the paper's 14x14; the width and depth
are kept small so that a run of the longer sequence takes about as long as
one of the preset's model (1-3 minutes on 2 cores). The data is all of the
Fashion-MNIST training split (`--fraction`, default 1): Table 8's models
learned from much data, and a position embedding is learned like any other
weight, so a small slice would mostly measure overfitting. Every row trains
for `--epochs` full-data epochs (default 2: 936 steps at batch 128) with the
preset's recipe (AdamW 1e-3, wd 0.05, clipping 1, label smoothing 0.1, flips;
warmup and EMA scaled to the run), the same seeds (the same batches) for
every row. Accuracy
is each run's `summary.json` (EMA weights) on the first `--test_size` test
images; Table 8 is few-shot linear accuracy on ImageNet, so the levels are
not comparable, only the orderings.

Reading the result: the rows beside the paper's numbers, the ordering check
and a summary sentence computed from the measured numbers, then the
"differ little" check with its own sentence. The machinery (running the rows,
`--resume`, the verdicts, the figure) is `ablation.py`'s.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import ablation, common  # noqa: E402

NAME = "vit_position_embeddings"
TITLE = "ViT Table 8: position embeddings"
# arm -> (the paper's label, builder arguments over the base ViT, the paper's Table 8 number (%)).
ROWS = {
    "none": ("no position embedding", {"position_embedding": "none"}, 61.382),
    "learned_1d": ("1-D learned, at the stem (ViT)", {}, 64.206),
    "learned_2d": ("2-D learned, at the stem", {"position_embedding": "learned_2d"}, 64.001),
    "relative": ("1-D relative attention", {"position_embedding": "relative"}, 64.032),
    "learned_1d_every_layer": ("1-D learned, every block", {"position_embedding_at": "every_layer"}, 63.964),
    "learned_1d_every_layer_shared": ("1-D learned, every block, shared",
                                      {"position_embedding_at": "every_layer_shared"}, 64.292),
}
EMBEDDINGS = tuple(arm for arm in ROWS if arm != "none")
# (the paper's ordering, rows that should be above, rows that should be below).
CLAIMS = (("any position embedding beats none: the weakest embedding row above no embedding", EMBEDDINGS,
           ("none",)),)
# 4x4 patches: a 7x7 grid of 49 tokens (see the module docstring); width and depth of
# `hybrid_compute.py`'s "S" size, so that a run takes 1-3 minutes on 2 cores.
MODEL = dict(patch_size=4, hidden_size=64, num_layers=4, num_heads=4, mlp_dim=128)
POSITION = ablation.Ablation(NAME, TITLE, "VisionTransformer", ROWS, CLAIMS, "paper: ImageNet 5-shot linear (%)")


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    ablation.add_ablation_arguments(parser, ROWS, fraction=1.0, epochs=2)
    return ablation.check_ablation_arguments(parser, parser.parse_args(argv))


def base_kwargs(args):
    """The builder arguments of ViT's own row (learned 1-D embeddings at the stem)."""
    return dict(MODEL, **(common.TINY_MODEL if args.tiny else {}), **(args.model_kwargs or {}))


# ---- the "differ little" check ----------------------------------------------------------------


def kinds_comparison(records, arms):
    """How far apart the embedding rows run are, against their margin over "none"; None without two kinds.

    Returns:
        dict: `range` (points between the best and the worst embedding row's
        mean), `best` and `worst` (their arms), `margin` (the worst one's mean
        minus "none"'s, points; None when "none" was not run) and `spread`
        (the pooled standard deviation over seeds of the embedding rows,
        points; None with one seed).
    """
    kinds = [arm for arm in arms if arm in EMBEDDINGS]
    if len(kinds) < 2:
        return None
    means = {arm: ablation.mean(records, arm) for arm in kinds}
    best, worst = max(kinds, key=means.get), min(kinds, key=means.get)
    values = [list(ablation.values(records, arm).values()) for arm in kinds]
    spread = None
    if min(map(len, values)) > 1:
        spread = 100 * float(np.sqrt(np.mean([np.var(v, ddof=1) for v in values])))
    margin = 100 * (means[worst] - ablation.mean(records, "none")) if "none" in arms else None
    return dict(range=100 * (means[best] - means[worst]), best=best, worst=worst, margin=margin, spread=spread)


def kinds_verdict(kinds):
    """Whether the kinds "differ little": their range below the worst one's margin over "none"."""
    if kinds["margin"] is None:
        return "n/a (no \"none\" row run)"
    if kinds["margin"] <= 0:
        return "no (no margin over none)"
    verdict = "yes" if kinds["range"] < kinds["margin"] else "no"
    return verdict + (" (one seed: no spread)" if kinds["spread"] is None else "")


def points(value):
    return "n/a (one seed)" if value is None else f"{value:.2f}"


def paper_kinds():
    """Table 8's own "differ little" numbers: `(range of the kinds, worst kind - none)`, in points."""
    kinds = [ROWS[arm][2] for arm in EMBEDDINGS]
    return max(kinds) - min(kinds), min(kinds) - ROWS["none"][2]


def kinds_sentence(kinds, verdict):
    """The sentence under the "differ little" table, from the measured numbers."""
    paper = "Table 8: {:.2f} points between kinds, {:.2f} above none".format(*paper_kinds())
    text = (f"The best and the worst kinds run ({kinds['best']}, {kinds['worst']}) are {kinds['range']:.2f} "
            "points apart")
    if kinds["spread"] is not None:
        relation = "within" if kinds["range"] <= kinds["spread"] else "more than"
        text += f", {relation} the seeds' spread ({kinds['spread']:.2f})"
    if kinds["margin"] is None:
        return text + f"; without the \"none\" row there is no margin to compare them with ({paper})."
    text += f", and the worst kind is {kinds['margin']:+.2f} points from no embedding"
    if verdict.startswith("yes"):
        return text + f": the kinds differ less among themselves than from none, as in the paper ({paper})."
    return text + f": unlike the paper ({paper}), the kinds do not cluster apart from no embedding."


def kinds_table(records, arms):
    """The "differ little" check: a table and its sentence, or "" when fewer than two kinds were run."""
    kinds = kinds_comparison(records, arms)
    if kinds is None:
        return ""
    verdict = kinds_verdict(kinds)
    table = common.markdown_table(
        ["the paper's finding", "range of the kinds' means (points)", "worst kind - none (points)",
         "seed-to-seed spread of the kinds: pooled sd (points)", "reproduces"],
        [["the kinds of embedding differ little: their range below the worst one's margin over none",
          f"{kinds['range']:.2f} ({kinds['best']} - {kinds['worst']})",
          "n/a" if kinds["margin"] is None else f"{kinds['margin']:+.2f}", points(kinds["spread"]), verdict]])
    return "\n\n" + table + "\n\n" + kinds_sentence(kinds, verdict)


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    records, setup = ablation.train(args, POSITION, base_kwargs(args))
    note = (" Table 8's numbers are ViT-B/16's (86M parameters) ImageNet 5-shot linear accuracy after large-scale "
            "pretraining, not test accuracy after training on the task itself.")
    return ablation.report(args, POSITION, records, setup, argv, started, kinds_table(records, args.arms), note)


if __name__ == "__main__":
    sys.exit(main())
