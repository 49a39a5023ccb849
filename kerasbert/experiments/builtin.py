"""The built-in experiments, registered exactly as a plugin registers its own.

Only names here: each module is imported when its experiment is chosen, so listing them
loads no TensorFlow and defines no experiment's flags.
"""

from kerasbert.hookspecs import ExperimentSpec, hookimpl

EXPERIMENTS = ()


@hookimpl
def kerasbert_experiments():
    return list(EXPERIMENTS)
