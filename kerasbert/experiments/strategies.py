"""Fine-tune only vs frozen only vs stack-and-finetune (Wang et al. 2019) on one task/head,
over seeds; with --strategies=all also LoRA, stack-and-LoRA and BitFit.

    python -m kerasbert.experiments strategies --task=mrpc --head=bimpm \
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

--strategies picks the rows: paper (default: the three above), all, or names from
fine_tune, frozen, stack_and_finetune, fine_tune_same_steps (fine-tune only for
--frozen_epochs + --num_train_epochs: stack-and-finetune's number of steps),
fine_tune_head_lr (the same, with the head at --head_learning_rate, default
--frozen_learning_rate: the head's rate of the frozen phase without the frozen phase),
lora, stack_and_lora, bitfit. The parameter-efficient
rows fine-tune with --peft_learning_rate (LoRA and BitFit want a larger rate than full
fine-tuning) and --lora_rank (default 8), --lora_alpha, --lora_targets. Every row also
shows how many parameters its runs train (the fine-tune phase's count, else the frozen
phase's), the training wall time per optimizer step of that phase (mean over seeds,
tracing included; history.csv) and the process's peak resident memory during the run (the
highest of its phases, each phase's high-water mark reset at its start; mean over seeds;
each run has a process of its own), so the dev metric can be read against the cost.

The row labels are this module's constants (FINE_TUNE, FROZEN, STACK, SAME_STEPS, HEAD_LR,
LORA, STACK_LORA, BITFIT): the findings report reads the tables by them. Importing this
module loads no TensorFlow.
"""

import os

from kerasbert import restarts, run_folder
from kerasbert.errors import InputError
from kerasbert.experiments import runner

# The rows' labels, as comparison.json and comparison.md name them.
FINE_TUNE = "fine-tune only"
FROZEN = "frozen only"
STACK = "stack-and-finetune"
# Fine-tunes for --frozen_epochs + --num_train_epochs: stack-and-finetune's total steps,
# so that its lead over fine-tune only is not just its extra (frozen) steps.
SAME_STEPS = "fine-tune only, same steps"
# The same steps, the head at a rate of its own (as in the frozen phase) from the start:
# is a head's larger rate, rather than the frozen phase, what stack-and-finetune adds?
HEAD_LR = "fine-tune only, head lr"
LORA = "LoRA"
STACK_LORA = "stack-and-LoRA"
BITFIT = "BitFit"

SLUGS = {"fine_tune": FINE_TUNE, "frozen": FROZEN,  # --strategies names
         "stack_and_finetune": STACK, "fine_tune_same_steps": SAME_STEPS,
         "fine_tune_head_lr": HEAD_LR, "lora": LORA, "stack_and_lora": STACK_LORA,
         "bitfit": BITFIT}
# name -> (uses the frozen phase, uses the fine-tuning phase, what fine-tuning trains)
STRATEGIES = {
    FINE_TUNE: (False, True, "all"),
    FROZEN: (True, False, "all"),
    STACK: (True, True, "all"),
    SAME_STEPS: (False, True, "all"),
    HEAD_LR: (False, True, "all"),
    LORA: (False, True, "lora"),
    STACK_LORA: (True, True, "lora"),
    BITFIT: (False, True, "bitfit"),
}
PAPER = (FINE_TUNE, FROZEN, STACK)
DEFAULT_LORA_RANK = 8


def define_flags(flag_values):
    """--strategies and --peft_learning_rate, beside kerasbert.main's flags."""
    from absl import flags

    if "strategies" in flag_values:  # run twice in one process: defined once
        return
    flags.DEFINE_list("strategies", ["paper"], "The rows: paper (fine-tune only, frozen "
                      "only, stack-and-finetune), all (those, LoRA, stack-and-LoRA and "
                      "BitFit), or names from " + ", ".join(SLUGS) + ".",
                      flag_values=flag_values)
    flags.DEFINE_float("peft_learning_rate", 5e-4, "The fine-tune phase's peak learning rate "
                       "in the LoRA, stack-and-LoRA and BitFit rows.", flag_values=flag_values)


