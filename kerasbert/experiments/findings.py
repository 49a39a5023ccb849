"""The findings report: every claim of the three papers, its measurement and a verdict.

    python -m kerasbert.experiments findings \
        --runs=runs/compare-mrpc,runs/ner-table,runs/sizes --output=docs/findings.md

Reads the JSON the experiments write (kerasbert/restarts.py tables) in each --runs folder
(or the file itself): comparison.json (Wang's strategy table), table.json (the NER table),
grid.json (the model-size grid), results.json (the pre-training ablation), sweep.json (a
sweep, `--learning_rates`/`--seeds`) and landscape_findings.json (Hao et al.; see
LANDSCAPE below). Folders are searched
recursively. For each claim in CLAIMS it finds the tables that measure it, pairs the two
rows it compares seed by seed (the seeds both finished), and reports n, the effect (row A
− row B, in points × 100) with its 95% Student-t interval over the paired differences, the
paper's number and a verdict:

- supported: the interval excludes 0 in the paper's direction (for a "≈" claim: it lies
  within ± the claim's margin);
- contradicted: it excludes 0 the other way (for "≈": it excludes 0);
- not distinguishable: it contains 0; the report then gives the interval's half-width and
  roughly how many seeds the observed effect would need to separate (the same spread of
  paired differences assumed).

Claims nothing measured are listed as "not measured". Above every measurement the report
opens with one row per claim (kerasbert.experiments.claim_verdicts): the verdict that
counts (a planned confirmation, else a planned primary test, else the most seeds), how many
measurements of the claim exist, and its p-value with Holm's correction across the claims.
Nothing here trains or imports TensorFlow.
"""

import argparse
import datetime
import json
import math
import os
import re

from kerasbert.analysis import stats
from kerasbert import command as command_lib
from kerasbert.errors import InputError
from kerasbert.experiments import claim_verdicts, strategies
from kerasbert import run_folder
from kerasbert.io_utils import atomic_write_text, shown_path

# File name → the tool that writes it.
SOURCES = {"comparison.json": "compare_strategies", "table.json": "ner_table",
           "grid.json": "model_size_grid", "results.json": "pretraining_ablation",
           run_folder.SWEEP_JSON: "sweep", "landscape_findings.json": "landscape",
           "stability_findings.json": "stability"}
# The landscape tool (issue 19) writes no restarts table; a landscape_findings.json of
# {"command", "experiment", "claims": {claim id: {"n", "effect", "low", "high", "std",
# "unit"}}} fills the Hao et al. claims below (effect and interval as measured there).
LANDSCAPE = "landscape_findings.json"
# The stability experiment (issue 58) writes the same shape, stability_findings.json, each
# measurement with its own test's verdict and p-value (a failure-rate difference, Levene's
# test, an F interval: not a paired difference); see kerasbert/experiments/stability.py.
CLAIM_FILES = ("landscape", "stability")

PAIRS, TAGGING, CLASSIFICATION = ("mrpc", "stsb"), ("conll2003",), ("sst2",)


def _side(tool, row, task=None, head_rate=False, init=None, **where):
    """One row of one table: the tool, the task(s) its table is for, the experiment's
    settings it must have (e.g. head="bimpm"), the row (a label, or "first"/"last"),
    whether that row's head must (True) or must not (False, the papers' rows) have had a
    learning rate of its own (`--head_learning_rate`), and for the size grid's rows which
    initialisation "first"/"last" count among ("random" or "pretrained"; None: any)."""
    return {"tool": tool, "task": task, "where": where, "row": row, "head_rate": head_rate,
            "init": init}


def _claim(id, paper, statement, paper_number, a, b, direction, margin=None,
           why_unmeasured=None):
    """One claim: row A against row B in `direction`; `why_unmeasured` is what the report
    says when no table has both rows, where we know why (a budget, a choice of task)."""
    return {"id": id, "paper": paper, "statement": statement, "paper_number": paper_number,
            "a": a, "b": b, "direction": direction, "margin": margin,
            "why_unmeasured": why_unmeasured}


WANG = "Wang et al. 2019 (stack-and-finetune)"
BERT = "Devlin et al. 2019 (BERT)"
HAO = "Hao et al. 2019 (loss landscapes)"
MOSBACH = "Mosbach et al. 2021 (stability of fine-tuning)"
ZHANG = "Zhang et al. 2021 (few-sample fine-tuning)"
DODGE = "Dodge et al. 2020 (weight initialisations, data orders)"
# The row labels the strategies experiment writes, read back by the same names.
FT, FROZEN, STACK = strategies.FINE_TUNE, strategies.FROZEN, strategies.STACK
SAME_STEPS, HEAD_LR = strategies.SAME_STEPS, strategies.HEAD_LR
CLAIMS = []
for kind, tasks, head in (("sentence pairs", PAIRS, "bimpm"),
                          ("sentence pairs", PAIRS, "sim_transformer"),
                          ("tagging", TAGGING, "bilstm_tagger"),
                          # MiniLM was trained mean-pooled: its frozen [CLS] is a poor
                          # feature, so a mean-pool head (the plugin) stands for it too
                          ("classification", CLASSIFICATION, ("sequence_classifier",
                                                              "mean_pool"))):
    for other, name in ((FT, "fine-tune"), (FROZEN, "frozen")):
        heads = head if isinstance(head, tuple) else (head,)
        CLAIMS.append(_claim(
            f"wang-{heads[0]}-stack-vs-{name}", WANG,
            f"{kind}, head {' or '.join(heads)}: stack-and-finetune beats {other}",
            "direction only (stack-and-finetune ahead); the paper's table not transcribed",
            _side("compare_strategies", STACK, tasks, head=head),
            _side("compare_strategies", other, tasks, head=head), "+"))
