"""kerasbert: fine-tune and study BERT-family encoders on TensorFlow / Keras 3.

    import kerasbert
    run = kerasbert.finetune(task="sst2", output_dir="runs/mine", num_train_epochs=3)
    model = kerasbert.load("runs/mine")
    model.predict(["a great film", "dull"])

Started as a command (`python -m kerasbert.<module>`, a `kerasbert*` console script),
this runs before the command's own imports, so TensorFlow's C++ start-up lines are kept
off stderr before TensorFlow first loads (kerasbert/startup.py); imported by a program,
it changes nothing. The API (kerasbert/api.py) loads TensorFlow only when first used.
"""

from kerasbert import startup as _startup
from kerasbert.errors import InputError, TrainingError

_startup.quiet_tensorflow()

_API = ("finetune", "load", "FineTunedModel", "FineTuneResult", "run_experiment",
        "ExperimentResult")
__all__ = ["InputError", "TrainingError", *_API]


def __getattr__(name):
    # Lazily: `import kerasbert` (every command starts with it) must not load TensorFlow.
    if name in _API:
        from kerasbert import api

        return getattr(api, name)
    raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")
