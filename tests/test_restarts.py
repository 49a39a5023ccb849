"""Restarts in the experiments' tables (kerasbert/restarts.py, kerasbert/experiments/:
strategies, ner_table, model_size, pretraining_ablation; the sweep): the arithmetic and
the Markdown of hand-made finished runs, checked exactly, and the resume behaviour."""

import json
import math
import os

import numpy as np
import pytest
from scipy import stats as sp

from kerasbert import plugins, restarts, run_folder, sweep
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.experiments import model_size, ner_table, pretraining_ablation, strategies


def fake_run(config, metrics, sentences=None):
    """What a finished run leaves that the tables read: its config, metrics.json and, for
    tagging, `valid_predictions.txt` (`word gold predicted`)."""
    os.makedirs(config.output_dir, exist_ok=True)
    run_folder.write_config(config.output_dir, config)
    if sentences is not None:
        with open(os.path.join(config.output_dir, "valid_predictions.txt"), "w") as f:
            for gold, predicted in sentences:
                f.writelines(f"w {g} {p}\n" for g, p in zip(gold, predicted))
                f.write("\n")
    run_folder.write_metrics(config.output_dir, metrics)


def no_training(config):
    raise AssertionError(f"{config.output_dir} was trained, but it had finished before")


def half_t(values):
    return sp.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values))


def test_experiment_names_the_encoder_the_runs_loaded(monkeypatch):
    from kerasbert.model import encoders

    monkeypatch.setattr(encoders, "default_checkpoint", lambda: "/pkg/minilm/model")
    shown = restarts.experiment(RunConfig(task="sst2", output_dir="r"), [1, 2])
    assert shown["init_checkpoint"] == "/pkg/minilm/model" and "model_size" not in shown
    assert shown["seeds"] == [1, 2] and shown["task"] == "sst2"
    monkeypatch.setattr(encoders, "default_checkpoint", lambda: None)  # no package: random
    shown = restarts.experiment(RunConfig(task="sst2", output_dir="r"), [1])
    assert (shown["init_checkpoint"], shown["model_size"]) == ("random", "tiny")
    shown = restarts.experiment(RunConfig(task="sst2", output_dir="r", init_checkpoint="random",
                                          model_size="2/64/2"), [1])
    assert shown["model_size"] == "2/64/2"
    assert "model_size" not in restarts.experiment(
        RunConfig(task="sst2", output_dir="r", init_checkpoint="/my/bert"), [1])


# --- Seeds and baselines --------------------------------------------------------------------

def test_tables_record_the_machine_boot_and_time_they_were_written(tmp_path):
    """comparison.json (and every table write_outputs writes) says where it was measured:
    findings.py's "one session" test reads it."""
    import datetime
    import socket

    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    restarts.write_outputs(str(tmp_path), "comparison", {}, "text", "cmd", {})
    with open(tmp_path / "comparison.json") as f:
        where = json.load(f)["measured_on"]
    written = datetime.datetime.fromisoformat(where["utc"])
    assert before <= written <= datetime.datetime.now(datetime.timezone.utc)
    assert where["host"] == socket.gethostname()
    if os.path.exists("/proc/sys/kernel/random/boot_id"):
        with open("/proc/sys/kernel/random/boot_id") as f:
            assert where["boot_id"] == f.read().strip()


def test_seeds_parse_and_bad_ones_are_refused():
    assert restarts.parse_seeds(None, 7) == [7]
    assert restarts.parse_seeds(["1", "2", " 3"], 7) == [1, 2, 3]
    assert restarts.parse_seeds("4,5", 7) == [4, 5]
    with pytest.raises(InputError, match="--seeds: 'x' is not an integer"):
        restarts.parse_seeds("1,x", 7)
    with pytest.raises(InputError, match="--seeds: seed 1 is given twice"):
        restarts.parse_seeds("1,1", 7)
    assert restarts.baseline_label(["5e-05", "2e-05"], None) == "5e-05"
    assert restarts.baseline_label(["5e-05", "2e-05"], "2e-5") == "2e-05"
    with pytest.raises(InputError, match="--baseline=nope: no such row; the rows are: a, b"):
        restarts.baseline_label(["a", "b"], "nope")


# --- compare_strategies on hand-made runs ---------------------------------------------------

MRPC = {  # strategy -> dev f1 per seed 1, 2, 3
    "fine-tune only": [0.80, 0.82, 0.84],
    "frozen only": [0.70, 0.75, 0.71],
    "stack-and-finetune": [0.83, 0.84, 0.88],
}


def _strategies(tmp_path):
    tool = strategies
    task = plugins.registry().task("mrpc")
    base = RunConfig(task="mrpc", head="bimpm", output_dir=str(tmp_path / "cmp"),
                     frozen_epochs=2.0, num_train_epochs=2.0)
    return tool, task, tool.plan(base, task, [1, 2, 3])


def test_compare_strategies_curves_show_the_metric_the_table_reports():
    """A NER run's history has token accuracy beside entity F1: the curves show F1 (what the
    table reports); a history without the task's metric falls back to accuracy."""
    tool = strategies
    conll = plugins.registry().task("conll2003")
    ner_row = {"phase": "frozen", "epoch": "1", "dev_precision": "0.53", "dev_f1": "0.11",
               "dev_accuracy": "0.84"}
    assert tool.curve_metric(conll, ner_row) == "f1"
    assert tool.curve_metric(conll, {"dev_accuracy": "0.84"}) == "accuracy"
    assert tool.curve_metric(plugins.registry().task("stsb"), {"dev_pearson": "0.7"}) == "pearson"


