"""The speed and memory table of issue #57 in one command: every row against HuggingFace.

    python -m benchmarks.bench_all --data_root=../shared/data \\
        --torch_python=$KERASBERT_TORCH_PYTHON --work_dir=/tmp/bench_all \\
        --json=docs/experiments/bench_all.json
    python -m benchmarks.bench_all --render=README.md --from=docs/experiments/bench_all.json

Runs the existing benchmarks as child processes and reads their JSON (their measuring is
theirs; this module only schedules, collects and compares):

  fine_tune_memory  peak RSS of a whole fine-tuning run, per task (benchmarks.parity: each
                    side's process, wait4's peak), kerasbert ≤ HF
  eval_seconds      evaluation seconds of the same runs (parity), kerasbert ≤ HF
  serving           serving the SST-2, SQuAD and CoNLL runs (benchmarks.bench_serving):
                    peak RSS and start → first answer ≤ HF, batch-1 p50 and p99 ≤ HF,
                    batch-32 texts/s ≥ HF; the SavedModel (lean TensorFlow process) and
                    the LiteRT export (no TensorFlow; float32 and int8 weights) each get
                    these rows
  training_step     one full fine-tuning step at each of --lengths, batch 32
                    (benchmarks.bench_training, kerasbert's graph-mode step): throughput
                    ≥ 1.15 × PyTorch's
  first_step        model loaded → first step done at the longest of --lengths, ≤ 3 s
  reader_memory     holding a generated --reader_megabytes training file in memory and
                    reading one shuffled epoch (benchmarks.bench_reader_memory, epoch_held):
                    peak above the imports ≤ 5 × the file

Every comparison runs --rounds times, the sides alternating (parity alternates its seeds'
order; the others run kerasbert then HF once a round), and each row gives the medians over
rounds, the ratio to HF in each round and their median and min–max, the issue's target and
whether the median meets it ("met" / "short"). Without --torch_python (or
$KERASBERT_TORCH_PYTHON) the HF columns say "not measured", and so does any verdict that
needs them. The host (CPU model, the ISA flags that matter, cores, versions, date) is
recorded with the numbers.

--quick: one round on the bundled samples (SST-2 only), a small model
(--init_checkpoint, e.g. a tiny random HF folder as the tests make), length 32, a 1 MB
reading file: the whole pipeline in a minute or two (tests/test_bench_tools.py).

--render=FILE[,FILE] --from=JSON[,JSON] rewrites the block between `<!-- bench_all:begin -->`
(the full table) or `<!-- bench_all:begin summary -->` (one line per row and server, the
ratios only) and `<!-- bench_all:end -->` in each FILE with the table of the JSON files,
oldest first, each item from the newest that has it (without --from: the "not yet
measured" block); tests/test_bench_all.py checks that README.md's and
docs/experiments/speed-and-memory.md's blocks are the rendering of README_SOURCES.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from benchmarks.processes import (
    TORCH_PYTHON_VARIABLE, add_torch_python_flag, child_env, missing_interpreter,
    module_command)
from kerasbert import host

ROWS = ("fine_tune_memory", "serving", "training_step", "first_step", "reader_memory",
        "eval_seconds")
ROW_TITLES = {
    "fine_tune_memory": "Peak RSS while fine-tuning",
    "serving": "Serving from raw text",
    "training_step": "Training step, batch 32",
    "first_step": "First step after load",
    "reader_memory": "Reading a training file in memory",
    "eval_seconds": "Evaluation seconds",
}
# The parity tasks, their folder under --data_root and the recipe (docs/parity.md's runs).
TASKS = {
    "sst2": ("glue/SST-2", ["--max_train_examples=2000", "--max_seq_length=64",
                            "--num_train_epochs=1", "--learning_rate=5e-5",
                            "--train_batch_size=32"]),
    "mrpc": ("glue/MRPC", ["--max_train_examples=1000", "--max_seq_length=128",
                           "--num_train_epochs=3", "--learning_rate=5e-5",
                           "--train_batch_size=32"]),
    "rte": ("glue/RTE", ["--max_train_examples=2490", "--max_seq_length=128",
                         "--num_train_epochs=2", "--learning_rate=5e-5",
                         "--train_batch_size=32"]),
    "stsb": ("glue/STS-B", ["--max_train_examples=2000", "--max_seq_length=128",
                            "--num_train_epochs=3", "--learning_rate=5e-5",
                            "--train_batch_size=32"]),
    "conll2003": ("conll2003", ["--max_train_examples=2000", "--max_seq_length=128",
                                "--num_train_epochs=2", "--learning_rate=5e-5",
                                "--train_batch_size=32", "--tagging_loss=token_mean"]),
    "squad_v1": ("squad/dev-v1.1-part-a.json", ["--max_train_examples=3000",
                                                "--num_train_epochs=1", "--max_seq_length=192",
                                                "--doc_stride=64", "--learning_rate=1e-4",
                                                "--train_batch_size=16"]),
}
SERVED = ("sst2", "squad_v1", "conll2003")  # bench_serving's three kinds
QUICK_RECIPE = ["--max_train_examples=32", "--max_eval_examples=32", "--max_seq_length=32",
                "--num_train_epochs=1", "--train_batch_size=8"]
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8",
             "amx_tile")
# A page's block: the full table (every item, both sides' medians, the per-round ratios),
# or with "summary" one line per row and server, the ratios only (the README's).
BEGIN, END = "<!-- bench_all:begin -->", "<!-- bench_all:end -->"
SUMMARY_BEGIN = "<!-- bench_all:begin summary -->"
STYLES = {BEGIN: "full", SUMMARY_BEGIN: "summary"}
COMMAND = ("python -m benchmarks.bench_all --data_root=../shared/data "
           "--torch_python=$KERASBERT_TORCH_PYTHON --work_dir=/tmp/bench_all "
           "--json=docs/experiments/bench_all.json")
# The README's table: every measurement kept, each item (a row's task or quantity) from the
# newest one that has it (a later run of some rows or tasks replaces only those items).
README_SOURCES = ("docs/experiments/bench_all.json", "docs/experiments/bench_all-2.json",
                  "docs/experiments/bench_all-3.json", "docs/experiments/bench_all-4.json",
                  "docs/experiments/bench_all-5.json", "docs/experiments/bench_all-6.json",
                  "docs/experiments/bench_all-7.json")
# The pages that show them: the README's summary, the speed page's full table.
RENDER_PAGES = ("README.md", "docs/experiments/speed-and-memory.md")
FULL_TABLE = "docs/experiments/speed-and-memory.md#the-full-table"  # linked from the README
RENDER_COMMAND = ("python -m benchmarks.bench_all --render=" + ",".join(RENDER_PAGES)
                  + " --from=" + ",".join(README_SOURCES))


class BenchError(Exception):
    """A child benchmark failed: its row says so, the others go on."""


# --- The host ------------------------------------------------------------------------------

def cpu_record(cpuinfo_text):
    """{"model", "isa"} from /proc/cpuinfo's text: the first model name and which of
    ISA_FLAGS its first processor lists."""
    found = host.cpu(cpuinfo_text)
    return {"model": found["model"], "isa": {f: f in found["flags"] for f in ISA_FLAGS}}


def host_record(torch_python):
    cpu = cpu_record(host.read_cpuinfo())
    import keras
    import tensorflow as tf

    versions = {"python": platform.python_version(), "tensorflow": tf.__version__,
                "keras": keras.__version__, "torch": "not measured",
                "transformers": "not measured"}
    if torch_python:
        probe = subprocess.run(
            [torch_python, "-c", "import json, torch, transformers; print(json.dumps("
             "{'torch': torch.__version__, 'transformers': transformers.__version__}))"],
            capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            versions.update(json.loads(probe.stdout.strip().splitlines()[-1]))
    return {"cpu": cpu["model"], "isa": cpu["isa"], "cores": os.cpu_count(),
            "affinity": host.usable_cores(),
            "versions": versions,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}


# --- Running the benchmarks ------------------------------------------------------------------

def run_child(module, args, log_dir, label, with_hf=True):
    """Runs benchmarks.<module> with `args`; its output goes to <log_dir>/<label>.log.
    Without `with_hf` the child does not see $KERASBERT_TORCH_PYTHON either."""
    os.makedirs(log_dir, exist_ok=True)
    log = os.path.join(log_dir, f"{label}.log")
    command = module_command(sys.executable, module, *args)
    env = child_env({"TF_CPP_MIN_LOG_LEVEL": "3"})
    if not with_hf:
        env.pop(TORCH_PYTHON_VARIABLE, None)
    print(f"bench_all: {label}: {' '.join(command)}", flush=True)
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                              check=False).returncode
    print(f"bench_all: {label}: exit {code}, {time.perf_counter() - started:.0f} s", flush=True)
    if code != 0:
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = [line.strip() for line in f.readlines()[-3:] if line.strip()]
        raise BenchError(f"{module} exited {code} ({log}: {' | '.join(tail)})")
    return log


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def squad_split(args):
    """The SQuAD train/dev folder: --data_root's dev part split by article (30 articles
    for training, as docs/parity.md's run), made once in --work_dir."""
    folder = os.path.join(args.work_dir, "squad_split")
    if not os.path.isdir(folder):
        command = [sys.executable, "-m", "tools.split_squad",
                   f"--input={os.path.join(args.data_root, TASKS['squad_v1'][0])}",
                   "--train_articles=30", f"--output_dir={folder}"]
        subprocess.run(command, check=True, capture_output=True, env=child_env())
    return folder