def chosen_strategies(values):
    """--strategies → strategy names in table order; one clear line for an unknown one."""
    values = [v.strip() for v in values or ["paper"] if v.strip()]
    wanted = set()
    for value in values:
        if value == "paper":
            wanted.update(PAPER)
        elif value == "all":
            wanted.update(STRATEGIES)
        elif value in SLUGS:
            wanted.add(SLUGS[value])
        else:
            raise InputError(f"--strategies={','.join(values)}: unknown strategy {value!r}; "
                             f"choose paper, all or from {', '.join(SLUGS)}")
    return [name for name in STRATEGIES if name in wanted]


def plan(base, task, seeds, strategies=PAPER, peft_learning_rate=5e-4):
    """[(strategy, {seed: run config})], every config resolved (the task's recipe)."""
    frozen_epochs = base.frozen_epochs or 2.0
    finetune_epochs = base.num_train_epochs if base.num_train_epochs is not None else 2.0
    rows = []
    for name in strategies:
        frozen, finetune, trains = STRATEGIES[name]
        folder = os.path.join(base.output_dir, name.replace(",", "").replace(" ", "_"))
        peft = {}  # plain fine-tuning: LoRA and BitFit off, whatever the base config says
        if trains == "lora":
            peft = dict(lora_rank=base.lora_rank or DEFAULT_LORA_RANK,
                        learning_rate=peft_learning_rate)
        elif trains == "bitfit":
            peft = dict(trainable_encoder="bitfit", learning_rate=peft_learning_rate)
        plain = dict(lora_rank=0, lora_alpha=None, lora_targets="query_value",
                     trainable_encoder="all")
        settings = {**plain, **({k: getattr(base, k) for k in ("lora_alpha", "lora_targets")}
                                if trains == "lora" else {}), **peft}
        rows.append((name, runner.seed_runs(
            base, task, folder, seeds, frozen_epochs=frozen_epochs if frozen else 0.0,
            num_train_epochs=(frozen_epochs + finetune_epochs if name in (SAME_STEPS, HEAD_LR)
                              else finetune_epochs if finetune else 0.0),
            head_learning_rate=(base.head_learning_rate or base.frozen_learning_rate
                                if name == HEAD_LR else
                                base.head_learning_rate if finetune else None),
            **settings)))
    return rows


def cost_of_run(run_dir):
    """(trained parameters, training seconds per optimizer step, peak resident MiB) of a
    finished run: the first two of its last phase, the peak over all its phases (each
    phase's own, history.csv's peak_rss_mb); None where history.csv does not say (older
    runs, no procfs)."""
    history = run_folder.read_run_history(run_dir)
    if not history or "trained_parameters" not in history[-1]:
        return None, None, None
    last = history[-1]["phase"]
    seconds = steps = 0.0
    previous_seconds, previous_step = 0.0, 0
    for row in history:
        took = float(row["seconds"]) - previous_seconds - float(row.get("eval_seconds") or 0)
        if row["phase"] == last and took >= 0:  # a resumed run's clock starts again: skip
            seconds += took
            steps += int(row["step"]) - previous_step
        previous_seconds, previous_step = float(row["seconds"]), int(row["step"])
    peaks = [float(row["peak_rss_mb"]) for row in history if row.get("peak_rss_mb")]
    return (int(history[-1]["trained_parameters"]), (seconds / steps if steps else None),
            max(peaks) if peaks else None)


def costs(rows):
    """{strategy: {"trained_parameters", "step_seconds", "peak_rss_mb"}} over each row's
    finished runs (the means over seeds of the last two)."""
    found = {}
    for name, runs in rows:
        measured = [cost_of_run(c.output_dir) for c in runs.values()
                    if run_folder.read_metrics(c.output_dir)]
        counts = {n for n, _, _ in measured if n is not None}
        times = [t for _, t, _ in measured if t is not None]
        peaks = [m for _, _, m in measured if m is not None]
        found[name] = {"trained_parameters": counts.pop() if len(counts) == 1 else None,
                       "step_seconds": sum(times) / len(times) if times else None,
                       "peak_rss_mb": sum(peaks) / len(peaks) if peaks else None}
    return found


def cost_columns(found):
    """The (header, {label: cell}) columns restarts.markdown adds after the label."""
    def cells(key, form):
        return {k: form.format(v[key]) if v[key] is not None else "–" for k, v in found.items()}

    return [("trained params", cells("trained_parameters", "{:,}")),
            ("s/step", cells("step_seconds", "{:.3f}")),
            ("peak RSS MB", cells("peak_rss_mb", "{:.0f}"))]