def test_compare_strategies_table_over_seeds_is_exact(tmp_path):
    tool, task, rows = _strategies(tmp_path)
    assert [name for name, _ in rows] == list(MRPC)
    stack = rows[2][1][2]
    assert (stack.seed, stack.frozen_epochs, stack.num_train_epochs) == (2, 2.0, 2.0)
    assert stack.output_dir == str(tmp_path / "cmp" / "stack-and-finetune" / "seed-2")
    assert rows[0][1][1].frozen_epochs == 0.0 and rows[1][1][1].num_train_epochs == 0.0
    for name, runs in rows:
        for seed, config in runs.items():
            fake_run(config, {"f1": MRPC[name][seed - 1], "accuracy": 0.5})
    restarts.run_all([c for _, runs in rows for c in runs.values()], no_training,
                     log=lambda _: None)
    table = tool.table(rows, task)
    assert table["interval_method"] == "t" and table["baseline"] == "fine-tune only"
    ft, frozen, stack = table["rows"]
    assert (ft["n"], ft["seeds"], ft["values"]) == (3, [1, 2, 3], MRPC["fine-tune only"])
    assert ft["mean"] == pytest.approx(0.82) and ft["std"] == pytest.approx(0.02)
    assert (ft["min"], ft["max"]) == (0.80, 0.84)
    assert ft["interval"]["low"] == pytest.approx(0.82 - half_t([0.80, 0.82, 0.84]))
    assert ft["difference"] is None
    # stack − fine-tune, seed by seed: 0.03, 0.02, 0.04
    d = stack["difference"]
    assert (d["n"], d["seeds"]) == (3, [1, 2, 3])
    assert d["difference"] == pytest.approx(0.03) and d["std"] == pytest.approx(0.01)
    assert d["high"] - d["difference"] == pytest.approx(half_t([0.03, 0.02, 0.04]))
    assert d["bootstrap"] is None
    text = restarts.markdown(table, row_header="strategy")
    assert "Student-t over seeds (these runs keep no per-example dev scores" in text
    # 100·: mean 82.0, std 2.0, half-width 4.303·2/√3 = 4.97; stack − ft 3.0 ± 2.48
    assert "| fine-tune only | 3 | 82.0 ± 2.0 (80.0–84.0) | [77.0, 87.0] | baseline |" in text
    assert "| stack-and-finetune | 3 | 85.0 ± 2.6 (83.0–88.0) | [78.4, 91.6] | +3.0 [+0.5, +5.5] |" in text
    # --baseline: the same pairs seen from the other side
    other = tool.table(rows, task, baseline="stack-and-finetune")
    assert other["rows"][0]["difference"]["difference"] == pytest.approx(-0.03)


def test_only_the_missing_seed_is_run_and_other_settings_are_refused(tmp_path):
    tool, task, rows = _strategies(tmp_path)
    configs = [c for _, runs in rows for c in runs.values()]
    for name, runs in rows:
        for seed, config in runs.items():
            if (name, seed) != ("frozen only", 3):
                fake_run(config, {"f1": MRPC[name][seed - 1]})
    ran = []

    def execute(config):
        ran.append((os.path.basename(os.path.dirname(config.output_dir)), config.seed))
        fake_run(config, {"f1": 0.5})

    restarts.run_all(configs, execute, log=lambda _: None)
    assert ran == [("frozen_only", 3)]
    restarts.run_all(configs, no_training, log=lambda _: None)  # all finished now
    # a seed missing from one row: the paired difference uses the seeds both finished
    os.remove(run_folder.path(rows[1][1][3].output_dir, run_folder.METRICS))
    table = tool.table(rows, task)
    frozen = table["rows"][1]
    assert frozen["n"] == 2 and frozen["failed"] == [3]
    assert frozen["difference"]["seeds"] == [1, 2]
    assert frozen["difference"]["difference"] == pytest.approx(((0.70 - 0.80) + (0.75 - 0.82)) / 2)
    assert "| frozen only | 2 (1 not finished) |" in restarts.markdown(table)
    # the same folder asked for with another learning rate: refused before any training
    changed = [dataclasses_replace(c, learning_rate=1e-3) for c in configs]
    with pytest.raises(InputError, match=r"made with learning_rate=2e-05, now 0\.001"):
        restarts.run_all(changed, no_training, log=lambda _: None)
    # a run made before a setting existed was made with its default: asked for with
    # another value it is refused, with the default it is reused
    configs = [c for c in configs if run_folder.is_finished(c.output_dir)
               and c.num_train_epochs > 0]  # the rows with a fine-tune phase
    for config in configs:
        saved = run_folder.read_config(config.output_dir)
        del saved["head_learning_rate"]
        run_folder.atomic_write_json(run_folder.path(config.output_dir, run_folder.RUN_CONFIG),
                                     saved)
    restarts.run_all(configs, no_training, log=lambda _: None)
    with pytest.raises(InputError, match=r"made with head_learning_rate=None, now 0\.001"):
        restarts.run_all([dataclasses_replace(c, head_learning_rate=1e-3) for c in configs],
                         no_training, log=lambda _: None)


