"""BERT's Table 5 (effect of the pre-training tasks) at a size a CPU can run.

    python -m kerasbert.experiments pretraining_ablation --work_dir=runs/ablation \
        --glue_dir=../shared/data/glue --tasks=sst2,mrpc --max_train_examples=2000

1. corpus: --corpus (one sentence per line, blank line between documents), by default
   generated from the Python documentation bundled with CPython
   (make_pretraining_corpus.py in the checkout's tools/; PSF licence);
2. one WordPiece vocabulary learned from it, and two data sets with the same settings:
   NSP pairs (50% random B) for `bert`, contiguous text for `no_nsp` and `ltr`;
3. pre-trains `bert`, `no_nsp` and `ltr` encoders with the same size, steps, batch and
   learning rate (`kerasbert.pretraining.train`);
4. fine-tunes each on every task with the same recipe (`kerasbert.run.execute`):
   BERT and No NSP with BERT's [CLS] classifier, LTR & No NSP with the last-token
   classifier (a causal encoder's [CLS] sees nothing else), and LTR & No NSP + BiLSTM
   with the `top_bilstm` head on the same LTR encoder; plus a row with no pre-training
   (a random encoder of the same size) as the floor. --variants picks the rows; only
   their objectives are pre-trained, and only the data sets those need are made.
   --head replaces the [CLS] classifier of the MLM + NSP, No NSP and random rows (e.g.
   mean_pool); --protocol=feature_based freezes every encoder and trains only the head
   (BERT §5.3's feature-based approach: what the pre-training put into the features,
   with no fine-tuning to make up for it), its runs in feature_based/ beside finetune/;
5. repeats every fine-tuning over --seeds (default --seed; the pre-training runs once per
   objective, with --seed) and over the grid of --finetune_learning_rate and
   --finetune_epochs (one value or several each) into
   finetune/<objective>-<head>-<task>/lr-<lr>/seed-<n>/ (lr-<lr>-epochs-<n>/ when
   --finetune_epochs has several values), reusing finished runs (one made with other
   settings is refused, naming the setting, before anything trains). With more than one
   setting in the grid each row reports, per task, the one with the best mean dev metric
   over the seeds: BERT's protocol (learning rate and epochs picked on dev), which favours
   every row alike; results.json keeps every setting's values;
6. writes table.md (rows = variants, columns = tasks + held-out LM metrics, each cell the
   mean ± sample std over seeds; then per task the restarts table: n, mean ± std, min–max,
   a 95% interval and the paired difference to --baseline, default the first variant,
   kerasbert/restarts.py) and results.json (with "tables": one restarts table per task)
   into --work_dir.

--snapshot_steps=8000,16000 also keeps each encoder as it was after those steps
(pretrained_<objective>/step-<N>/, with its own held-out metrics): to fine-tune one, link it
as pretrained_<objective> in a new --work_dir beside a copy of vocab.txt (no pre-training
data is made for a finished encoder). An encoder continued from another one
(`kerasbert.pretrain --init_checkpoint=<earlier output>`) linked in the same way counts both
runs' steps (results.json: pretraining_steps, and pretraining_runs, e.g. [10000, 20000]).

Every model size, step count and data size is a flag, so the same command runs a
real-sized ablation on GPUs (add --mixed_precision / --distribution_strategy). Unlike the
other experiments its flags are its own (declared argparse-style, parsed as absl flags
like every command's), not kerasbert.main's, and its fine-tuning runs share this process.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

from kerasbert import restarts, run_folder
from kerasbert import command
from kerasbert.errors import InputError

# The checkout's tools/ (the corpus generator is a script beside the package, not in it).
TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools")
GLUE_FOLDERS = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "stsb": "STS-B", "cola": "CoLA",
                "qnli": "QNLI", "mnli": "MNLI", "qqp": "QQP"}
# --variants key: (row label, pre-training objective or None, fine-tuning head or None
# for the task's own)
VARIANTS = {"bert": ("BERT (MLM + NSP)", "bert", None),
            "no_nsp": ("No NSP", "no_nsp", None),
            "ltr": ("LTR & No NSP", "ltr", "last_token"),
            "ltr_bilstm": ("+ BiLSTM", "ltr", "top_bilstm"),
            "random": ("No pre-training (random init)", None, None)}
PROTOCOLS = ("fine_tune", "feature_based")


def parser(argv):
    """The options (argv[0]: the program's name), parsed as absl flags (command.py)."""
    p = argparse.ArgumentParser(prog=argv[0], description=__doc__.splitlines()[0])
    p.add_argument("--work_dir", required=True)
    p.add_argument("--corpus", default=None, help="Default: generated from the Python docs.")
    p.add_argument("--vocab_size", type=int, default=4000)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--dupe_factor", type=int, default=5)
    p.add_argument("--model_size", default="2/128/2")
    p.add_argument("--num_train_steps", type=int, default=400)
    p.add_argument("--num_warmup_steps", type=int, default=40)
    p.add_argument("--train_batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--mixed_precision", default=None)
    p.add_argument("--snapshot_steps", default="", help="e.g. 8000,16000: also keep the "
                   "encoders after these steps (pretrained_<objective>/step-<N>/)")
    p.add_argument("--distribution_strategy", default="one_device")
    p.add_argument("--tasks", default="sst2,mrpc")
    p.add_argument("--glue_dir", default=None, help="Folder with SST-2/, MRPC/, ...; "
                   "default: the bundled samples.")
    p.add_argument("--max_train_examples", type=int, default=None)
    p.add_argument("--max_eval_examples", type=int, default=None)
    p.add_argument("--finetune_learning_rate", default="1e-4", help="one learning rate, "
                   "or several (comma-separated): each row then takes, per task, the one "
                   "with the best mean dev metric over --seeds")
    p.add_argument("--finetune_epochs", default="3", help="one number of epochs, or several "
                   "(comma-separated), crossed with --finetune_learning_rate")
    p.add_argument("--finetune_batch_size", type=int, default=32)
    p.add_argument("--finetune_max_seq_length", type=int, default=128)
    p.add_argument("--seed", type=int, default=1, help="pre-training seed (and the "
                   "fine-tuning seed without --seeds)")
    p.add_argument("--seeds", default=None, help="fine-tuning seeds, e.g. 1,2,3 (default: --seed)")
    p.add_argument("--variants", default=",".join(VARIANTS), help="the rows, a subset of "
                   f"{','.join(VARIANTS)}: only their objectives are pre-trained (e.g. "
                   "bert,random for a long pre-training of one objective)")
    p.add_argument("--protocol", default="fine_tune", choices=PROTOCOLS, help="fine_tune: "
                   "train encoder and head (Table 5's protocol); feature_based: the encoder "
                   "frozen, only the head trained, for the setting's epochs at its rate (BERT "
                   "§5.3's feature-based approach; runs go to feature_based/, not finetune/)")
    p.add_argument("--head", default=None, help="the head of the rows that use the task's own "
                   "(MLM + NSP, No NSP, no pre-training), e.g. mean_pool; the LTR rows keep "
                   "theirs (a causal encoder's [CLS] sees nothing else)")
    p.add_argument("--baseline", default=None, help="the variant the others are compared "
                   "with, paired over seeds (default: the first, BERT (MLM + NSP))")
    return p


def parse_args(argv=None):
    """The flags of argv (argv[0]: the program's name; default sys.argv)."""
    argv = sys.argv if argv is None else argv
    return command.parse_with_flags(parser(argv), argv)


def make_data(args, timings, objectives):
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.pretraining import data

    corpus = args.corpus
    if corpus is None:
        corpus = os.path.join(args.work_dir, "corpus.txt")
        if not os.path.exists(corpus):
            subprocess.run([sys.executable, corpus_script(), f"--output={corpus}"], check=True)
    vocab = os.path.join(args.work_dir, "vocab.txt")
    start = time.perf_counter()
    if not os.path.exists(vocab):
        data.learn_vocab([corpus], args.vocab_size, True, vocab)
    tokenizer = WordPieceTokenizer(vocab, do_lower_case=True)
    files = {}
    needed = [(name, nsp) for name, nsp, users in (("nsp", 0.5, {"bert"}),
                                                   ("contiguous", 0.0, {"no_nsp", "ltr"}))
              if users & set(objectives)]
    for name, nsp in needed:
        folder = os.path.join(args.work_dir, f"data_{name}")
        if not os.path.exists(os.path.join(folder, data.DATA_CONFIG)):
            options = data.DataOptions(
                max_seq_length=args.max_seq_length,
                max_predictions_per_seq=args.max_predictions_per_seq,
                dupe_factor=args.dupe_factor, next_sentence_prob=nsp, seed=args.seed)
            data.create_pretraining_data([corpus], folder, tokenizer, options)
        files[name] = os.path.join(folder, "train-*")
    timings["data_seconds"] = round(time.perf_counter() - start, 1)
    return files


def corpus_script():
    """tools/samples/make_pretraining_corpus.py (tools/ before the sample generators had a
    folder of their own)."""
    for path in (os.path.join(TOOLS, "samples", "make_pretraining_corpus.py"),
                 os.path.join(TOOLS, "make_pretraining_corpus.py")):
        if os.path.exists(path):
            return path
    raise InputError("--corpus: no corpus given, and tools/samples/make_pretraining_corpus.py "
                     "(which makes the default one) is not in this checkout")


def pretrained_folder(args, objective):
    return os.path.join(args.work_dir, f"pretrained_{objective}")


def unfinished(args, objectives):
    """The objectives still to pre-train: a finished (or linked) encoder needs no data."""
    return [o for o in objectives if not run_folder.is_finished(pretrained_folder(args, o))]


def pretrain(args, files, objective):
    from kerasbert.pretraining.train import PretrainConfig, run_pretraining

    out = pretrained_folder(args, objective)
    if run_folder.is_finished(out):
        return run_folder.read_metrics(out), out
    config = PretrainConfig(
        input_file=files["nsp" if objective == "bert" else "contiguous"], output_dir=out,
        objective=objective, model_size=args.model_size, train_batch_size=args.train_batch_size,
        num_train_steps=args.num_train_steps, num_warmup_steps=args.num_warmup_steps,
        learning_rate=args.learning_rate, seed=args.seed, max_eval_steps=50,
        max_position=max(args.max_seq_length, args.finetune_max_seq_length),
        mixed_precision=args.mixed_precision, distribution_strategy=args.distribution_strategy,
        snapshot_steps=snapshot_steps(args))
    return run_pretraining(config, show_progress=False), out


def snapshot_steps(args):
    """--snapshot_steps as whole steps inside the pre-training, checked before anything runs."""
    steps = tuple(restarts.parse_seeds(args.snapshot_steps, 0, flag="--snapshot_steps")
                  ) if args.snapshot_steps else ()
    for step in steps:
        if not 0 < step < args.num_train_steps:
            raise InputError(f"--snapshot_steps: {step} is not a step before the last "
                             f"(1 to {args.num_train_steps - 1})")
    return steps


def finetune_config(args, task, encoder, head, out, seed, setting):
    """The run config of one fine-tuning, resolved (the task's recipe filled in) so that a
    finished folder can be checked against it before anything trains."""
    from kerasbert import plugins
    from kerasbert.config import RunConfig

    values = {
        "task": task, "output_dir": out, "overwrite_output_dir": False,
        "init_checkpoint": encoder or "random", "model_size": args.model_size,
        "vocab_file": os.path.join(args.work_dir, "vocab.txt") if encoder is None else None,
        "do_lower_case": True if encoder is None else None,
        "data_dir": os.path.join(args.glue_dir, GLUE_FOLDERS[task]) if args.glue_dir else None,
        "max_train_examples": args.max_train_examples, "max_eval_examples": args.max_eval_examples,
        "max_seq_length": args.finetune_max_seq_length, "train_batch_size": args.finetune_batch_size,
        "learning_rate": setting.learning_rate, "num_train_epochs": setting.epochs,
        "seed": seed, "distribution_strategy": args.distribution_strategy}
    if args.protocol == "feature_based":  # the frozen phase alone: only the head trains
        values.update(frozen_epochs=setting.epochs, frozen_learning_rate=setting.learning_rate,
                      num_train_epochs=0.0)
    if head:
        values["head"] = head
    return RunConfig(**values).resolved(plugins.registry().task(task))


class Setting(NamedTuple):
    """One point of the fine-tuning grid."""
    learning_rate: float
    epochs: float


def parse_grid(rates_spec, epochs_spec):
    """--finetune_learning_rate × --finetune_epochs: the settings, learning rate first,
    each list positive numbers, distinct, in the order given."""
    grid = []
    for flag, spec, what in (("--finetune_learning_rate", rates_spec, "learning rate"),
                             ("--finetune_epochs", epochs_spec, "number of epochs")):
        grid.append(restarts.parse_positive_numbers(spec, flag=flag))
        if not grid[-1]:
            raise InputError(f"{flag}: give at least one {what}")
    rates, epochs = grid
    return [Setting(lr, e) for lr in rates for e in epochs]


def axis(settings, field):
    """The distinct values of one field ("learning_rate" or "epochs") over the grid, in order."""
    return list(dict.fromkeys(getattr(s, field) for s in settings))


def setting_folder(setting, settings):
    """lr-<lr>, with -epochs-<n> only when the grid has several epoch counts (so a folder
    made with one epoch count is reused by a rerun with the same flags)."""
    several = len(axis(settings, "epochs")) > 1
    return f"lr-{setting.learning_rate:g}" + (f"-epochs-{setting.epochs:g}" if several else "")


def setting_label(setting, settings):
    """How the table names a chosen setting: only the parts that vary in the grid."""
    parts = []
    if len(axis(settings, "learning_rate")) > 1:
        parts.append(f"lr {setting.learning_rate:g}")
    if len(axis(settings, "epochs")) > 1:
        parts.append(f"{setting.epochs:g} epochs")
    return ", ".join(parts)


def plan(args, variants, tasks, seeds, settings):
    """{(row label, task): {Setting: {seed: run config}}} of every fine-tuning, in the
    table's order; a pre-trained row's encoder is the folder pretrain() writes."""
    planned = {}
    runs_folder = "finetune" if args.protocol == "fine_tune" else "feature_based"
    for label, objective, head in variants:
        encoder = pretrained_folder(args, objective) if objective else None
        for task in tasks:
            folder = os.path.join(args.work_dir, runs_folder,
                                  f"{objective or 'random'}-{head or 'default'}-{task}")
            planned[label, task] = {setting: {seed: finetune_config(
                args, task, encoder, head, restarts.seed_folder(
                    os.path.join(folder, setting_folder(setting, settings)), seed),
                seed, setting) for seed in seeds} for setting in settings}
    return planned


def choose_setting(by_setting):
    """The setting whose finished runs have the best (highest) mean, from {setting:
    [metric value, or None for a run that did not finish]}; the first on a tie, None
    when no run finished. Every metric the ablation reports is higher-is-better."""
    best, best_mean = None, None
    for setting, values in by_setting.items():
        finished = [v for v in values if v is not None]
        if finished:
            mean = sum(finished) / len(finished)
            if best_mean is None or mean > best_mean:
                best, best_mean = setting, mean
    return best


def main_metric(metrics):
    for key in ("accuracy", "pearson", "matthews_corr", "f1"):
        if key in metrics:
            return key, metrics[key]
    key = min(metrics)
    return key, metrics[key]


def _cell(values):
    if not values:
        return "–"
    mean = 100 * sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.1f}"
    std = 100 * statistics.stdev(values)
    return f"{mean:.1f} ± {std:.1f}"


