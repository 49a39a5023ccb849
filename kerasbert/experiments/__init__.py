"""Experiments: the papers' tables and figures, each a registered experiment run over seeds.

    python -m kerasbert.experiments --list
    python -m kerasbert.experiments NAME --flags...

Each experiment is an `ExperimentSpec` (kerasbert/hookspecs.py) registered through the
`kerasbert_experiments` hook, the built-in ones in `builtin.py` exactly as a plugin's, and a
module with `run(argv)`. The built-in ones declare their rows and run them with
`runner.py`: seeds, the baseline row, one process per run, reuse of finished runs, the
table with intervals, its Markdown and JSON (with `measured_on`).
"""