def test_compare_strategies_adds_lora_and_bitfit_rows_with_their_costs(tmp_path):
    tool = strategies
    task = plugins.registry().task("mrpc")
    base = RunConfig(task="mrpc", head="bimpm", output_dir=str(tmp_path / "cmp"),
                     frozen_epochs=1.0, num_train_epochs=2.0, lora_rank=4, lora_alpha=16.0)
    names = tool.chosen_strategies(["all"])
    assert names == ["fine-tune only", "frozen only", "stack-and-finetune",
                     "fine-tune only, same steps", "fine-tune only, head lr", "LoRA",
                     "stack-and-LoRA", "BitFit"]
    for name in (tool.SAME_STEPS, tool.HEAD_LR):  # plans checked below; not in the cost table
        names.remove(name)
    assert tool.chosen_strategies(["bitfit", "paper"]) == [*tool.PAPER, "BitFit"]
    with pytest.raises(InputError, match="--strategies=lora,adapters: unknown strategy "
                       "'adapters'; choose paper, all or from fine_tune, "):
        tool.chosen_strategies(["lora", "adapters"])
    rows = dict(tool.plan(base, task, [1, 2], names, peft_learning_rate=1e-3))
    lora, stack_lora, bitfit, plain = (rows[n][1] for n in (
        "LoRA", "stack-and-LoRA", "BitFit", "fine-tune only"))
    assert (lora.lora_rank, lora.lora_alpha, lora.learning_rate, lora.frozen_epochs) == (
        4, 16.0, 1e-3, 0.0)
    assert dict(tool.plan(dataclasses_replace(base, lora_rank=0, lora_alpha=None), task, [1],
                          ["LoRA"]))["LoRA"][1].lora_rank == tool.DEFAULT_LORA_RANK == 8
    assert (stack_lora.frozen_epochs, stack_lora.num_train_epochs) == (1.0, 2.0)
    # the equal-budget baseline fine-tunes for the frozen and the fine-tuning epochs together
    same = dict(tool.plan(base, task, [1], [tool.SAME_STEPS]))[tool.SAME_STEPS][1]
    assert (same.frozen_epochs, same.num_train_epochs, same.trainable_encoder) == (0.0, 3.0, "all")
    assert same.output_dir == str(tmp_path / "cmp" / "fine-tune_only_same_steps" / "seed-1")
    assert same.head_learning_rate is None
    # ... and so does the head-rate row, its head at the frozen phase's rate (1e-3) unless
    # --head_learning_rate says otherwise; a frozen-only row has no fine-tune phase for it
    head_lr = dict(tool.plan(base, task, [1], [tool.HEAD_LR]))[tool.HEAD_LR][1]
    assert (head_lr.frozen_epochs, head_lr.num_train_epochs, head_lr.learning_rate,
            head_lr.head_learning_rate) == (0.0, 3.0, 2e-5, 1e-3)
    assert head_lr.output_dir == str(tmp_path / "cmp" / "fine-tune_only_head_lr" / "seed-1")
    own = dict(tool.plan(dataclasses_replace(base, head_learning_rate=5e-4), task, [1],
                         [tool.HEAD_LR, "frozen only", "stack-and-finetune"]))
    assert [own[n][1].head_learning_rate for n in own] == [5e-4, None, 5e-4]
    assert tool.budget_line(list(own.items()), 1).endswith(
        "fine-tune epochs 2 (lr 2e-05). Head lr 0.0005 in: fine-tune only, head lr, "
        "stack-and-finetune.")
    assert (bitfit.trainable_encoder, bitfit.lora_rank, bitfit.learning_rate) == (
        "bitfit", 0, 1e-3)
    assert (plain.lora_rank, plain.lora_alpha, plain.learning_rate) == (0, None, 2e-5)
    assert stack_lora.output_dir == str(tmp_path / "cmp" / "stack-and-LoRA" / "seed-1")
    # The header gives full fine-tuning's rate (2e-5, the task's) and the parameter-efficient
    # rows' own (1e-3), not stack-and-LoRA's as "fine-tune" (the budget row: both phases).
    plans = tool.plan(base, task, [1, 2], ["fine-tune only", "stack-and-LoRA"], 1e-3)
    assert tool.budget_line(plans, 1) == (
        "Data bundled sample (max_train_examples None); frozen epochs 1 (lr 0.001), fine-tune "
        "epochs 2 (lr 2e-05). stack-and-LoRA: fine-tune lr 0.001, LoRA rank 4, alpha 16, "
        "targets query_value.")
    assert tool.budget_line(tool.plan(base, task, [1], ["BitFit"], 1e-3), 1).endswith(
        "fine-tune epochs 2. BitFit: fine-tune lr 0.001.")
    # history.csv: (phase, step, cumulative seconds, eval seconds, trained parameters)
    history = {"fine-tune only": [("finetune", 10, 12.0, 2.0, 1000), ("finetune", 20, 23.0, 1.0, 1000)],
               "frozen only": [("frozen", 10, 6.0, 1.0, 50)],
               "stack-and-finetune": [("frozen", 10, 6.0, 1.0, 50), ("finetune", 20, 17.0, 1.0, 1000)],
               "LoRA": [("finetune", 10, 9.0, 1.0, 120), ("finetune", 20, 17.0, 2.0, 120)],
               "stack-and-LoRA": [("frozen", 10, 6.0, 1.0, 50), ("finetune", 20, 13.0, 1.0, 120)],
               "BitFit": [("finetune", 10, 9.0, 1.0, 90), ("finetune", 20, 16.0, 1.0, 90)]}
    for name, runs in rows.items():
        for seed, config in runs.items():
            fake_run(config, {"f1": 0.8 + 0.01 * seed})
            # peak RSS: the frozen phase 500 MB, fine-tuning 900 (+ 100 for seed 2), LoRA
            # and BitFit 600; "fine-tune only" seed 2 is an older run that has no column.
            run_folder.write_run_history(config.output_dir, [
                {"phase": p, "epoch": i + 1, "step": st, "seconds": sec + seed - 1,
                 "eval_seconds": ev, "trained_parameters": n,
                 **({} if (name, seed) == ("fine-tune only", 2) else {"peak_rss_mb": (
                     500.0 if p == "frozen" else 900.0 + 100 * (seed - 1) if n == 1000
                     else 600.0)})}
                for i, (p, st, sec, ev, n) in enumerate(history[name])])
    table = tool.table(list(rows.items()), task)
    assert [r["trained_parameters"] for r in table["rows"]] == [1000, 50, 1000, 120, 120, 90]
    # fine-tune only, seed 1: (12 − 0 − 2) + (23 − 12 − 1) = 20 s over 20 steps = 1.0; seed 2's
    # first epoch is 1 s longer: 21 / 20 = 1.05; mean 1.025. frozen only: 5/10, 6/10. The
    # stack rows count their fine-tune epoch only: (17 − 6 − 1) / 10, (13 − 6 − 1) / 10.
    # LoRA: (8 + 6) / 20, (9 + 6) / 20; BitFit: (8 + 6) / 20, (9 + 6) / 20.
    assert [r["step_seconds"] for r in table["rows"]] == pytest.approx(
        [1.025, 0.55, 1.0, 0.725, 0.6, 0.725])
    text = restarts.markdown(table, row_header="strategy", extra=tool.cost_columns(
        tool.costs(list(rows.items()))))
    # the run's peak is its highest phase's; the row's the mean over the seeds that have one
    assert [r["peak_rss_mb"] for r in table["rows"]] == [900, 500, 950, 600, 600, 600]
    assert "| strategy | trained params | s/step | peak RSS MB | n |" in text
    assert "| fine-tune only | 1,000 | 1.025 | 900 | 2 |" in text
    assert "| stack-and-finetune | 1,000 | 1.000 | 950 | 2 |" in text
    assert "| stack-and-LoRA | 120 | 0.600 | 600 | 2 |" in text