def run_parity(args, task, log_dir, with_hf=True):
    """parity.json's runs for `task`, seeds 1..rounds (parity alternates the sides); without
    `with_hf` kerasbert's seed 1 only (the run bench_serving serves)."""
    out = os.path.join(args.work_dir, f"parity-{task}")
    seeds = range(1, args.rounds + 1) if with_hf else [1]
    flags = [f"--task={task}", f"--output_dir={out}",
             f"--seeds={','.join(str(s) for s in seeds)}"]
    if args.quick:
        flags += QUICK_RECIPE
    else:
        data = squad_split(args) if task == "squad_v1" else os.path.join(
            args.data_root, TASKS[task][0])
        flags += [f"--data_dir={data}", *TASKS[task][1]]
    if args.init_checkpoint:
        flags.append(f"--init_checkpoint={args.init_checkpoint}")
    if args.torch_python and with_hf:
        flags.append(f"--torch_python={args.torch_python}")
    if task in args.serve:
        flags.append("--keep_run_files")  # bench_serving exports the seed-1 run
    run_child("parity", flags, log_dir, f"parity-{task}", with_hf)
    return read_json(os.path.join(out, "parity.json"))["runs"]


def run_serving(args, runs, round_index, log_dir):
    work = os.path.join(args.work_dir, f"serving-round-{round_index}")
    flags = [f"--run_dirs={','.join(runs)}", f"--work_dir={work}", "--rounds=1",
             "--tf_servers=lean,litert,litert_int8"]
    if args.quick:
        flags += ["--requests=10", "--warmup=1", "--batch_size=8", "--batches=2",
                  "--max_texts=64"]
    if args.torch_python:
        flags.append(f"--torch_python={args.torch_python}")
    run_child("bench_serving", flags, log_dir, f"serving-round-{round_index}")
    return read_json(os.path.join(work, "serving.json"))["results"]