CLAIMS += [
    _claim("wang-stack-vs-fine-tune-same-steps", WANG,
           "stack-and-finetune beats fine-tune only given the same number of training steps "
           "(its lead is not just its extra frozen steps)",
           "not in the paper (its baselines are not budget-matched)",
           _side("compare_strategies", STACK), _side("compare_strategies", SAME_STEPS), "+"),
    _claim("wang-stack-vs-fine-tune-head-lr", WANG,
           "stack-and-finetune beats fine-tune only with the head at the frozen phase's "
           "learning rate from the start, given the same steps (its lead is not just the "
           "head's larger rate)",
           "not in the paper (a head learning rate of its own is our control)",
           _side("compare_strategies", STACK),
           _side("compare_strategies", HEAD_LR, head_rate=True), "+"),
    _claim("wang-stack-head-lr-vs-fine-tune-head-lr", WANG,
           "with the head at its own learning rate in both, stack-and-finetune beats fine-tune "
           "only given the same steps (the frozen phase adds something of its own)",
           "not in the paper (a head learning rate of its own is our control)",
           _side("compare_strategies", STACK, head_rate=True),
           _side("compare_strategies", HEAD_LR, head_rate=True), "+"),
    _claim("wang-bimpm-no-context", WANG,
           "BIMPM without its context BiLSTM ≈ BIMPM (stack-and-finetune), within 1 point",
           "≈ (direction only)",
           _side("compare_strategies", STACK, PAIRS, head="bimpm_no_context"),
           _side("compare_strategies", STACK, PAIRS, head="bimpm"), "≈", margin=0.01),
    _claim("wang-sim-transformer-frozen", WANG,
           "Sim-Transformer behind BIMPM with the encoder frozen", "direction only",
           _side("compare_strategies", FROZEN, PAIRS, head="sim_transformer"),
           _side("compare_strategies", FROZEN, PAIRS, head="bimpm"), "-"),
    _claim("wang-sim-transformer-finetuned", WANG,
           "Sim-Transformer ahead of BIMPM after fine-tuning (stack-and-finetune)",
           "direction only",
           _side("compare_strategies", STACK, PAIRS, head="sim_transformer"),
           _side("compare_strategies", STACK, PAIRS, head="bimpm"), "+"),
    _claim("bert-t7-concat-vs-finetune", BERT,
           "Table 7: feature-based concat of the last four layers is within 0.3 F1 of "
           "fine-tuning (here: within 1 point)",
           "96.1 vs 96.4 dev F1 (BERT-base): −0.3",
           _side("ner_table", "Feature-based: concat_last_four"),
           _side("ner_table", "Fine-tuning"), "≈", margin=0.01),
    _claim("bert-t7-embeddings-vs-finetune", BERT,
           "Table 7: the embeddings alone as features are far behind fine-tuning",
           "91.0 vs 96.4 dev F1: −5.4",
           _side("ner_table", "Feature-based: embeddings"),
           _side("ner_table", "Fine-tuning"), "-"),
    _claim("bert-t7-second-to-last-vs-last", BERT,
           "Table 7: the second-to-last layer is a better feature than the last",
           "95.6 vs 94.9 dev F1: +0.7",
           _side("ner_table", "Feature-based: second_to_last"),
           _side("ner_table", "Feature-based: last"), "+"),
    _claim("bert-s4-restarts-rte", BERT,
           "§4: on small data restarts matter: the grid's first and last learning rates are "
           "no further apart than the spread over restarts (RTE; here: within 1 point, "
           "the size of that spread)",
           "no number (the paper restarts and picks on dev)",
           _side("sweep", "first", ("rte",)), _side("sweep", "last", ("rte",)), "≈",
           margin=0.01),
    _claim("bert-s4-restarts-mrpc", BERT, "§4: the same on MRPC (within 1 point)",
           "no number (the paper restarts and picks on dev)",
           _side("sweep", "first", ("mrpc",)), _side("sweep", "last", ("mrpc",)), "≈",
           margin=0.01),
]


def _table5_number(a, b):
    """The paper's Table 5 difference of two rows, or why there is none."""
    return "no STS-B column in Table 5" if a is None else f"{a} vs {b}: {a - b:+.1f}"


# The paper's Table 5 has SST-2 and MRPC; STS-B is here as a pair task whose Pearson r moves
# where small encoders leave MRPC's accuracy at its majority class (no column in the paper).
MRPC_AT_MAJORITY = ("MRPC's dev accuracy sat at its majority class (68.4) for every row of the "
                    "first CPU-sized ablation, no pre-training included, so the ablations "
                    "with all four objectives measure STS-B as the pair task; MRPC has all "
                    "four only at 5,000 pre-training steps "
                    "(docs/experiments/pretraining-ablation.md)")