def dataclasses_replace(config, **changes):
    import dataclasses

    return dataclasses.replace(config, **changes)


# --- ner_table: per-sentence scores, the bootstrap ------------------------------------------

SENTENCES = [  # (gold, predicted) per sentence; the tagger row gets them all right but one
    (["B-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),
    (["B-LOC", "O"], ["B-LOC", "O"]),
    (["O", "B-ORG"], ["O", "O"]),
    (["B-MISC"], ["B-MISC"]),
]


def _worse(sentences, k):
    """The first k sentences' predictions turned to O (entities missed)."""
    return [(g, ["O"] * len(p) if i < k else p) for i, (g, p) in enumerate(sentences)]


def test_entity_counts_sum_to_conlleval_f1():
    from kerasbert.tasks.conll import entity_counts, entity_metrics

    sentences = _worse(SENTENCES, 1) + [(["B-PER", "O"], ["B-LOC", "B-PER"])]
    counts = entity_counts(sentences)
    assert counts.tolist() == [[0, 0, 1], [1, 1, 1], [0, 0, 1], [1, 1, 1], [0, 2, 1]]
    f1 = entity_metrics([g for g, _ in sentences], [p for _, p in sentences])["f1"]
    tp, predicted, gold = counts.sum(axis=0)
    assert 2 * tp / (predicted + gold) == pytest.approx(f1)


def test_ner_table_bootstraps_over_seeds_and_sentences(tmp_path):
    from kerasbert.tasks.conll import entity_metrics

    tool = ner_table
    task = plugins.registry().task("conll2003")
    base = RunConfig(task="conll2003", output_dir=str(tmp_path / "ner"), num_train_epochs=1.0)
    rows = tool.plan(base, task, [1, 2])
    assert [label for label, _ in rows][:2] == ["Fine-tuning", "Feature-based: embeddings"]
    assert rows[1][1][2].head_options["feature_bilstm_layers"] == "embeddings"
    assert rows[1][1][2].learning_rate == base.frozen_learning_rate
    for i, (_, runs) in enumerate(rows):
        for seed, config in runs.items():
            sentences = _worse(SENTENCES, (i + seed) % 3) * 5
            f1 = entity_metrics([g for g, _ in sentences], [p for _, p in sentences])["f1"]
            fake_run(config, {"f1": f1}, sentences)
    table = tool.table(rows, task)
    assert table["interval_method"] == "bootstrap"
    first, second = table["rows"][:2]
    assert first["interval"]["method"] == "bootstrap"
    assert first["interval"]["low"] <= first["mean"] <= first["interval"]["high"]
    # the paired bootstrap draws the same sentences for both rows: it repeats exactly
    assert second["difference"]["bootstrap"] == tool.table(rows, task)["rows"][1][
        "difference"]["bootstrap"]
    assert second["difference"]["bootstrap"]["difference"] == pytest.approx(
        second["difference"]["difference"])
    assert "percentile bootstrap over seeds and dev examples" in restarts.markdown(table)
    # a predictions file that does not score to the run's F1 is not its final one: t only
    config = rows[0][1][1]
    run_folder.write_metrics(config.output_dir, {"f1": 0.123})
    assert tool.table(rows, task)["interval_method"] == "t"


def test_ner_table_crf_rows_vary_head_context_and_learning_rate(tmp_path):
    tool = ner_table
    task = plugins.registry().task("conll2003")
    base = RunConfig(task="conll2003", output_dir=str(tmp_path / "ner"), num_train_epochs=1.0,
                     learning_rate=5e-5, frozen_learning_rate=1e-3,
                     feature_cache_dir=str(tmp_path / "cache"))
    flags_of = {"bilstm_crf": {"bilstm_crf_lstm_units": 16, "bilstm_crf_frozen": False},
                "tagger_crf": {"tagger_crf_constraints": "none"}}
    rows = tool.plan(base, task, [1, 2], tool.crf_rows("max"), flags_of)
    assert [label for label, _ in rows] == [
        "Softmax tagger", "tagger_crf", "Softmax tagger, context max", "tagger_crf, context max",
        "Feature-based: bilstm_crf (frozen)"]
    configs = [runs[2] for _, runs in rows]
    assert [(c.head, c.document_context, c.learning_rate) for c in configs] == [
        ("tagger", "0", 5e-5), ("tagger_crf", "0", 5e-5), ("tagger", "max", 5e-5),
        ("tagger_crf", "max", 5e-5), ("bilstm_crf", "0", 1e-3)]
    assert [c.feature_cache_dir for c in configs] == [None] * 4 + [str(tmp_path / "cache")]
    # the row's own option wins over the head's flag; the other flags pass through
    assert configs[4].head_options == {"bilstm_crf_lstm_units": 16, "bilstm_crf_frozen": True}
    assert configs[1].head_options == {"tagger_crf_constraints": "none"}
    assert configs[3].output_dir == str(tmp_path / "ner" / "tagger_crf-context-max" / "seed-2")
    assert len({c.output_dir for _, runs in rows for c in runs.values()}) == 10


def test_ner_table_experiment_names_the_feature_rows_head_and_options(tmp_path):
    tool = ner_table
    task = plugins.registry().task("conll2003")
    base = RunConfig(task="conll2003", output_dir=str(tmp_path / "ner"), num_train_epochs=3.0,
                     learning_rate=1e-4, frozen_learning_rate=1e-3, init_checkpoint="random")
    flags_of = {"feature_bilstm": {"feature_bilstm_lstm_units": 256,
                                   "feature_bilstm_layers": "concat_last_four"}}
    rows = tool.plan(base, task, [1, 2], tool.table7_rows(["last", "embeddings"]), flags_of)
    tuned, frozen = rows[0][1][1], rows[1][1][1]
    experiment = tool.table_experiment(tuned, frozen, [1, 2])
    assert (experiment["head"], experiment["learning_rate"]) == ("tagger", 1e-4)
    assert experiment["feature_head"] == "feature_bilstm"
    assert experiment["feature_learning_rate"] == 1e-3
    # the layer choice differs from row to row: it is in the row labels, not here
    assert experiment["feature_bilstm_lstm_units"] == 256
    assert "feature_bilstm_layers" not in experiment
    assert experiment["seeds"] == [1, 2]


def test_ner_table_table7_layers_pick_the_feature_rows():
    tool = ner_table
    rows = tool.table7_rows(["last", "embeddings"])
    assert [r.label for r in rows] == ["Fine-tuning", "Feature-based: last",
                                       "Feature-based: embeddings"]
    assert rows[1].options == (("feature_bilstm_layers", "last"),)
    with pytest.raises(InputError, match=r"--table7_layers=last,top_two: unknown top_two; "
                                         r"choose from embeddings, "):
        tool.table7_rows(["last", "top_two"])


def test_ner_table_crf_rows_need_document_context():
    with pytest.raises(InputError, match="--document_context must be N > 0 or max"):
        ner_table.crf_rows("0")


# --- the sweep: --seeds, and its restarts table ---------------------------------------------

def test_sweep_takes_seeds_and_writes_the_restarts_table(tmp_path):
    base = RunConfig(task="rte", output_dir=str(tmp_path / "sweep"), init_checkpoint="random",
                     model_size="2/32/2", seed=7)
    plan = sweep.plan_sweep(base, (1e-3, 2e-3), 1, seeds="11,12,13")
    assert [(p.name, p.seed) for p in plan] == [
        ("lr0.001-r0", 11), ("lr0.001-r1", 12), ("lr0.001-r2", 13),
        ("lr0.002-r0", 11), ("lr0.002-r1", 12), ("lr0.002-r2", 13)]
    with pytest.raises(InputError, match="--num_restarts=2: --seeds gives 3 restarts"):
        sweep.plan_sweep(base, (1e-3,), 2, seeds="11,12,13")
    dev = {11: (0.60, 0.55), 12: (0.62, 0.58), 13: (0.70, 0.60)}

    def execute(config, registry=None):
        os.makedirs(config.output_dir, exist_ok=True)
        config.save(os.path.join(config.output_dir, "run_config.json"))
        value = dev[config.seed][0 if config.learning_rate == 1e-3 else 1]
        run_folder.write_run_history(config.output_dir, [
            {"phase": "finetune", "epoch": 1, "step": 1, "seconds": 1.0,
             "dev_accuracy": value}])
        run_folder.write_metrics(config.output_dir, {"accuracy": value})
        return {"accuracy": value}

    summary = sweep.run_sweep(base, "1e-3,2e-3", 1, execute=execute, log=lambda _: None,
                              seeds="11,12,13", baseline="1e-3")
    assert summary["seeds"] == [11, 12, 13]
    table = summary["restarts"]
    assert [r["label"] for r in table["rows"]] == ["0.001", "0.002"]
    d = table["rows"][1]["difference"]  # 0.002 − 0.001: −0.05, −0.04, −0.10
    assert d["difference"] == pytest.approx(-19 / 300)
    assert d["high"] == pytest.approx(-19 / 300 + half_t([-0.05, -0.04, -0.10]))
    saved = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert saved["restarts"]["rows"][1]["difference"]["n"] == 3
    assert "## Over restarts: intervals and paired differences" in (
        tmp_path / "sweep" / "report.md").read_text()
    again = sweep.run_sweep(base, "1e-3,2e-3", 1, execute=no_training, log=lambda _: None,
                            seeds="11,12,13", baseline="1e-3")
    assert again["restarts"] == table


# --- model_size_grid and pretraining_ablation -----------------------------------------------

def test_model_size_grid_over_seeds(tmp_path, capsys):
    from kerasbert.model import encoders

    tool = model_size
    task = plugins.registry().task("rte")
    base = RunConfig(task="rte", output_dir=str(tmp_path / "grid"), num_train_epochs=1.0)
    rows = tool.plan_seeds(tool.plan_grid(base, ["2/32/2", "2/48/2"]), task, [1, 2])
    assert rows[1][1][2].output_dir == str(tmp_path / "grid" / "2-48-2" / "seed-2")
    values = {"2/32/2": [0.50, 0.54], "2/48/2": [0.56, 0.57]}
    for label, runs in rows:
        encoder = encoders.random_encoder(label, max_position=64, seed=0)
        for seed, config in runs.items():
            fake_run(config, {"accuracy": values[label][seed - 1]})
            encoders.save_encoder(encoder.backbone, encoder.vocab_file, True, config.output_dir)
    restarts.run_all([c for _, runs in rows for c in runs.values()], no_training,
                     log=lambda _: None)
    tool.write_outputs(base.output_dir, task, rows, [1, 2])
    saved = json.loads((tmp_path / "grid" / "grid.json").read_text())
    small, large = saved["tables"]["rte"]["rows"]
    assert (small["size"], small["init"]) == ("2/32/2", "random")
    assert small["parameters"] < large["parameters"]
    assert large["difference"]["difference"] == pytest.approx(0.045)  # (0.06 + 0.03) / 2
    text = (tmp_path / "grid" / "grid.md").read_text()
    assert "| 2/32/2 | 2/32/2 | random |" in text and "| 0.5200 ± 0.0283 (0.5000–0.5400) |" in text
    assert len((tmp_path / "grid" / "grid.csv").read_text().splitlines()) == 5  # 4 runs
    assert (tmp_path / "grid" / "grid.png").stat().st_size > 1000


def test_pretraining_ablation_tables_per_task(tmp_path):
    tool = pretraining_ablation
    results = []
    for i, (label, _, _) in enumerate(tool.VARIANTS.values()):
        runs = {}
        for seed in (1, 2, 3):
            out = str(tmp_path / f"v{i}" / f"seed-{seed}")
            fake_run(RunConfig(task="sst2", output_dir=out, seed=seed),
                     {"accuracy": 0.8 - 0.05 * i + 0.01 * seed})
            runs[seed] = out
        results.append({"variant": label, "pretraining": None, "tasks": {"sst2": {
            "metric": "accuracy", "values": [0.8 - 0.05 * i + 0.01 * s for s in (1, 2, 3)],
            "seeds": [1, 2, 3], "runs": runs}}})
    tables = tool.restarts_tables(results, ["sst2"])
    rows = tables["sst2"]["rows"]
    assert rows[-1]["label"] == "No pre-training (random init)"
    assert rows[-1]["difference"]["difference"] == pytest.approx(-0.2)
    assert rows[-1]["difference"]["std"] == pytest.approx(0.0, abs=1e-12)
    assert "| BERT (MLM + NSP) | 82.0 ± 1.0 |" in tool.table(results, ["sst2"])


def test_pretraining_ablation_variants_pick_rows_in_table_order():
    tool = pretraining_ablation
    assert [label for label, _, _ in tool.chosen_variants("random,bert")] == [
        "BERT (MLM + NSP)", "No pre-training (random init)"]
    assert [o for _, o, _ in tool.chosen_variants(",".join(tool.VARIANTS))] == [
        "bert", "no_nsp", "ltr", "ltr", None]
    with pytest.raises(InputError, match=r"--variants=bert,mlm: unknown mlm \(choose from"):
        tool.chosen_variants("bert,mlm")
    # --head replaces the task's own head (None), not the LTR rows' own
    assert [h for _, _, h in tool.chosen_variants("bert,ltr,ltr_bilstm,random", "mean_pool")] == [
        "mean_pool", "last_token", "top_bilstm", "mean_pool"]
    assert [h for _, _, h in tool.chosen_variants("bert,ltr,random")] == [
        None, "last_token", None]


def _ablation_args(tool, work, *flags):
    """The experiment's parsed flags for a work folder, with the vocabulary its random
    row's configs name."""
    (work / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    return tool.parse_args(["pretraining_ablation", f"--work_dir={work}", "--tasks=sst2",
                            *flags])


def test_pretraining_ablation_snapshot_steps_are_whole_steps_before_the_last(tmp_path):
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path, "--num_train_steps=100", "--snapshot_steps=50,20")
    assert tool.snapshot_steps(args) == (50, 20)
    assert tool.snapshot_steps(_ablation_args(tool, tmp_path, "--num_train_steps=100")) == ()
    for spec, message in (("100", r"--snapshot_steps: 100 is not a step before the last "
                                  r"\(1 to 99\)"),
                          ("0", "--snapshot_steps: 0 is not"),
                          ("2.5", "--snapshot_steps: '2.5' is not an integer"),
                          ("5,5", "--snapshot_steps")):
        args = _ablation_args(tool, tmp_path, "--num_train_steps=100", f"--snapshot_steps={spec}")
        with pytest.raises(InputError, match=message):
            tool.snapshot_steps(args)


def test_pretraining_ablation_reports_the_steps_its_encoders_had(tmp_path):
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path, "--num_train_steps=32000")
    random_row = {"objective": None, "pretraining_runs": []}
    rows = [{"objective": "bert", "pretraining_runs": [8000]}, random_row]
    assert tool.pretraining_budget(rows, args) == {"pretraining_steps": 8000}  # a snapshot
    assert tool.pretraining_budget([random_row], args) == {"pretraining_steps": 32000}
    continued = [{"objective": "bert", "pretraining_runs": [10000, 20000]}, random_row]
    assert tool.pretraining_budget(continued, args) == {"pretraining_steps": 30000,
                                                        "pretraining_runs": [10000, 20000]}


def test_pretraining_ablation_makes_data_only_for_encoders_not_yet_trained(tmp_path):
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path)
    (tmp_path / "pretrained_bert").mkdir()
    (tmp_path / "pretrained_bert" / "metrics.json").write_text("{}")  # a finished encoder
    assert tool.unfinished(args, ["bert", "no_nsp"]) == ["no_nsp"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the the the\nthe the\n\nthe the the\nthe\n")
    args.corpus = str(corpus)
    timings = {}
    assert tool.make_data(args, timings, tool.unfinished(args, ["bert"])) == {}
    assert not (tmp_path / "data_nsp").exists() and "data_seconds" in timings


def test_pretraining_ablation_picks_each_rows_best_learning_rate(tmp_path):
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path, "--finetune_learning_rate=1e-4,3e-4",
                          "--finetune_epochs=4")
    settings = tool.parse_grid(args.finetune_learning_rate, args.finetune_epochs)
    low, high = settings
    assert high == tool.Setting(3e-4, 4.0)
    variants = tool.chosen_variants("bert,random")
    planned = tool.plan(args, variants, ["sst2"], [1, 2], settings)
    bert = planned["BERT (MLM + NSP)", "sst2"]
    assert bert[high][2].output_dir == str(
        tmp_path / "finetune" / "bert-default-sst2" / "lr-0.0003" / "seed-2")
    assert bert[high][2].init_checkpoint == str(tmp_path / "pretrained_bert")
    assert bert[high][2].num_train_epochs == 4.0
    # BERT is best at 1e-4 (mean 0.70 vs 0.65), the random encoder at 3e-4 (0.62 vs 0.55).
    accuracy = {("BERT (MLM + NSP)", 1e-4): (0.71, 0.69), ("BERT (MLM + NSP)", 3e-4): (0.6, 0.7),
                ("No pre-training (random init)", 1e-4): (0.5, 0.6),
                ("No pre-training (random init)", 3e-4): (0.61, 0.63)}
    for (label, _), by_setting in planned.items():
        for setting, runs in by_setting.items():
            for seed, config in runs.items():
                fake_run(config, {"accuracy": accuracy[label, setting.learning_rate][seed - 1]})
    results = [{"variant": label, "pretraining": None,
                "tasks": {"sst2": tool.task_result(planned[label, "sst2"])}}
               for label, _, _ in variants]
    assert [r["tasks"]["sst2"]["learning_rate"] for r in results] == [1e-4, 3e-4]
    assert results[0]["tasks"]["sst2"]["values"] == [0.71, 0.69]
    assert results[1]["tasks"]["sst2"]["by_setting"] == {"lr=0.0001 epochs=4": [0.5, 0.6],
                                                        "lr=0.0003 epochs=4": [0.61, 0.63]}
    diff = tool.restarts_tables(results, ["sst2"])["sst2"]["rows"][1]["difference"]
    assert diff["difference"] == pytest.approx(-0.08)  # (0.61 − 0.71 + 0.63 − 0.69) / 2
    text = tool.table(results, ["sst2"])
    assert "| BERT (MLM + NSP) | 70.0 ± 1.4 (lr 0.0001) |" in text