def table(rows, task, baseline=None):
    """The comparison (restarts.summarize) of finished runs, each row with its trained
    parameters and seconds per step (`costs`)."""
    summary = runner.summarize(rows, task.main_metric, task, task.dev_splits[0], baseline)
    found = costs(rows)
    for row in summary["rows"]:
        row.update(found[row["label"]])
    return summary


def budget_run(rows, seed):
    """The run that says the budget: the first with both phases, else the first."""
    both = [runs for name, runs in rows if STRATEGIES[name][:2] == (True, True)]
    return (both[0] if both else rows[0][1])[seed]


def head_rates(rows, seed):
    """{row: its head's own learning rate}, for the rows whose fine-tuning gives it one."""
    return {name: runs[seed].head_learning_rate for name, runs in rows
            if runs[seed].head_learning_rate is not None}


def budget_line(rows, seed):
    """The table's line on data, epochs and learning rates: the full fine-tuning rate from a
    row that fine-tunes everything, the parameter-efficient rows' own after it (a
    stack-and-LoRA row fine-tunes at --peft_learning_rate)."""
    stack = budget_run(rows, seed)
    by_name = dict(rows)
    full = [n for n, _ in rows if STRATEGIES[n][1] and STRATEGIES[n][2] == "all"]
    full_lr = f" (lr {by_name[full[0]][seed].learning_rate:g})" if full else ""
    peft = [n for n, _ in rows if STRATEGIES[n][2] != "all"]
    peft_note = ""
    if peft:
        first = by_name[peft[0]][seed]
        lora = next((by_name[n][seed] for n in peft if STRATEGIES[n][2] == "lora"), None)
        peft_note = (f" {', '.join(peft)}: fine-tune lr {first.learning_rate:g}"
                     + (f", LoRA rank {lora.lora_rank}, alpha "
                        f"{lora.lora_alpha if lora.lora_alpha is not None else lora.lora_rank:g}"
                        f", targets {lora.lora_targets}" if lora else "") + ".")
    by_rate = {}
    for name, rate in head_rates(rows, seed).items():
        by_rate.setdefault(rate, []).append(name)
    head_note = "".join(f" Head lr {rate:g} in: {', '.join(names)}."
                        for rate, names in by_rate.items())
    return (f"Data {stack.data_dir or 'bundled sample'}"
            f" (max_train_examples {stack.max_train_examples}); frozen epochs "
            f"{stack.frozen_epochs:g} (lr {stack.frozen_learning_rate:g}), fine-tune epochs "
            f"{stack.num_train_epochs:g}{full_lr}.{peft_note}{head_note}")


def curve_metric(task, history_row):
    """The dev metric the curves show: the one the table reports (entity F1 for NER, not
    its token accuracy) where the history has it, else accuracy."""
    return task.main_metric if f"dev_{task.main_metric}" in history_row else "accuracy"


def main(argv):
    from kerasbert.main import FLAGS

    runner.no_arguments(argv)
    task, base, seeds = runner.from_flags(FLAGS)
    head = base.head or task.default_head
    rows = plan(base, task, seeds, chosen_strategies(FLAGS.strategies),
                FLAGS.peft_learning_rate)
    runner.run_rows(rows, "compare_strategies", FLAGS.baseline)
    summary = table(rows, task, FLAGS.baseline)
    stack = budget_run(rows, seeds[0])
    header = (f"### {task.name}, head {head}: {len(rows)} strategies over seeds "
              f"{', '.join(map(str, seeds))}\n\n{budget_line(rows, seeds[0])}\n\n")
    text = header + restarts.markdown(summary, row_header="strategy",
                                      extra=cost_columns(
                                          {row["label"]: row for row in summary["rows"]}))
    own_rates = head_rates(rows, seeds[0])
    runner.publish(base.output_dir, "comparison", {task.name: summary}, text,
                   restarts.experiment(stack, seeds, **({"head_learning_rate": own_rates}
                                                        if own_rates else {})))
    from kerasbert.analysis.plots import plot_curves

    curves = {name: run_folder.read_run_history(runs[seeds[0]].output_dir)
              for name, runs in rows}
    plot_curves(curves, os.path.join(base.output_dir, "curves.png"),
                metric=curve_metric(task, next(iter(curves.values()))[0]),
                title=f"{task.name}, head {head}, seed {seeds[0]}")
    return 0


run = runner.command(main, define_flags)