# Table 5 fine-tunes; an ablation table written before --protocol existed has none.
FINE_TUNED = (None, "fine_tune")
for task, bert, ltr, no_nsp in (("sst2", 92.7, 92.1, 92.6), ("mrpc", 86.7, 77.5, 86.5),
                                ("stsb", None, None, None)):
    why = MRPC_AT_MAJORITY if task == "mrpc" else None
    CLAIMS += [
        _claim(f"bert-t5-pretraining-{task}", BERT,
               f"Table 5 ({task.upper()}): MLM + NSP pre-training beats no pre-training",
               "no such row in the paper (the floor the ablation must clear)",
               _side("pretraining_ablation", "BERT (MLM + NSP)", (task,), protocol=FINE_TUNED),
               _side("pretraining_ablation", "No pre-training (random init)", (task,),
                     protocol=FINE_TUNED), "+"),
        _claim(f"bert-t5-nsp-{task}", BERT,
               f"Table 5 ({task.upper()}): MLM + NSP beats MLM alone (No NSP)",
               _table5_number(bert, no_nsp),
               _side("pretraining_ablation", "BERT (MLM + NSP)", (task,), protocol=FINE_TUNED),
               _side("pretraining_ablation", "No NSP", (task,), protocol=FINE_TUNED), "+",
               why_unmeasured=why),
        _claim(f"bert-t5-ltr-{task}", BERT,
               f"Table 5 ({task.upper()}): the bidirectional MLM beats left-to-right LM "
               "(both without NSP)",
               _table5_number(no_nsp, ltr),
               _side("pretraining_ablation", "No NSP", (task,), protocol=FINE_TUNED),
               _side("pretraining_ablation", "LTR & No NSP", (task,), protocol=FINE_TUNED), "+",
               why_unmeasured=why),
    ]
CLAIMS.append(_claim(
    "bert-t5-pretraining-features", BERT,
    "Table 5's encoders, feature-based (§5.3's approach: the encoder frozen, a head trained "
    "on it): MLM + NSP's features beat a random encoder's",
    "no such row in the paper (its Table 5 fine-tunes)",
    _side("pretraining_ablation", "BERT (MLM + NSP)", protocol="feature_based"),
    _side("pretraining_ablation", "No pre-training (random init)", protocol="feature_based"),
    "+"))
CLAIMS += [
    _claim("bert-t6-size", BERT,
           "Table 6: the largest encoder of the grid beats the smallest",
           "MRPC dev accuracy 79.8 (3/768/12) → 87.8 (24/1024/16); pre-trained models",
           _side("model_size_grid", "last", init="random"),
           _side("model_size_grid", "first", init="random"), "+"),
    _claim("bert-s52-pretraining-lets-size-help", BERT,
           "§5.2: size pays on a small task \"provided that the model has been "
           "sufficiently pre-trained\": the grid's pre-trained encoder beats its largest "
           "random-init one",
           "no number (Table 6's rows are all pre-trained)",
           _side("model_size_grid", "last", init="pretrained"),
           _side("model_size_grid", "last", init="random"), "+"),
]
for id, statement in (
        ("hao-starting-point", "pre-training gives a better starting point and faster "
         "convergence than random initialisation"),
        ("hao-flatter-optima", "pre-trained fine-tuning ends in wider, flatter optima"),
        ("hao-loss-vs-generalisation", "the training-loss surface agrees with the "
         "generalisation error"),
        ("hao-overfitting", "pre-trained models resist overfitting"),
        ("hao-lower-layers", "lower layers move less; rolling them back costs little")):
    CLAIMS.append(_claim(id, HAO, statement, "qualitative (figures)",
                         _side("landscape", id), None, "+"))

# docs/figures/stability/PLAN.md part 2, claims 1–8: each task's measurement, and the plan's
# verdict over its tasks (supported only on every task, contradicted on any; see
# combine_tasks).
STABILITY_NUMBERS = "direction only (the papers' BERT-large runs; not transcribed)"
STABILITY_PENDING = ("the stability experiment's main run (docs/figures/stability/PLAN.md "
                     "part 2) has not measured it yet")
for id, paper, statement in (
        ("mosbach-failure-rate", MOSBACH, "with Adam's bias correction, more epochs and "
         "warm-up, fewer runs fail than with BERT's recipe (failure rate bert − mosbach)"),
        ("mosbach-variance", MOSBACH, "with that recipe the spread over seeds is smaller "
         "(Levene's test)"),
        ("zhang-variance", ZHANG, "re-initialising the top 2 layers and the pooler makes the "
         "spread over seeds smaller (Levene's test)"),
        ("zhang-mean", ZHANG, "re-initialising the top 2 layers and the pooler raises the mean "
         "dev score"),
        ("dodge-order-vs-init", DODGE, "data order and head initialisation contribute "
         "comparably to the variance (their mean-square ratio within [1/4, 4])"),
        ("mosbach-grad-norms", MOSBACH, "failed runs end with gradient norms ≥ 10× smaller "
         "than successful ones"),
        # claims 7 and 8: one pair / one campaign a task, measured without a verdict
        ("mosbach-barrier", MOSBACH, "a barrier separates the failed and the successful "
         "minimum (the training loss's rise above the failed end on the straight path)"),
        ("dodge-stop-early", DODGE, "start many, stop early finds a run as good as full "
         "restarts for the same compute (its best − the expected best of as many full "
         "runs)")):
    CLAIMS.append(_claim(id, paper, statement, STABILITY_NUMBERS, _side("stability", id), None,
                         "+", why_unmeasured=STABILITY_PENDING))


