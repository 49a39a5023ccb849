"""Experiments: the papers' tables and figures, each a registered experiment run over seeds.

    python -m kerasbert.experiments --list
    python -m kerasbert.experiments NAME --flags...

Each experiment is an `ExperimentSpec` (kerasbert/hookspecs.py) registered through the
`kerasbert_experiments` hook, the built-in ones in `builtin.py` exactly as a plugin's.
"""