def test_pretraining_ablation_picks_the_best_epochs_and_rate_together(tmp_path):
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path, "--finetune_learning_rate=1e-4,1e-3",
                          "--finetune_epochs=4,16")
    settings = tool.parse_grid(args.finetune_learning_rate, args.finetune_epochs)
    assert settings == [(1e-4, 4.0), (1e-4, 16.0), (1e-3, 4.0), (1e-3, 16.0)]
    variants = tool.chosen_variants("bert,random")
    planned = tool.plan(args, variants, ["sst2"], [1, 2], settings)
    long_low = planned["BERT (MLM + NSP)", "sst2"][1e-4, 16.0][1]
    assert long_low.output_dir == str(
        tmp_path / "finetune" / "bert-default-sst2" / "lr-0.0001-epochs-16" / "seed-1")
    assert (long_low.learning_rate, long_low.num_train_epochs) == (1e-4, 16.0)
    # BERT is best with 16 epochs at 1e-4 (0.75), the random encoder with 4 at 1e-3 (0.7).
    accuracy = {"BERT (MLM + NSP)": {(1e-4, 4.0): 0.6, (1e-4, 16.0): 0.75, (1e-3, 4.0): 0.7,
                                     (1e-3, 16.0): 0.72},
                "No pre-training (random init)": {(1e-4, 4.0): 0.5, (1e-4, 16.0): 0.6,
                                                  (1e-3, 4.0): 0.7, (1e-3, 16.0): 0.65}}
    for (label, _), by_setting in planned.items():
        for setting, runs in by_setting.items():
            for seed, config in runs.items():
                fake_run(config, {"accuracy": accuracy[label][setting] + 0.01 * seed})
    results = [{"variant": label, "pretraining": None,
                "tasks": {"sst2": tool.task_result(planned[label, "sst2"])}}
               for label, _, _ in variants]
    bert, random_row = (r["tasks"]["sst2"] for r in results)
    assert (bert["learning_rate"], bert["epochs"]) == (1e-4, 16.0)
    assert (random_row["learning_rate"], random_row["epochs"]) == (1e-3, 4.0)
    assert bert["runs"][2].endswith(os.path.join("lr-0.0001-epochs-16", "seed-2"))
    assert bert["by_setting"]["lr=0.001 epochs=16"] == pytest.approx([0.73, 0.74])
    text = tool.table(results, ["sst2"])
    assert "| BERT (MLM + NSP) | 76.5 ± 0.7 (lr 0.0001, 16 epochs) |" in text
    assert "| No pre-training (random init) | 71.5 ± 0.7 (lr 0.001, 4 epochs) |" in text


