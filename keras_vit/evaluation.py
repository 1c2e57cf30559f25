"""The former name of `keras_vit.few_shot`, kept so that existing imports keep working."""

from keras_vit.few_shot import few_shot_linear, fit_least_squares, predict_least_squares

__all__ = ["few_shot_linear", "fit_least_squares", "predict_least_squares"]