def run_training(args, length, round_index, log_dir):
    out = os.path.join(args.work_dir, f"training-{length}-round-{round_index}.json")
    flags = [f"--seq_length={length}", "--batch_size=32", "--variants=plain", "--rounds=1",
             f"--json={out}"]
    if args.quick:
        flags += ["--steps=2", "--warmup=1", "--matmul_size=256"]
    if args.init_checkpoint:
        flags.append(f"--checkpoint={args.init_checkpoint}")
    if args.torch_python:
        flags.append(f"--torch_python={args.torch_python}")
    run_child("bench_training", flags, log_dir, f"training-{length}-round-{round_index}")
    return read_json(out)["sides"]


def run_reader(args, round_index, log_dir):
    out = os.path.join(args.work_dir, f"reader-round-{round_index}.json")
    flags = [f"--megabytes={args.reader_megabytes}", "--modes=epoch_held",
             f"--path={os.path.join(args.work_dir, 'reader', 'train.tsv')}", f"--json={out}"]
    run_child("bench_reader_memory", flags, log_dir, f"reader-round-{round_index}")
    return read_json(out)["results"][0]


# --- Collecting: one item per compared quantity -----------------------------------------------

def item(name, unit, kerasbert, huggingface, target):
    """A compared quantity: per-round values of each side (HF: None in a round where it was
    not measured; None for all: HF has no such quantity) and its target: ("ratio", op, bound) on kerasbert / HF, or ("value", op, bound) on
    kerasbert's value; op is "<=" or ">="."""
    return {"name": name, "unit": unit, "kerasbert": kerasbert, "huggingface": huggingface,
            "target": list(target)}


