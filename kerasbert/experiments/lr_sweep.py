"""BERT's learning-rate sweep with random restarts, the best run picked on dev (section 4).

    python -m kerasbert.experiments lr_sweep --task=rte --data_dir=glue_data/RTE \
        --learning_rates=5e-5,4e-5,3e-5,2e-5 --seeds=1,2,3 --output_dir=runs/rte-sweep

The same command as `python -m kerasbert.main` with a grid (--learning_rates, --num_restarts
or --seeds): kerasbert/sweep.py runs and resumes it and writes sweep.json (with the
restarts table under "restarts"), sweep.csv, sweep.png and report.md. Here the grid is
required: without one kerasbert.main would make a single run.
"""

from kerasbert.errors import InputError
from kerasbert.experiments import runner


def main(argv):
    from kerasbert import main as kb_main

    if not (kb_main.FLAGS.list_tasks or kb_main.FLAGS.list_heads
            or kb_main.asks_for_sweep(kb_main.FLAGS)):
        raise InputError("--learning_rates: a sweep needs its grid: --learning_rates (the "
                         "paper's 5e-5,4e-5,3e-5,2e-5), --num_restarts or --seeds")
    return kb_main.main(argv)


run = runner.command(main)