def test_pretraining_ablation_feature_based_protocol_trains_only_the_head(tmp_path):
    """--protocol=feature_based: each setting is the frozen phase alone (the setting's
    epochs at its rate, no fine-tuning phase), in feature_based/ so fine-tuned runs of the
    same work folder stay apart; --head replaces the task's own head, not LTR's."""
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path, "--protocol=feature_based", "--head=mean_pool",
                          "--finetune_learning_rate=3e-3", "--finetune_epochs=8")
    setting = tool.Setting(3e-3, 8.0)
    planned = tool.plan(args, tool.chosen_variants("bert,ltr,random", args.head), ["sst2"], [1],
                        [setting])
    bert = planned["BERT (MLM + NSP)", "sst2"][setting][1]
    assert bert.output_dir == str(
        tmp_path / "feature_based" / "bert-mean_pool-sst2" / "lr-0.003" / "seed-1")
    assert (bert.frozen_epochs, bert.frozen_learning_rate, bert.num_train_epochs) == (
        8.0, 3e-3, 0.0)
    assert bert.head == "mean_pool"
    assert planned["No pre-training (random init)", "sst2"][setting][1].head == "mean_pool"
    assert planned["LTR & No NSP", "sst2"][setting][1].head == "last_token"
    fine_tuned = tool.plan(_ablation_args(tool, tmp_path, "--finetune_learning_rate=3e-3",
                                          "--finetune_epochs=8"),
                           tool.chosen_variants("bert"), ["sst2"], [1], [setting])
    config = fine_tuned["BERT (MLM + NSP)", "sst2"][setting][1]
    assert (config.frozen_epochs, config.num_train_epochs) == (0.0, 8.0)
    assert os.sep + "finetune" + os.sep in config.output_dir
    assert tool.protocol_line(args) == ("Protocol: feature-based: each encoder frozen, only "
                                        "the head trained; head mean_pool (LTR rows: theirs).\n\n")
    assert tool.protocol_line(_ablation_args(tool, tmp_path)) == ""  # Table 5's own: no line