def parity_items(row, runs_by_task):
    """fine_tune_memory or eval_seconds items from parity's runs, paired by seed."""
    key, unit = {"fine_tune_memory": ("peak_rss_mb", "MB"),
                 "eval_seconds": ("eval_seconds", "s")}[row]
    items = []
    for task, runs in runs_by_task.items():
        seeds = sorted({r["seed"] for r in runs})
        side = {(r["side"], r["seed"]): r[key] for r in runs}
        items.append(item(task, unit, [side.get(("kerasbert", s)) for s in seeds],
                          [side.get(("huggingface", s)) for s in seeds], ("ratio", "<=", 1.0)))
    return items


SERVING_QUANTITIES = (  # (name, key in bench_serving's results, unit, op)
    ("peak RSS", "peak_rss_mb", "MB", "<="),
    ("batch-1 p50", "p50_ms", "ms", "<="),
    ("batch-1 p99", "p99_ms", "ms", "<="),
    ("batch texts/s", "texts_per_second", "texts/s", ">="),
    ("start → first answer", "first_answer_seconds", "s", "<="),
)


# bench_serving's kerasbert servers in the table: the SavedModel (TF Serving's export, served
# by a lean TensorFlow process) and the LiteRT export (no TensorFlow), float32 and with int8
# weights (--quantize=dynamic_int8: faster, answers no longer the SavedModel's; its accuracy
# cost is measured in docs/experiments/speed-and-memory.md).
SERVING_SIDES = (("kerasbert", ""), ("kerasbert litert", " (LiteRT)"),
                 ("kerasbert litert_int8", " (LiteRT int8)"))


def serving_items(rounds):
    """Items from each round's bench_serving results ({task: {side: merged}}), one set per
    kerasbert server the task was served by."""
    items = []
    for task in rounds[0]:
        for side, label in SERVING_SIDES:
            if side not in rounds[0][task]:
                continue
            for name, key, unit, op in SERVING_QUANTITIES:
                hf = [r[task].get("huggingface", {}).get(key) for r in rounds]
                items.append(item(f"{task}{label}: {name}", unit,
                                  [r[task][side][key] for r in rounds], hf, ("ratio", op, 1.0)))
    return items


def training_items(rounds_by_length):
    """Steps per second of each side (bench_training's median step), ≥ 1.15 × PyTorch."""
    items = []
    for length, rounds in rounds_by_length.items():
        items.append(item(f"length {length}: steps/s", "steps/s",
                          [1 / r["plain"]["median_step_seconds"] for r in rounds],
                          [1 / r["pytorch"]["median_step_seconds"] if "pytorch" in r else None
                           for r in rounds], ("ratio", ">=", 1.15)))
    return items


def first_step_items(rounds, length):
    """Model loaded → first step done (bench_training's kerasbert side), ≤ 3 s."""
    def first(side):
        return side["first_step_seconds"] - side["loaded_seconds"]

    return [item(f"length {length}: loaded → 1st step done", "s",
                 [first(r["plain"]) for r in rounds],
                 [first(r["pytorch"]) if "pytorch" in r else None for r in rounds],
                 ("value", "<=", 3.0))]


def reader_items(rounds):
    return [item(f"{rounds[0]['file_mb']:g} MB file: peak above imports / file size", "×",
                 [r["peak_above_baseline_mb"] / r["file_mb"] for r in rounds],
                 None, ("value", "<=", 5.0))]


# --- Summaries and verdicts -------------------------------------------------------------------

def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(entry):
    """Adds the medians, the per-round ratios kerasbert / HF, their median and min–max,
    and the verdict ("met", "short", "not measured") to an item."""
    kb, hf = entry["kerasbert"], entry["huggingface"] or [None] * len(entry["kerasbert"])
    ratios = [k / h if k is not None and h else None for k, h in zip(kb, hf)]
    measured = [r for r in ratios if r is not None]
    what, op, bound = entry["target"]
    subject = (statistics.median(measured) if measured else None) if what == "ratio" \
        else _median(kb)
    if subject is None:
        verdict = "not measured"
    else:
        verdict = "met" if (subject <= bound if op == "<=" else subject >= bound) else "short"
    return {**entry, "kerasbert_median": _median(kb),
            "huggingface_median": None if entry["huggingface"] is None else _median(hf),
            "ratios": ratios, "ratio_median": statistics.median(measured) if measured else None,
            "ratio_min": min(measured) if measured else None,
            "ratio_max": max(measured) if measured else None, "verdict": verdict}


def target_text(target):
    what, op, bound = target
    sign = "≤" if op == "<=" else "≥"
    if what == "ratio":
        return f"{sign} HF" if bound == 1.0 else f"{sign} {bound:g} × HF"
    return f"{sign} {bound:g}"


