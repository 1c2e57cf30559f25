"""Few-shot linear evaluation: closed-form regularized least squares (ViT Sec. 4.1 "Metrics")."""

import numpy as np

__all__ = ["few_shot_linear", "fit_least_squares", "predict_least_squares"]


def fit_least_squares(features, labels, num_classes, l2_reg=1.0):
    """Solves `min_W ||[X 1] W - T||^2 + l2_reg ||W_x||^2` with targets `T` in {-1, 1}^K.

    The bias row is not regularized.

    Returns:
        Array `(features + 1, num_classes)`.
    """
    x = np.concatenate([np.asarray(features, "float64"), np.ones((len(features), 1))], axis=1)
    targets = 2.0 * np.eye(num_classes)[np.asarray(labels)] - 1.0
    penalty = l2_reg * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0
    return np.linalg.solve(x.T @ x + penalty, x.T @ targets)


def predict_least_squares(weights, features):
    """Class predictions of a least-squares probe.

    Args:
        weights: the `(features + 1, classes)` array of `fit_least_squares`.
        features: array `(batch, features)`.

    Returns:
        int array `(batch,)`: the argmax of the affine map.
    """
    x = np.concatenate([np.asarray(features, "float64"), np.ones((len(features), 1))], axis=1)
    return np.argmax(x @ weights, axis=1)


def few_shot_linear(features_fn, train, test, shots=(1, 5, 10, 25), l2_reg=1.0, seed=0):
    """Few-shot linear accuracy of a frozen representation (ViT Sec. 4.1).

    For each shot count `n`, `n` training examples per class are drawn, their
    representations are mapped to {-1, 1}^K target vectors by regularized least
    squares (solved in closed form), and the accuracy of the argmax on the test
    set is reported.

    Args:
        features_fn: callable mapping a batch of inputs to `(batch, features)`.
        train: tuple `(inputs, labels)` to draw the shots from.
        test: tuple `(inputs, labels)`.
        shots: iterable of ints. Defaults to (1, 5, 10, 25).
        l2_reg: float. Ridge penalty. Defaults to 1.
        seed: int. Draw of the shots.

    Returns:
        Dict `{shots: accuracy}`.
    """
    train_x, train_y = train
    test_x, test_y = test
    train_y, test_y = np.asarray(train_y), np.asarray(test_y)
    classes = np.unique(train_y)
    num_classes = int(max(classes.max(), test_y.max())) + 1
    test_features = np.asarray(features_fn(test_x))
    rng = np.random.default_rng(seed)
    results = {}
    for n in shots:
        if n <= 0:
            raise ValueError(f"`shots` must hold positive integers. Received: shots={tuple(shots)}")
        chosen = []
        for c in classes:
            members = np.flatnonzero(train_y == c)
            if len(members) < n:
                raise ValueError(f"Class {c} has {len(members)} training examples, fewer than {n} shots.")
            chosen.extend(rng.choice(members, n, replace=False))
        chosen = np.asarray(chosen)
        weights = fit_least_squares(np.asarray(features_fn(train_x[chosen])), train_y[chosen], num_classes, l2_reg)
        results[n] = float(np.mean(predict_least_squares(weights, test_features) == test_y))
    return results