def test_pretraining_ablation_refuses_an_unknown_protocol_or_head(tmp_path, capsys):
    tool = pretraining_ablation
    with pytest.raises(SystemExit) as done:
        _ablation_args(tool, tmp_path, "--protocol=frozen")
    assert done.value.code == 2
    assert capsys.readouterr().err == ("kerasbert: error: flag --protocol=frozen: value should "
                                       "be one of <fine_tune|feature_based>\n")
    assert tool.run(["pretraining_ablation", f"--work_dir={tmp_path}", "--tasks=sst2",
                     "--variants=random", "--head=no_such"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kerasbert: error: ") and "no_such" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "corpus.txt").exists() and not (tmp_path / "finetune").exists()
    assert tool.run(["pretraining_ablation", f"--work_dir={tmp_path}", "--tasks=sst2",
                     "--head=span"]) == 2
    assert "--head=span: serves span tasks, but --tasks=sst2" in capsys.readouterr().err


def test_pretraining_ablation_setting_choice_and_flags():
    tool = pretraining_ablation
    assert tool.choose_setting({1e-4: [0.5, None], 3e-4: [0.4, 0.45]}) == 1e-4
    assert tool.choose_setting({1e-4: [0.5, 0.6], 3e-4: [0.55, 0.55]}) == 1e-4  # tie
    assert tool.choose_setting({1e-4: [None], 3e-4: [None]}) is None
    assert tool.parse_grid("3e-4", "3") == [(3e-4, 3.0)]
    for bad, message in (("", "give at least one learning rate"),
                         ("fast", "'fast' is not a number"), ("1e-4,1e-4", "1e-4 is given twice"),
                         ("0,1e-4", "0 must be a positive number")):
        with pytest.raises(InputError, match=f"--finetune_learning_rate: {message}"):
            tool.parse_grid(bad, "3")
    for bad, message in (("", "give at least one number of epochs"),
                         ("4,4", "4 is given twice"), ("-1", "-1 must be a positive number")):
        with pytest.raises(InputError, match=f"--finetune_epochs: {message}"):
            tool.parse_grid("1e-4", bad)


def test_pretraining_ablation_refuses_a_finished_run_made_otherwise(tmp_path):
    tool = pretraining_ablation
    variants = tool.chosen_variants("random")
    row = "No pre-training (random init)", "sst2"
    old = tool.plan(_ablation_args(tool, tmp_path), variants, ["sst2"], [1],
                    [tool.Setting(3e-4, 4.0)])
    fake_run(old[row][3e-4, 4.0][1], {"accuracy": 0.6})
    again = tool.plan(_ablation_args(tool, tmp_path), variants, ["sst2"], [1],
                      [tool.Setting(3e-4, 4.0)])
    restarts.check_reusable([again[row][3e-4, 4.0][1]])
    new = tool.plan(_ablation_args(tool, tmp_path), variants, ["sst2"], [1],
                    [tool.Setting(3e-4, 2.0)])
    with pytest.raises(InputError, match=r"seed-1/run_config.json: this run was made with "
                       r"num_train_epochs=4.0, now 2.0"):
        restarts.check_reusable([new[row][3e-4, 2.0][1]])


def test_a_finished_run_copied_with_its_vocabulary_is_reused(tmp_path):
    """The no-pre-training row copied into another work folder: its vocab_file path
    changed, its bytes did not (a copy, or a link), so it counts; a vocabulary with other
    bytes is refused."""
    import shutil

    tool = pretraining_ablation
    row, setting = ("No pre-training (random init)", "sst2"), tool.Setting(3e-4, 4.0)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    old = tool.plan(_ablation_args(tool, first), tool.chosen_variants("random"), ["sst2"],
                    [1], [setting])[row][setting][1]
    fake_run(old, {"accuracy": 0.6})
    second.mkdir()
    shutil.copytree(first / "finetune", second / "finetune")
    copied = tool.plan(_ablation_args(tool, second), tool.chosen_variants("random"), ["sst2"],
                       [1], [setting])[row][setting][1]
    assert copied.vocab_file == str(second / "vocab.txt") != old.vocab_file
    restarts.check_reusable([copied])
    (second / "vocab.txt").unlink()
    (second / "vocab.txt").symlink_to(first / "vocab.txt")  # a link to the same file
    restarts.check_reusable([copied])
    (second / "vocab.txt").unlink()
    (second / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n")
    with pytest.raises(InputError, match=r"this run was made with vocab_file="):
        restarts.check_reusable([copied])


def test_pretraining_ablation_names_a_run_that_did_not_finish(tmp_path):
    tool = pretraining_ablation
    args = _ablation_args(tool, tmp_path, "--finetune_learning_rate=1e-4")
    settings = tool.parse_grid(args.finetune_learning_rate, args.finetune_epochs)
    planned = tool.plan(args, tool.chosen_variants("bert"), ["sst2"], [1, 2], settings)
    runs = planned["BERT (MLM + NSP)", "sst2"]
    fake_run(runs[settings[0]][1], {"accuracy": 0.7})  # seed 2 never finished
    with pytest.raises(InputError, match=r"lr-0\.0001.seed-2: no metrics\.json"):
        tool.task_result(runs)