# --- Markdown --------------------------------------------------------------------------------

def _number(x):
    if x is None:
        return "not measured"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"


def render(data, style="full"):
    """The Markdown block (between the markers) for bench_all's JSON, or a list of them
    (oldest first: each item from the newest that has it, see render_many), or, for None,
    the block that says how to make it. `style`: "full" or "summary" (see STYLES)."""
    if isinstance(data, list):
        return render_many(data, style)
    if data is None:
        return (f"Not yet measured: `{COMMAND}` on a quiet machine, then `{RENDER_COMMAND}` "
                "writes the table here (kerasbert vs HuggingFace + PyTorch: fine-tuning "
                "memory, serving, training step, first step, reading memory, evaluation "
                "seconds).\n")
    entries = [(row, data["rows"][row], "") for row in ROWS if row in data["rows"]]
    if style == "summary":
        return _summary_header([("", data)]) + "\n\n" + _summary(entries)
    return _header(data) + "\n\n" + _table(entries)


def render_many(datas, style="full"):
    """One table from several measurements (oldest first): each item (a row's task or
    quantity) from the newest that measured it, marked [k], so a later run of some tasks
    replaces only theirs; above it one line per measurement, its host and command."""
    if len(datas) == 1:
        return render(datas[0], style)
    chosen, errors = {}, {}  # row -> {item name: (k, item)}; row -> (k, its failed entry)
    for k, data in enumerate(datas, 1):
        for row, entry in data["rows"].items():
            if "error" in entry:
                errors[row] = (k, entry)
                continue
            items = chosen.setdefault(row, {})
            for it in entry["items"]:
                items[it["name"]] = (k, it)  # a name seen before keeps its place
    entries, supplied = [], {}  # supplied: k -> what it gives, in the table's order
    for row in ROWS:
        if row in chosen:
            items = dict(sorted(chosen[row].items(), key=lambda pair: _task_order(pair[0])))
            for name, (k, it) in items.items():
                entries.append((row, {"items": [it]}, f" [{k}]"))
            for k in dict.fromkeys(k for k, _ in items.values()):
                names = [name for name, (j, _) in items.items() if j == k]
                partial = f" ({', '.join(names)})" if len(names) < len(items) else ""
                supplied.setdefault(k, []).append(ROW_TITLES[row] + partial)
        elif row in errors:
            k, entry = errors[row]
            entries.append((row, entry, f" [{k}]"))
            supplied.setdefault(k, []).append(ROW_TITLES[row])
    if style == "summary":  # the sources' rows are in the table's marks: the hosts only
        header = _summary_header([(f"[{k}]", datas[k - 1]) for k in sorted(supplied)])
    else:
        header = "\n\n".join(f"[{k}] {', '.join(supplied[k])}: " + _header(datas[k - 1])
                              for k in sorted(supplied))
    return header + "\n\n" + (_summary if style == "summary" else _table)(entries)


def _task_order(item_name):
    """Items of one row grouped by task, in TASKS' order (stable: others keep theirs, last)."""
    task = item_name.split(":")[0].split(" (")[0]
    return list(TASKS).index(task) if task in TASKS else len(TASKS)


def _host_text(data):
    """Where and how a measurement ran: date, CPU, ISA, versions, rounds."""
    host = data["host"]
    known = [f for f in ISA_FLAGS if f in host["isa"]]  # the JSON keeps its keys sorted
    order = known + sorted(f for f in host["isa"] if f not in known)
    isa = ", ".join(f for f in order if host["isa"][f]) or "none of " + ", ".join(order)
    v = host["versions"]
    return (f"{host['date'][:10]}, {host['cpu']} ({host['cores']} cores; {isa}); "
            f"TensorFlow {v['tensorflow']}, Keras {v['keras']}, torch {v['torch']}, "
            f"transformers {v['transformers']}; {data['settings']['rounds']} round(s), sides "
            "alternating")


def _header(data):
    return (_host_text(data) + "; medians over rounds. Ratio: kerasbert / HF per round, "
            "median (min–max). Made by `" + data["settings"]["command"] + "`.")


def _summary_header(marked):
    """The summary's one line per host: [(mark, data)] of the measurements it shows."""
    hosts = {}
    for mark, data in marked:
        hosts.setdefault(_host_text(data), []).append(mark)
    return "\n\n".join(f"{', '.join(marks)}{': ' if marks[0] else ''}{text}. The commands, "
                        "both sides' values and each round's ratio: [the full table]"
                        f"({FULL_TABLE})." for text, marks in hosts.items())