# --- Reading the tools' JSON ----------------------------------------------------------------

def find_sources(paths):
    """[(tool, path, data)] for every known JSON under the given folders or files."""
    found = []
    for given in paths:
        if os.path.isfile(given):
            files = [given]
        elif os.path.isdir(given):
            files = [os.path.join(d, f) for d, _, names in sorted(os.walk(given))
                     for f in sorted(names) if f in SOURCES]
        else:
            raise InputError(f"--runs={given}: no such file or folder")
        for file in files:
            name = os.path.basename(file)
            if name not in SOURCES:
                raise InputError(f"--runs={file}: not one of {', '.join(SOURCES)}")
            try:
                with open(file, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                raise InputError(f"{file}: cannot read it as JSON ({e})") from None
            if not isinstance(data, dict):
                raise InputError(f"{file}: not a JSON object")
            if SOURCES[name] == "pretraining_ablation" and "tables" not in data:
                continue  # an ablation run before restarts existed: no seeds to pair
            found.append((SOURCES[name], file, data))
    return found


def tables_of(tool, data):
    """{task: restarts table} of one tool's JSON."""
    if tool == "sweep":
        return {data["task"]: data["restarts"]} if "restarts" in data else {}
    return data.get("tables", {})


def _matches(side, task, experiment):
    if side["task"] is not None and task not in side["task"]:
        return False
    # a tuple of values: any of them (e.g. the heads a claim accepts)
    return all(experiment.get(k) in v if isinstance(v, tuple) else experiment.get(k) == v
               for k, v in side["where"].items())


def _has_head_rate(experiment, label):
    """Whether a table's row trained its head at a rate of its own: compare_strategies
    records {row: rate} for the rows that did, the other tools one rate (or none)."""
    rates = experiment.get("head_learning_rate")
    return label in rates if isinstance(rates, dict) else rates is not None


def _row(table, wanted, init=None):
    rows = table["rows"]
    if init is not None:  # the size grid's rows: "init" is "random" or the checkpoint's name
        rows = [r for r in rows if (r.get("init") == "random") == (init == "random")]
    if wanted == "first":
        return rows[0] if rows else None
    if wanted == "last":  # a one-row table's first and last are not paired (measure)
        return rows[-1] if rows else None
    return next((r for r in rows if r["label"] == wanted), None)


def candidates(side, sources):
    """[(task, row, source)] of every table that has this side's row."""
    out = []
    for tool, file, data in sources:
        if tool != side["tool"]:
            continue
        for task, table in tables_of(tool, data).items():
            experiment = data.get("experiment") or {}
            if _matches(side, task, experiment):
                row = _row(table, side["row"], side["init"])
                if row is not None and side["head_rate"] == _has_head_rate(
                        experiment, row["label"]):
                    out.append((task, row, {"file": file, "data": data, "table": table}))
    return out


# --- Verdicts --------------------------------------------------------------------------------

def verdict(direction, n, effect, low, high, std, margin=None, unit=None):
    """(verdict, note) from the paired interval of row A − row B; effects are fractions
    printed as points unless a `unit` is given (then printed as they are)."""
    if n < 2 or low is None:
        return "not distinguishable", f"n = {n}: no interval from fewer than two paired seeds"
    half = (high - low) / 2
    width = f"{100 * half:.1f} points" if unit is None else f"{half:.3g} {unit}"
    needed = stats.seeds_needed(effect, std)
    need = (f"half-width {width}; the observed effect would separate with "
            f"about {needed} seeds" if needed else
            f"half-width {width}; the observed effect is too small to "
            "separate with any practical number of seeds")
    if direction == "≈":
        if margin is not None and -margin <= low and high <= margin:
            return "supported", f"the interval lies within ±{100 * margin:.1f} points"
        if low > 0 or high < 0:
            return "contradicted", "the interval excludes 0"
        return "not distinguishable", need + (
            "" if margin is None else f"; equivalence needs the interval within "
            f"±{100 * margin:.1f} points")
    sign = 1 if direction == "+" else -1
    if sign * low > 0 and sign * high > 0:
        return "supported", "the interval excludes 0 in the paper's direction"
    if sign * low < 0 and sign * high < 0:
        return "contradicted", "the interval excludes 0 against the paper's direction"
    return "not distinguishable", need


SAME_RUN_TOLERANCE = 1e-4  # 0.01 points: two runs of one seed's recipe on two CPUs


SESSION_HOURS = 12  # tables written on one machine, without a reboot, within half a day


def _folder_session(source):
    """The folder a table's output folder sits in, from its command (/work/exp/s31 for
    --output_dir=/work/exp/s31/wang-stsb-bimpm-pair): for tables written before they
    recorded where they were measured, one work session's runs by convention."""
    found = re.search(r"--(?:output|work)_dir[= ](\S+)", source["data"].get("command") or "")
    return os.path.dirname(os.path.normpath(found.group(1))) if found else None


def _same_session(a_src, b_src):
    """Whether two tables were measured in one session: from their "measured_on" records
    (kerasbert.restarts.measured_on: the same host and boot, written within SESSION_HOURS
    of each other) where both have one, else from the folder convention above."""
    a, b = a_src["data"].get("measured_on"), b_src["data"].get("measured_on")
    if a and b:
        hours = abs((datetime.datetime.fromisoformat(a["utc"])
                     - datetime.datetime.fromisoformat(b["utc"])).total_seconds()) / 3600
        return ((a["host"], a.get("boot_id")) == (b["host"], b.get("boot_id"))
                and hours <= SESSION_HOURS)
    return _folder_session(a_src) is not None and _folder_session(a_src) == _folder_session(b_src)


def _same_measurement(seen, task, pairs, subset=False):
    """The measurement already made of these seeds with every value within 0.01 points of
    these (a tolerance, not rounding: 0.655849 and 0.655851 round apart). With `subset`,
    also one that holds these seeds among more: seeds 1-3 of another session's table
    paired with this session's five are part of the five-seed pair of the same runs."""
    for seen_task, seen_pairs, result in seen:
        held = set(pairs) <= set(seen_pairs) if subset else set(pairs) == set(seen_pairs)
        if seen_task == task and held and all(
                abs(x - y) <= SAME_RUN_TOLERANCE + 1e-12
                for seed, new in pairs.items() for x, y in zip(seen_pairs[seed], new)):
            return result
    return None


def _one_table(claim):
    """Whether the claim's sides differ only by their row: rows of one table."""
    return claim["a"]["tool"] == claim["b"]["tool"] and claim["a"]["where"] == claim["b"]["where"]


def _pairings(claim, sources):
    """[(task, row A, its source, row B, its source, same session?)] the claim is measured
    on. Sides that differ only by their row compare the rows of one table (one run's
    controlled comparison): a row of another run (say, a longer pre-training) is not paired
    with them.
    Sides with different settings (heads) pair across files; a table measured in the same
    work session as one of the other side is paired with that one (both sides measured in
    one session), not with another session's table that also has a partner of its own;
    same-session pairs come first (fewer seeds first), so a measurement is named by them
    and a cross-session pair that repeats some of their runs is folded into them."""
    one_table = _one_table(claim)
    pairings = []
    for task, a, a_src in candidates(claim["a"], sources):
        for task_b, b, b_src in candidates(claim["b"], sources):
            if task_b != task or (a_src["file"] == b_src["file"] and a is b):
                continue
            if one_table and a_src["file"] != b_src["file"]:
                continue
            pairings.append((task, a, a_src, b, b_src, _same_session(a_src, b_src)))
    if one_table:
        return pairings
    partnered = {src["file"] for _, _, a_src, _, b_src, same in pairings if same
                 for src in (a_src, b_src)}
    kept = [p for p in pairings
            if p[5] or p[2]["file"] not in partnered or p[4]["file"] not in partnered]
    return sorted(kept, key=lambda p: (not p[5], len(set(p[1]["seeds"]) & set(p[3]["seeds"]))))


def measure(claim, sources):
    """Every measurement of a claim: one per task and pair of tables where both rows were
    found, a pair that repeats another's runs reported once."""
    if claim["a"]["tool"] in CLAIM_FILES:
        results = measure_claim_files(claim, sources)
        return combine_tasks(results) if claim["a"]["tool"] == "stability" else results
    results, seen = [], []  # seen: (task, {seed: (value A, value B)}, its measurement)
    across_files = not _one_table(claim)
    for task, a, a_src, b, b_src, same_session in _pairings(claim, sources):
        values_a = dict(zip(map(str, a["seeds"]), a["values"]))
        values_b = dict(zip(map(str, b["seeds"]), b["values"]))
        seeds = [s for s in values_a if s in values_b]
        if not seeds:
            continue
        # The same seeds' numbers to 0.01 points in another table (a row reused, or rerun
        # beside a control: reruns agree to rounding, not always bit for bit) are one
        # measurement, not two.
        pairs = {s: (values_a[s], values_b[s]) for s in seeds}
        same = _same_measurement(seen, task, pairs,
                                 subset=across_files and not same_session)
        if same is not None:
            same["also_in"] = sorted(set(same.get("also_in", [])) | {
                a_src["file"], b_src["file"]} - set(same["sources"]))
            continue
        d = stats.paired_difference([values_a[s] for s in seeds],
                                    [values_b[s] for s in seeds])
        result = {"task": task, "a": _label(a, claim["a"], claim["b"], a_src),
                  "b": _label(b, claim["b"], claim["a"], b_src), "seeds": seeds, **d,
                  "differences": [values_a[s] - values_b[s] for s in seeds],
                  "metric": a_src["table"]["metric"],
                  "sources": sorted({a_src["file"], b_src["file"]}),
                  "commands": list(dict.fromkeys(
                      s["data"].get("command", "?") for s in (a_src, b_src))),
                  "experiments": [s["data"].get("experiment") for s in (
                      (a_src,) if a_src["file"] == b_src["file"] else (a_src, b_src))]}
        result["verdict"], result["note"] = verdict(
            claim["direction"], d["n"], d["difference"], d["low"], d["high"], d["std"],
            claim["margin"])
        results.append(result)
        seen.append((task, pairs, result))
    return results


def _label(row, side, other, source):
    """A row's label, with the settings that tell it from the other side's row where the
    claim compares across experiments (e.g. "stack-and-finetune (head bimpm)")."""
    keys = [k for k in side["where"] if side["where"][k] != other["where"].get(k)]
    experiment = source["data"].get("experiment") or {}
    settings = ", ".join(f"{k} {experiment.get(k, side['where'][k])}" for k in keys)
    return row["label"] + (f" ({settings})" if settings else "")


def _settings(experiment):
    """A table's experiment as the report prints it: an installed package's weights by the
    package's folder, not this machine's site-packages path; --model_size only for the
    random initialisation that reads it (tables written before 2026-12-03 list it always)."""
    shown = []
    for key, value in experiment.items():
        if key == "max_train_examples" and value is None:
            shown.append(f"{key} all")  # the whole training set, not an unknown
            continue
        if value is None or (key == "model_size"
                             and experiment.get("init_checkpoint") != "random"):
            continue
        shown.append(f"{key} {shown_path(value) if key == 'init_checkpoint' else value}")
    return ", ".join(shown)


def measure_claim_files(claim, sources):
    """One result per measurement a claims file (landscape_findings.json,
    stability_findings.json) made of the claim (a claim may hold one measurement or a list;
    `points: false` ones are printed in their unit)."""
    results = []
    for tool, file, data in sources:
        got = ((data.get("claims") or {}).get(claim["id"]) if tool == claim["a"]["tool"]
               else None)
        for m in ([got] if isinstance(got, dict) else got or []):
            points = m.get("points", True)
            # the measurement's own seeds where they are not the run's (RTE's seed grid)
            seeds = [str(s) for s in m.get("seeds") or
                     (data.get("experiment") or {}).get("seeds", [])]
            result = {"task": data.get("experiment", {}).get("task", "?"),
                      "a": m.get("measure", claim["id"]), "b": "", "seeds": seeds,
                      "n": m.get("n", 0), "difference": m["effect"], "std": m.get("std"),
                      "low": m.get("low"), "high": m.get("high"),
                      "metric": m.get("unit", ""), "points": points, "sources": [file],
                      "differences": None if m.get("values") is None else [
                          v for v in m["values"] if v is not None and math.isfinite(v)],
                      "commands": [data.get("command", "?")],
                      "experiments": [data.get("experiment")]}
            if m.get("verdict"):  # decided by its own test (stability_findings.json)
                result.update(verdict=m["verdict"], note=m.get("note", ""), p=m.get("p"),
                              test=m.get("test"))
            else:
                result["verdict"], result["note"] = verdict(
                    claim["direction"], result["n"], result["difference"], result["low"],
                    result["high"], result["std"], claim["margin"],
                    unit=None if points else result["metric"])
            results.append(result)
    return results


def combine_tasks(results):
    """The measurements, and where they cover two or more tasks, one more over all of them
    as the stability plan decides: supported only if supported on every task (p: the
    largest, an intersection–union test), contradicted if contradicted on any (p: the
    smallest contradicting one), else not distinguishable (p: the largest). Per task the
    measurement with the most runs is the one combined."""
    per_task = {}
    for r in results:
        if r["task"] not in per_task or r["n"] > per_task[r["task"]]["n"]:
            per_task[r["task"]] = r
    if len(per_task) < 2:
        return results
    parts = [per_task[t] for t in sorted(per_task)]
    verdicts = [r["verdict"] for r in parts]
    ps = [r.get("p") for r in parts]
    if all(v == "supported" for v in verdicts):
        verdict_, p = "supported", None if None in ps else max(ps)
    elif "contradicted" in verdicts:
        verdict_ = "contradicted"
        p = min((r.get("p") for r in parts if r["verdict"] == "contradicted"
                 and r.get("p") is not None), default=None)
    elif all(v == claim_verdicts.NO_VERDICT for v in verdicts):
        verdict_, p = claim_verdicts.NO_VERDICT, None
    else:
        verdict_, p = "not distinguishable", None if None in ps else max(ps)
    combined = {"task": " + ".join(r["task"] for r in parts), "a": parts[0]["a"], "b": "",
                "seeds": [], "n": sum(r["n"] for r in parts), "difference": None,
                "std": None, "low": None, "high": None, "metric": parts[0]["metric"],
                "points": parts[0].get("points", True), "differences": None,
                "sources": sorted({f for r in parts for f in r["sources"]}),
                "commands": [c for r in parts for c in r["commands"]],
                "experiments": [e for r in parts for e in r["experiments"]],
                "verdict": verdict_, "p": p, "test": claim_verdicts.OVER_TASKS,
                "note": "; ".join(f"{r['task']}: {r['verdict']}" for r in parts)
                + " (supported only if supported on every task, contradicted if on any)"}
    return results + [combined]


# --- The report ------------------------------------------------------------------------------

def _points(x, sign="+"):
    return "–" if x is None else f"{100 * x:{sign}.1f}"


def _formatter(result):
    """Points (× 100) for dev metrics; a landscape measurement in its own unit as is."""
    if result.get("points", True):
        return _points
    return lambda x, sign="+": "–" if x is None else f"{x:{sign}.3g}"


def report(sources, claims=CLAIMS, plans=claim_verdicts.PLANNED):
    """(the Markdown report, {claim id: [measurement]}); `plans`: the measurements planned
    before they ran (claim_verdicts.PLANNED), which decide the verdict that counts."""
    measured = {c["id"]: measure(c, sources) for c in claims}
    lines = ["# Findings: the papers' claims, measured", "",
             "Generated by `python -m kerasbert.experiments findings` from the tools' JSON "
             "outputs "
             f"({len(sources)} file{'s' * (len(sources) != 1)}). Effect: row A − row B of "
             "the dev metric in points (× 100), paired seed by seed over the seeds both rows "
             "finished, with its 95% Student-t interval over the paired differences. "
             "Verdict: supported (the interval excludes 0 in the paper's direction; for ≈ "
             "claims, it lies within the stated margin), contradicted (it excludes 0 the other "
             "way), not distinguishable (it contains 0: its half-width and the seeds the "
             "observed effect would need are given). Hao et al.'s rows come from "
             "the landscape_findings experiment: each measurement in its own unit (points where "
             "it is a dev metric), signed so that positive is the paper's direction. Mosbach, "
             "Zhang and Dodge et al.'s rows come from the stability experiment, each decided "
             "by the test docs/figures/stability/PLAN.md names (a failure-rate difference's "
             "Newcombe interval, Levene's test, Welch's interval, the grid's F interval), "
             "with its own p-value.", "",
             "Column *run*: the folder of the results file(s), which tells apart two "
             "measurements of one claim (say, two pre-training budgets). A claim across "
             "two heads' tables pairs the tables of one work session (written on one "
             f"machine without a reboot within {SESSION_HOURS} hours, as each table records; "
             "for tables from before that record, the folder their output folders sit in) "
             "with each other, and another session's table only where it has no partner of "
             "its own.", ""]
    lines += _head(claim_verdicts.head(claims, measured, plans))
    lines += ["", "## Every measurement", "",
              "| claim | paper | the paper's number | task | run | n | effect [95% interval] "
              "| verdict |", "|---|---|---|---|---|---|---|---|"]
    for c in claims:
        for r in measured[c["id"]] or [None]:
            if r is None:
                lines.append(f"| {c['statement']} | {c['paper']} | {c['paper_number']} | – | "
                             "– | 0 | – | not measured |")
                continue
            lines.append(f"| {_what(c, r)} | {c['paper']} | {c['paper_number']} | "
                         f"{r['task']} | {_run_names(r['sources'])} | {r['n']} | "
                         f"{_effect(r)} | **{r['verdict']}** |")
    lines += ["", "## Each claim", ""]
    for c in claims:
        lines.append(f"### `{c['id']}`: {c['statement']}")
        lines.append("")
        lines.append(f"{c['paper']}; the paper's number: {c['paper_number']}. Direction: "
                     + {"+": "row A > row B", "-": "row A < row B",
                        "≈": "row A ≈ row B"}[c["direction"]] + ".")
        if not measured[c["id"]]:
            why = f" Why: {c['why_unmeasured']}." if c.get("why_unmeasured") else ""
            lines += ["", "**Not measured**: no table in the inputs has both rows "
                      f"({_describe_side(c['a'])}" + (f"; {_describe_side(c['b'])}"
                                                       if c["b"] else "") + ")." + why, ""]
            continue
        for r in measured[c["id"]]:
            f = _formatter(r)
            unit = "points" if r.get("points", True) else r["metric"]
            lines += ["", f"- task {r['task']}: A = {r['a']}" + (f", B = {r['b']}" if r["b"]
                                                                  else "")
                      + (f"; dev {r['metric']}" if r.get("points", True) else
                         f"; unit {r['metric']}") + f"; seeds {', '.join(r['seeds']) or '–'} (n = "
                      f"{r['n']}); effect {f(r['difference'])} {unit}"
                      + ("" if r["low"] is None else
                         f", 95% interval [{f(r['low'])}, {f(r['high'])}]")
                      + ("" if r["std"] is None else
                         f", std of the paired differences {f(r['std'], '')}")
                      + f". **{r['verdict']}**: {r['note']}."]
            lines += [f"  - experiment: {_settings(e)}" for e in r["experiments"] if e]
            for command in r["commands"]:
                lines.append(f"  - command: `{command}`")
            lines.append("  - from " + ", ".join(f"`{s}`" for s in r["sources"]))
            if r.get("also_in"):
                lines.append("  - the same numbers (to 0.01 points) also in " + ", ".join(
                    f"`{s}`" for s in r["also_in"]))
        lines.append("")
    return "\n".join(lines) + "\n", measured


def _what(claim, result):
    """A measurement's claim as the tables name it: a landscape measure after its claim."""
    if result["b"] or result["a"] == claim["id"]:
        return claim["statement"]
    return f"{claim['statement']} — {result['a']}"


def _effect(result):
    """The effect and its interval in points (or the measurement's own unit)."""
    f = _formatter(result)
    unit = "" if result.get("points", True) else f" {result['metric']}"
    interval = "" if result["low"] is None else f" [{f(result['low'])}, {f(result['high'])}]"
    return f"{f(result['difference'])}{interval}{unit}"


def _p(p):
    return "–" if p is None else f"{p:.2g}"


def _head(rows):
    """The report's head: one row per claim (claim_verdicts.head's rows)."""
    family = sum(row["p"] is not None for row in rows)
    after = {}
    for row in rows:
        after[row["after_holm"]] = after.get(row["after_holm"], 0) + 1
    lines = [
        "## One row per claim", "",
        "The verdict that counts for each claim, how many measurements of it exist, and its "
        "test corrected for the number of claims tested; [every measurement](#every-"
        "measurement) follows.", "",
        "- *which counts*: the confirmation planned before it ran where there is one (its "
        "PLAN.md, written beside the runs before they existed), else the primary test a plan "
        "fixed before it ran (the latest such plan), else the measurement with the most "
        "seeds (of several that large, the first listed below).",
        "- *tries*: how many measurements of the claim exist (the same runs found in two "
        "tables are one).",
        "- *p*: the counted measurement's p-value, the level at which its interval gives its "
        "verdict: scipy's one-sample Student t-test of the paired differences over seeds "
        "(`scipy.stats.ttest_1samp`, the test behind the 95% intervals), two-sided against "
        "0; for a ≈ claim the smaller of that (t) and the equivalence test within its "
        "margin (TOST: two one-sided t-tests, p twice the larger one, so that p < 0.05 "
        "exactly when the 95% interval lies within the margin).",
        f"- *Holm p*: the p-values of the {family} claims that have one, adjusted together "
        "by Holm's step-down method (`statsmodels.stats.multitest.multipletests`, method "
        "`holm`), which keeps the chance that any of their separations (supported or "
        "contradicted) is false at 5%. It corrects across claims, not across one claim's "
        "tries: those are why a planned confirmation counts over them.",
        "- *after Holm*: the verdict where its Holm p is below 0.05, else not "
        "distinguishable: " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(
            after.items()) if verdict != claim_verdicts.NO_VERDICT) + "."
        + (f" {after[claim_verdicts.NO_VERDICT]} claims are {claim_verdicts.NO_VERDICT}: "
           "their plan measures them once (one pair of runs, one campaign) and decides "
           "nothing; they are outside Holm's family." if claim_verdicts.NO_VERDICT in after
           else ""), "",
        "| claim | paper | task | run | n | effect [95% interval] | verdict | which counts "
        "| tries | p | Holm p | after Holm |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        c, r = row["claim"], row["result"]
        if r is None:
            lines.append(f"| {c['statement']} | {c['paper']} | – | – | 0 | – | not measured "
                         "| – | 0 | – | – | not measured |")
            continue
        plan = row["plan"]
        runs = " + ".join(plan.runs) if plan else _run_names(r["sources"])
        which = row["why"] + (f" (`{plan.plan}`)" if plan else "")
        test = f" ({row['test']})" if c["direction"] == "≈" and row["test"] else ""
        lines.append(f"| {_what(c, r)} | {c['paper']} | {r['task']} | {runs} | {r['n']} | "
                     f"{_effect(r)} | **{r['verdict']}** | {which} | {row['tries']} | "
                     f"{_p(row['p'])}{test} | {_p(row['p_holm'])} | **{row['after_holm']}** |")
    return lines


def _run_names(files):
    """The folders that hold a measurement's results files, by their own names."""
    return " + ".join(os.path.basename(os.path.dirname(os.path.abspath(f))) for f in files)


def _describe_side(side):
    def shown(value):  # None in a tuple of accepted values: tables that predate the setting
        return "|".join("unrecorded" if v is None else str(v) for v in value) if isinstance(
            value, tuple) else value

    where = ", ".join(f"{k}={shown(v)}" for k, v in side["where"].items())
    tasks = f" on {'/'.join(side['task'])}" if side["task"] else ""
    among = f" of the {side['init']} rows" if side["init"] else ""
    return (f"{side['tool']} row {side['row']!r}{among}{tasks}"
            + (f" with {where}" if where else ""))


def parser(argv):
    """The options (argv[0]: the program's name), parsed as absl flags (command.py)."""
    p = argparse.ArgumentParser(prog=argv[0], description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", required=True, help="folders (searched recursively) "
                   "or JSON files the table tools wrote; commas also separate them")
    p.add_argument("--output", required=True, help="the Markdown report to write")
    return p


def parse_args(argv):
    """The flags of argv (argv[0]: the program's name)."""
    return command_lib.parse_with_flags(parser(argv), argv)


def run(argv):
    """The findings report (argv[0]: the program's name); returns the exit status. Bad
    --runs are one line `kerasbert: error: ...` and status 2 (errors.guarded)."""
    return command_lib.run_parser(parser(argv), main, argv)


def main(args):
    """Reads --runs, writes the report to --output and prints the count of each verdict."""
    sources = find_sources([x for item in args.runs for x in item.split(",") if x])
    text, measured = report(sources)
    folder = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(folder, exist_ok=True)
    atomic_write_text(args.output, text)
    counts = {}
    for results in measured.values():
        for r in results or [{"verdict": "not measured"}]:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(f"findings: {args.output}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 0