def _task_cell(result):
    """mean ± std, and the chosen setting where there was a choice."""
    chosen = result.get("setting")
    return _cell(result["values"]) + (f" ({chosen})" if chosen else "")


def table(results, tasks):
    metric_names = {t: results[0]["tasks"][t]["metric"] for t in tasks}
    head = ["Pre-training tasks"] + [f"{t.upper()} ({metric_names[t]})" for t in tasks] + [
        "held-out MLM acc.", "held-out LM ppl.", "held-out NSP acc."]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in results:
        p = row["pretraining"] or {}
        mlm = p.get("heldout_mlm_accuracy")
        ppl = p.get("heldout_mlm_perplexity", p.get("heldout_lm_perplexity"))
        nsp = p.get("heldout_nsp_accuracy")
        cells = [row["variant"]] + [_task_cell(row["tasks"][t]) for t in tasks] + [
            "–" if mlm is None else f"{100 * mlm:.1f}",
            "–" if ppl is None else (f"{ppl:.1f} ({'LTR' if 'heldout_lm_perplexity' in p else 'MLM'})"),
            "–" if nsp is None else f"{100 * nsp:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run(argv):
    """The ablation (argv[0]: the program's name); returns the exit status. Bad input is one
    line, `kerasbert: error: ...`, exit 2, before anything is made or trained."""
    return command.run_parser(parser(argv), main, argv)


def main(args):
    seeds = restarts.parse_seeds(args.seeds, args.seed)
    variants = chosen_variants(args.variants, args.head)
    settings = parse_grid(args.finetune_learning_rate, args.finetune_epochs)
    restarts.baseline_label([label for label, _, _ in variants], args.baseline)
    snapshot_steps(args)
    tasks = [t for t in args.tasks.split(",") if t]
    check_head(args.head, tasks)
    os.makedirs(args.work_dir, exist_ok=True)
    timings = {}
    objectives = list(dict.fromkeys(o for _, o, _ in variants if o))
    # the vocabulary is always made (the random row's configs name it); data only for
    # the objectives not yet pre-trained
    files = make_data(args, timings, unfinished(args, objectives))
    planned = plan(args, variants, tasks, seeds, settings)
    configs = [c for by_setting in planned.values() for runs in by_setting.values()
               for c in runs.values()]
    restarts.check_reusable(configs)
    pretrained = {}
    for objective in objectives:
        pretrained[objective] = pretrain(args, files, objective)
        print(f"ablation: pre-trained {objective}: {pretrained[objective][0]}", flush=True)
    from kerasbert.pretraining.train import pretraining_runs
    from kerasbert.run import execute

    restarts.run_all(configs, execute, tool="ablation")
    results = []
    for label, objective, head in variants:
        row = {"variant": label, "objective": objective, "head": head,
               "pretraining": pretrained[objective][0] if objective else None,
               "pretraining_runs": pretraining_runs(pretrained[objective][1]) if objective
               else [], "tasks": {}}
        for task in tasks:
            result = row["tasks"][task] = task_result(planned[label, task])
            for seed, value in zip(seeds, result["values"]):
                print(f"ablation: {label} {task} seed {seed} (lr {result['learning_rate']:g}, "
                      f"{result['epochs']:g} epochs): {result['metric']}={value:.4f}", flush=True)
        results.append(row)
    tables = restarts_tables(results, tasks, args.baseline)
    markdown = protocol_line(args) + table(results, tasks) + "".join(
        f"\n#### {task.upper()}\n\n" + restarts.markdown(tables[task], row_header="variant")
        for task in tasks)
    from kerasbert.io_utils import atomic_write_json, atomic_write_text

    atomic_write_text(os.path.join(args.work_dir, "table.md"), markdown)
    rates, epochs = axis(settings, "learning_rate"), axis(settings, "epochs")
    selection = {"finetune_learning_rate": rates[0] if len(rates) == 1 else rates,
                 "finetune_epochs": epochs[0] if len(epochs) == 1 else epochs}
    if len(settings) > 1:
        selection["finetune_setting"] = "best mean dev metric per row and task"
    atomic_write_json(os.path.join(args.work_dir, "results.json"), {
        "args": vars(args), "timings": timings, "rows": results, "tables": tables,
        "command": restarts.command_line(), "measured_on": restarts.measured_on(),
        "experiment": {"tasks": tasks, "glue_dir": args.glue_dir, "seeds": seeds,
                       "corpus": args.corpus or "Python documentation (PSF licence)",
                       "model_size": args.model_size,
                       **pretraining_budget(results, args),
                       "pretraining_batch_size": args.train_batch_size,
                       "max_train_examples": args.max_train_examples,
                       "protocol": args.protocol, "head": args.head, **selection}})
    sys.stdout.write(markdown)
    return 0


def pretraining_budget(results, args):
    """The steps the rows' encoders were pre-trained for, as their own folders say (a
    --snapshot_steps folder linked in is fewer than --num_train_steps; an encoder continued
    from another one counts both runs: pretraining_runs, e.g. [10000, 20000])."""
    budgets = {tuple(row.get("pretraining_runs") or ()) for row in results
               if row.get("objective")} - {()}
    if len(budgets) != 1:
        return {"pretraining_steps": args.num_train_steps}
    runs = budgets.pop()
    return {"pretraining_steps": sum(runs), **({"pretraining_runs": list(runs)}
                                               if len(runs) > 1 else {})}


def task_result(by_setting):
    """One row's cell for one task, from {Setting: {seed: finished run config}}: the
    chosen setting's runs and values, and every setting's values ("by_setting", keyed
    "lr=<lr> epochs=<n>")."""
    metric, values = None, {}
    for setting, runs in by_setting.items():
        values[setting] = []
        for config in runs.values():
            metrics = run_folder.read_metrics(config.output_dir)
            if not metrics:  # run_all finishes or refuses every run first: a folder changed
                raise InputError(f"{config.output_dir}: no metrics.json, the run did not "
                                 "finish; run the command again to resume it")
            metric, value = main_metric(metrics)
            values[setting].append(value)
    chosen = choose_setting(values)
    return {"metric": metric, "learning_rate": chosen.learning_rate, "epochs": chosen.epochs,
            "setting": setting_label(chosen, list(by_setting)), "values": values[chosen],
            "seeds": list(by_setting[chosen]),
            "runs": {seed: c.output_dir for seed, c in by_setting[chosen].items()},
            "by_setting": {f"lr={s.learning_rate:g} epochs={s.epochs:g}": v
                           for s, v in values.items()}}


def protocol_line(args):
    """What table.md says first when its runs are not Table 5's (fine-tuned, task's head)."""
    if args.protocol == "fine_tune" and args.head is None:
        return ""
    how = ("feature-based: each encoder frozen, only the head trained"
           if args.protocol == "feature_based" else "fine-tuned")
    head = args.head or "the task's own"
    return f"Protocol: {how}; head {head} (LTR rows: theirs).\n\n"


def check_head(head, tasks):
    """--head names a registered head that serves every task's kind (before any corpus,
    vocabulary or training)."""
    if head is None:
        return
    from kerasbert import plugins
    from kerasbert.model.builder import check_head_fits

    registry = plugins.registry()
    for task in tasks:
        check_head_fits(registry.task(task, flag="--tasks"), registry.head(head), "--tasks")


def chosen_variants(spec, head=None):
    """The --variants rows, in the table's order: [(label, objective, head)], `head`
    (--head) in place of the task's own (None), LTR rows keeping theirs."""
    keys = [k.strip() for k in spec.split(",") if k.strip()]
    unknown = [k for k in keys if k not in VARIANTS]
    if unknown or not keys:
        what = f"unknown {', '.join(unknown)}" if unknown else "no variant"
        raise InputError(f"--variants={spec}: {what} (choose from {','.join(VARIANTS)})")
    return [(label, objective, own or head)
            for key, (label, objective, own) in VARIANTS.items() if key in keys]


def restarts_tables(results, tasks, baseline=None):
    """Per task, the restarts table of the variants (kerasbert/restarts.py)."""
    tables = {}
    for task in tasks:
        metric = results[0]["tasks"][task]["metric"]
        rows = [{"label": r["variant"], "runs": r["tasks"][task]["runs"]} for r in results]
        tables[task] = restarts.summarize(restarts.collect(rows, metric), metric, baseline)
    return tables