def _table(entries):
    """The table of (row, its entry, a mark after its title) in that order."""
    lines = ["| row | measured | kerasbert | HF | ratio per round | ratio | target | |",
             "|---|---|---:|---:|---|---|---|---|"]
    for row, entry, mark in entries:
        if "error" in entry:
            lines.append(f"| {ROW_TITLES[row]}{mark} | failed: {entry['error'][:120]} | | | | | "
                         "| |")
            continue
        for it in entry["items"]:
            ratio = "–" if it["ratio_median"] is None else (
                f"{it['ratio_median']:.2f} ({it['ratio_min']:.2f}–{it['ratio_max']:.2f})")
            per_round = ", ".join("–" if r is None else f"{r:.2f}" for r in it["ratios"])
            hf = "–" if it["huggingface"] is None else _number(it["huggingface_median"])
            lines.append(f"| {ROW_TITLES[row]}{mark} | {it['name']} ({it['unit']}) | "
                         f"{_number(it['kerasbert_median'])} | "
                         f"{hf} | {per_round or '–'} | "
                         f"{ratio} | {target_text(it['target'])} | {it['verdict']} |")
    return "\n".join(lines) + "\n"


def _summary_parts(row, name):
    """(line, label) of an item in the summary: serving gets a line per task and server
    ("sst2 (SavedModel)", "sst2 (LiteRT)"), every other row one line."""
    if row != "serving":
        return "", name
    group, label = name.split(": ", 1)
    return (group if "(" in group else f"{group} (SavedModel)"), label


def _summary_value(it):
    what = it["target"][0]
    if what == "ratio":
        return "not measured" if it["ratio_median"] is None else f"{it['ratio_median']:.2f}"
    value = _number(it["kerasbert_median"])
    return value + ("×" if it["unit"] == "×" else f" {it['unit']}")


def _summary(entries):
    """One line per row (and per task and server for serving): each item's median ratio
    kerasbert / HF (or its value, for a target on kerasbert's value alone), the targets and
    how many are met."""
    lines = ["| row | server | kerasbert ÷ HF, median of the rounds (or the value) | "
             "target | met |", "|---|---|---|---|---|"]
    groups = {}  # (row, line) -> [(label, item, mark)], in the table's order
    for row, entry, mark in entries:
        if "error" in entry:
            lines.append(f"| {ROW_TITLES[row]}{mark} | | failed: {entry['error'][:120]} | | |")
            continue
        for it in entry["items"]:
            line, label = _summary_parts(row, it["name"])
            groups.setdefault((row, line), []).append((label, it, mark))
    for (row, line), members in groups.items():
        marks = {mark for _, _, mark in members}
        shared = marks.pop() if len(marks) == 1 else ""
        cells = ", ".join(f"{label} {_summary_value(it)}{'' if shared else mark}"
                          for label, it, mark in members)
        targets = [target_text(it["target"]) for _, it, _ in members]
        common = max(set(targets), key=targets.count)
        others = [f"{label}: {t}" for (label, _, _), t in zip(members, targets) if t != common]
        target = common + (f" ({', '.join(others)})" if others else "")
        verdicts = [it["verdict"] for _, it, _ in members]
        measured = [v for v in verdicts if v != "not measured"]
        met = (verdicts[0] if len(verdicts) == 1 else
               f"{measured.count('met')} of {len(measured)}"
               + (f" ({len(verdicts) - len(measured)} not measured)"
                  if len(measured) < len(verdicts) else ""))
        lines.append(f"| {ROW_TITLES[row]}{shared} | {line} | {cells} | {target} | {met} |")
    return "\n".join(lines) + "\n"


def _find_block(text):
    """(where the marker starts, where it ends, where END starts, the block's style)."""
    for marker, style in STYLES.items():
        start = text.find(marker)
        if start >= 0:
            end = text.find(END, start)
            if end >= 0:
                return start, start + len(marker), end, style
    raise ValueError(f"no {BEGIN} (or {SUMMARY_BEGIN}) … {END} block")


def style_of(text):
    """The style the page's block asks for: "full" or "summary"."""
    return _find_block(text)[3]


def replace_block(text, block):
    """`text` with the part between its begin marker and END replaced by `block`."""
    _, content, end, _ = _find_block(text)
    return text[:content] + "\n" + block + text[end:]


