"""`experiments/ablation.py`: the verdicts on a paper's orderings, from made-up records."""

import pytest

from experiments import ablation


def test_orderings_reproduce_only_beyond_the_spread():
    records = [{"arm": arm, "seed": seed, "accuracy": value} for arm, values in
               {"a": (0.84, 0.86), "b": (0.80, 0.81), "e": (0.845, 0.85)}.items() for seed, value in enumerate(values)]
    text, c = ablation.check_claim(records, ["a", "b", "e"], ("a",), ("b", "e"))
    assert text.startswith("a - e: +0.25 points") and ablation.verdict(c) == "same direction, within the spread"
    _, c = ablation.check_claim(records, ["a", "b", "e"], ("a", "e"), ("b",))
    assert ablation.verdict(c) == "yes"  # the weaker of a and e against b
    assert ablation.check_claim(records, ["a", "b", "e"], ("g",), ("f",)) is None
    assert ablation.concordance([82.2, 82.0, 79.1], [0.85, 0.805, 0.8475]) == (2, 3, pytest.approx(1 / 3))


def test_the_summary_counts_the_verdicts_in_sentences():
    found = [("shifting helps", "no, within the spread"), ("the content term matters: above w/o app.", "yes"),
             ("the bias beats none", "same direction, within the spread")]
    text = ablation.summary(found, 12, 14, 10 / 14, seeds=[0, 1])
    assert text.startswith("1 of 3 orderings of the paper reproduce beyond the seeds' spread; 1 in its direction "
                           "within the spread; 1 not in its direction.")
    assert "Reproduced: the content term matters: above w/o app. Not reproduced: shifting helps." in text
    assert text.endswith("agrees with the paper's on 12 of the 14 pairs the paper orders (Kendall's tau +0.71).")
