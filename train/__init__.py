"""The keras_vit trainer: configs, data pipelines, schedules, strategies and the main loop."""
