"""Fine-tune only vs frozen only vs stack-and-finetune (Wang et al. 2019) on one task/head,
over seeds.

    python tools/compare_strategies.py --task=mrpc --head=bimpm \
        --data_dir=../shared/data/glue/MRPC --max_train_examples=1000 \
        --frozen_epochs=2 --num_train_epochs=2 --seeds=1,2,3 --output_dir=runs/compare-mrpc

Takes every `kerasbert.main` flag. The three strategies use the same data and encoder and,
seed by seed, the same seed: fine-tune only (--num_train_epochs), frozen only
(--frozen_epochs) and both in sequence. Each (strategy, seed) is an ordinary kerasbert run
in `<output_dir>/<strategy>/seed-<n>/`; run again, finished runs are reused and an
unfinished one resumes (--seeds may grow). Writes `comparison.md` and `comparison.json`
(per strategy: n, mean ± sample std, min–max and a 95% interval of the dev main metric, and
the paired difference to --baseline, default fine-tune only; kerasbert/restarts.py) and
`curves.png` (train and dev curves across the phase boundary, first seed).
"""

import dataclasses
import os
import sys


from kerasbert import main as kb_main
from kerasbert import plugins, restarts, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError

FLAGS = kb_main.FLAGS
STRATEGIES = {  # name -> (uses the frozen phase, uses the fine-tuning phase)
    "fine-tune only": (False, True),
    "frozen only": (True, False),
    "stack-and-finetune": (True, True),
}


def plan(base, task, seeds):
    """[(strategy, {seed: run config})], every config resolved (the task's recipe)."""
    frozen_epochs = base.frozen_epochs or 2.0
    finetune_epochs = base.num_train_epochs if base.num_train_epochs is not None else 2.0
    rows = []
    for name, (frozen, finetune) in STRATEGIES.items():
        folder = os.path.join(base.output_dir, name.replace(" ", "_"))
        rows.append((name, {seed: dataclasses.replace(
            base, output_dir=restarts.seed_folder(folder, seed), overwrite_output_dir=False,
            seed=seed, frozen_epochs=frozen_epochs if frozen else 0.0,
            num_train_epochs=finetune_epochs if finetune else 0.0).resolved(task)
            for seed in seeds}))
    return rows


def table(rows, task, baseline=None):
    """The comparison (restarts.summarize) of finished runs, with the best-epoch and
    train − dev gap columns of each row's runs."""
    m = task.main_metric
    collected = restarts.collect(
        [{"label": name, "runs": {s: c.output_dir for s, c in runs.items()}}
         for name, runs in rows], m, task.kind, task.dev_splits[0])
    return restarts.summarize(collected, m, baseline)


def main(argv):
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    registry = plugins.registry()
    task = registry.task(FLAGS.task)
    head = FLAGS.head or task.default_head
    base = RunConfig.from_flags(FLAGS, kb_main.head_options(FLAGS, head))
    seeds = restarts.parse_seeds(FLAGS.seeds, base.seed)
    rows = plan(base, task, seeds)
    restarts.baseline_label([name for name, _ in rows], FLAGS.baseline)  # checked first
    restarts.run_all([c for _, runs in rows for c in runs.values()],
                     lambda c: run_lib.execute(c, registry), tool="compare_strategies")
    summary = table(rows, task, FLAGS.baseline)
    stack = rows[2][1][seeds[0]]  # both phases: the budget of each
    header = (f"### {task.name}, head {head}: three strategies over seeds "
              f"{', '.join(map(str, seeds))}\n\n"
              f"Data {stack.data_dir or 'bundled sample'}"
              f" (max_train_examples {stack.max_train_examples}); frozen epochs "
              f"{stack.frozen_epochs:g} (lr {stack.frozen_learning_rate:g}), fine-tune epochs "
              f"{stack.num_train_epochs:g} (lr {stack.learning_rate:g}).\n\n")
    text = header + restarts.markdown(summary, row_header="strategy")
    restarts.write_outputs(base.output_dir, "comparison", {task.name: summary}, text,
                           restarts.command_line(), restarts.experiment(stack, seeds))
    from kerasbert.analysis.plots import plot_curves

    curves = {name: run_folder.read_run_history(runs[seeds[0]].output_dir)
              for name, runs in rows}
    plot_curves(curves, os.path.join(base.output_dir, "curves.png"),
                metric="accuracy" if "dev_accuracy" in curves["fine-tune only"][0]
                else task.main_metric, title=f"{task.name}, head {head}, seed {seeds[0]}")
    sys.stdout.write(text)
    return 0


def run():
    kb_main.run_tool(main)


if __name__ == "__main__":
    run()