def block_of(text):
    """The part of `text` between its begin marker and END, without the newline after the
    marker."""
    _, content, end, _ = _find_block(text)
    return text[content + 1:end]


# --- The command ----------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default=",".join(ROWS),
                   help=f"comma-separated, of {', '.join(ROWS)} (default: all)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each comparison")
    p.add_argument("--quick", action="store_true",
                   help="one round, bundled SST-2 sample, length 32, 1 MB reading file")
    p.add_argument("--data_root", default=None, help="the real data (GLUE, CoNLL-2003, SQuAD "
                   "dev part) as /work/shared/data lays it out; needed without --quick")
    p.add_argument("--tasks", default=None, help="the parity tasks (default: "
                   f"{','.join(TASKS)}; --quick: sst2)")
    p.add_argument("--lengths", default=None,
                   help="training step lengths (default 32,128; --quick: 32)")
    p.add_argument("--reader_megabytes", type=int, default=None,
                   help="the generated reading file (default 100; --quick: 1)")
    p.add_argument("--init_checkpoint", default=None,
                   help="a HuggingFace BERT folder both sides start from (default: MiniLM-L6)")
    p.add_argument("--work_dir", default="/tmp/kerasbert_bench_all",
                   help="the runs, exports and logs (new or empty)")
    p.add_argument("--json", default=None, help="default: <work_dir>/bench_all.json")
    p.add_argument("--markdown", default=None, help="default: <work_dir>/bench_all.md")
    add_torch_python_flag(p, "the HuggingFace side; without it its columns say not measured")
    p.add_argument("--render", default=None, metavar="FILE",
                   help="rewrite the bench_all block of FILE (or of several, comma-separated) "
                   "from --from (or 'not yet measured'); a block opened by "
                   f"'{SUMMARY_BEGIN}' gets the summary, one by '{BEGIN}' the full table")
    p.add_argument("--from", dest="source", default=None, metavar="JSON",
                   help="with --render: bench_all's JSON, or several, comma-separated and "
                   "oldest first (each item of a row from the newest that has it)")
    return p.parse_args(argv)


def check_args(p_error, args):
    """Every flag checked, the defaults of --quick filled in; p_error(message) exits."""
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in args.rows if r not in ROWS]
    if unknown or not args.rows:
        p_error(f"--rows={','.join(args.rows)}: expected some of {', '.join(ROWS)}")
    if args.quick:
        args.rounds = 1
    if args.rounds < 1:
        p_error(f"--rounds={args.rounds}: must be a positive integer")
    tasks = args.tasks or ("sst2" if args.quick else ",".join(TASKS))
    args.tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    if args.quick and set(args.tasks) - {"sst2"}:
        p_error(f"--tasks={tasks}: --quick runs the bundled SST-2 sample only")
    unknown = [t for t in args.tasks if t not in TASKS]
    if unknown or not args.tasks:
        p_error(f"--tasks={tasks}: expected some of {', '.join(TASKS)}")
    lengths = args.lengths or ("32" if args.quick else "32,128")
    try:
        args.lengths = [int(x) for x in lengths.split(",") if x.strip()]
    except ValueError:
        p_error(f"--lengths={lengths}: expected comma-separated integers")
    if not args.lengths or min(args.lengths) < 8:
        p_error(f"--lengths={lengths}: give lengths of at least 8")
    args.reader_megabytes = args.reader_megabytes or (1 if args.quick else 100)
    if args.reader_megabytes < 1:
        p_error(f"--reader_megabytes={args.reader_megabytes}: must be at least 1")
    if not args.quick and {"fine_tune_memory", "eval_seconds", "serving"} & set(args.rows):
        if not args.data_root:
            p_error("--data_root: needed for the parity and serving rows (the real GLUE, "
                    "CoNLL-2003 and SQuAD files, e.g. ../shared/data); or --quick")
        for task in args.tasks:
            if not os.path.exists(os.path.join(args.data_root, TASKS[task][0])):
                p_error(f"--data_root={args.data_root}: no {TASKS[task][0]} ({task})")
    if args.torch_python and missing_interpreter(args.torch_python):
        p_error(missing_interpreter(args.torch_python))
    if args.init_checkpoint and not os.path.isfile(
            os.path.join(args.init_checkpoint, "config.json")):
        p_error(f"--init_checkpoint={args.init_checkpoint}: not a HuggingFace BERT folder")
    if os.path.isdir(args.work_dir) and os.listdir(args.work_dir):
        p_error(f"--work_dir={args.work_dir}: not empty (give a new folder)")
    args.serve = [t for t in SERVED if t in args.tasks] if "serving" in args.rows else []
    args.json = args.json or os.path.join(args.work_dir, "bench_all.json")
    args.markdown = args.markdown or os.path.join(args.work_dir, "bench_all.md")


def collect(args, log_dir):
    """{row: {"items": [...]} or {"error": ...}} for the selected rows."""
    rows = {}
    selected = set(args.rows)

    def guarded_row(names, make):
        try:
            made = make()
        except BenchError as e:
            print(f"bench_all: {', '.join(names)}: {e}", file=sys.stderr, flush=True)
            for name in names:
                rows[name] = {"error": str(e)}
            return
        for name, items in made.items():
            rows[name] = {"items": [summarize(i) for i in items]}

    parity_rows = [r for r in ("fine_tune_memory", "eval_seconds") if r in selected]
    parity_tasks = args.tasks if parity_rows else args.serve
    parity_runs = {}

    def parity():
        for task in parity_tasks:
            parity_runs[task] = run_parity(args, task, log_dir, with_hf=bool(parity_rows))
        return {row: parity_items(row, parity_runs) for row in parity_rows}

    if parity_tasks:
        guarded_row(parity_rows or ["serving"], parity)
    if args.serve and "serving" not in rows:
        def serving():
            runs = [os.path.join(args.work_dir, f"parity-{t}", "kerasbert", "seed-1", "run")
                    for t in args.serve]
            return {"serving": serving_items([run_serving(args, runs, r, log_dir)
                                              for r in range(1, args.rounds + 1)])}
        guarded_row(["serving"], serving)
    step_rows = [r for r in ("training_step", "first_step") if r in selected]
    if step_rows:
        def steps():
            by_length = {n: [] for n in args.lengths}
            for r in range(1, args.rounds + 1):
                for n in args.lengths:
                    by_length[n].append(run_training(args, n, r, log_dir))
            longest = max(args.lengths)
            made = {"training_step": training_items(by_length),
                    "first_step": first_step_items(by_length[longest], longest)}
            return {row: made[row] for row in step_rows}
        guarded_row(step_rows, steps)
    if "reader_memory" in selected:
        guarded_row(["reader_memory"], lambda: {"reader_memory": reader_items(
            [run_reader(args, r, log_dir) for r in range(1, args.rounds + 1)])})
    return rows


def render_file(path, source):
    """Rewrites the block in `path` from `source`: a JSON file or comma-separated files
    (oldest first)."""
    data = [read_json(f) for f in (source or "").split(",") if f] or None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    from kerasbert.io_utils import atomic_write_text

    atomic_write_text(path, replace_block(text, render(data, style_of(text))))
    print(f"bench_all: {path}: the bench_all block "
          + (f"rendered from {source}" if source else "says not yet measured"))


def main(argv=None):
    def p_error(message):
        print(f"bench_all: {message}", file=sys.stderr)
        raise SystemExit(2)

    args = parse_args(argv)
    if args.render:
        for source in (args.source or "").split(","):
            if source and not os.path.isfile(source):
                p_error(f"--from={source}: no such file")
        for page in args.render.split(","):
            try:
                render_file(page, args.source)
            except (OSError, ValueError) as e:
                p_error(f"--render={page}: {e}")
        return 0
    if args.source:
        p_error("--from: only with --render")
    check_args(p_error, args)
    os.makedirs(args.work_dir, exist_ok=True)
    if not args.torch_python:
        print("bench_all: no --torch_python: the HuggingFace columns say not measured",
              flush=True)
    started = time.perf_counter()
    host = host_record(args.torch_python)
    rows = collect(args, os.path.join(args.work_dir, "logs"))
    data = {"host": host,
            "settings": {"command": "python -m benchmarks.bench_all " + " ".join(
                         sys.argv[1:] if argv is None else argv),
                         "rounds": args.rounds, "quick": args.quick, "tasks": args.tasks,
                         "lengths": args.lengths, "reader_megabytes": args.reader_megabytes,
                         "torch_python": bool(args.torch_python),
                         "seconds": round(time.perf_counter() - started)},
            "rows": rows}
    from kerasbert.io_utils import atomic_write_json, atomic_write_text

    atomic_write_json(args.json, data)
    text = render(data)
    atomic_write_text(args.markdown, text)
    print(text)
    print(f"bench_all: wrote {args.json} and {args.markdown}")
    return 1 if any("error" in r for r in rows.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
