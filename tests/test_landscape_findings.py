"""kerasbert.experiments.landscape_findings: Hao et al.'s measurements over seeds from
hand-made landscape folders (numbers checked by hand), and its refusals."""

import csv
import json
import os

import pytest

from kerasbert.experiments import landscape_findings

PROG = "python -m kerasbert.experiments landscape_findings"

PRE, RANDOM = landscape_findings.PRE, landscape_findings.RANDOM


def _csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _run(folder, seed, lr, dev, losses):
    os.makedirs(folder)
    with open(os.path.join(folder, "run_config.json"), "w") as f:
        json.dump({"task": "sst2", "seed": seed, "learning_rate": lr,
                   "max_train_examples": 2000, "max_seq_length": 64}, f)
    _csv(os.path.join(folder, "history.csv"),
         [{"phase": "finetune", "epoch": i + 1, "step": 10 * (i + 1), "train_loss": loss,
           "dev_accuracy": acc} for i, (acc, loss) in enumerate(zip(dev, losses))])
    return folder


def make_seed(tmp, seed, pre_dev, rnd_dev, pre_lambda, rnd_lambda, spearman_path):
    """One landscape folder: 2 epochs (steps 10, 20), 2 layers."""
    pre = _run(tmp / f"pre{seed}", seed, 5e-5, pre_dev, [0.5, 0.3])
    rnd = _run(tmp / f"rnd{seed}", seed, 3e-4, rnd_dev, [0.7, 0.4])
    out = tmp / f"land{seed}"
    os.makedirs(out)
    summary = {}
    for label, run, lam in ((PRE, pre, pre_lambda), (RANDOM, rnd, rnd_lambda)):
        summary[label] = {"steps": [0, 10, 20], "run_dir": str(run),
                          "hessian": {"top_eigenvalues": [lam, lam / 2], "trace": 10 * lam},
                          "sharpness": [{"epsilon": 0.001, "loss": 0.1, "rise": 0.01,
                                         "keskar": lam / 100}]}
    with open(out / "summary.json", "w") as f:
        json.dump(summary, f)
    _csv(out / "trajectory.csv", [
        {"run": PRE, "step": s, "dev_loss": v} for s, v in ((0, 0.7), (10, 0.4), (20, 0.45))] + [
        {"run": RANDOM, "step": s, "dev_loss": v} for s, v in ((0, 0.7), (10, 0.6), (20, 0.8))])
    _csv(out / "layers.csv", [
        {"run": PRE, "group": "layer_0", "relative_change": 0.01},
        {"run": PRE, "group": "layer_1", "relative_change": 0.03},
        {"run": RANDOM, "group": "layer_0", "relative_change": 0.02},
        {"run": RANDOM, "group": "layer_1", "relative_change": 0.02}])
    _csv(out / "rollback.csv", [
        {"run": label, "rollback": name, "dev_accuracy": acc}
        for label in (PRE, RANDOM)
        for name, acc in (("none", 0.8), ("lowest_1", 0.78), ("highest_1", 0.70))])
    train, error = spearman_path
    _csv(out / "1d.csv", [{"run": label, "alpha": a, "train_loss": t, "dev_error": e}
                          for label in (PRE, RANDOM)
                          for a, t, e in zip((0, 0.5, 1), train, error)])
    return str(out)


def test_effects_signed_the_papers_way(tmp_path, capsys):
    dirs = [make_seed(tmp_path, 1, [0.80, 0.82], [0.50, 0.70], 4.0, 10.0,
                      ((0.7, 0.5, 0.3), (0.5, 0.3, 0.2))),
            make_seed(tmp_path, 2, [0.78, 0.80], [0.52, 0.72], 6.0, 8.0,
                      ((0.7, 0.5, 0.3), (0.5, 0.2, 0.3)))]
    out = tmp_path / "out"
    assert landscape_findings.run([PROG, f"--landscape_dirs={','.join(dirs)}",
                                   f"--output_dir={out}"]) == 0
    data = json.loads((out / "landscape_findings.json").read_text())
    assert data["experiment"] == {"task": "sst2", "train_examples": 2000, "steps": 20,
                                  "max_seq_length": 64, "seeds": [1, 2]}
    assert data["command"] == f"{PROG} --landscape_dirs={','.join(dirs)} --output_dir={out}"
    claims = data["claims"]
    first, end, _ = claims["hao-starting-point"]
    assert first["values"] == pytest.approx([0.30, 0.26])  # 0.80 − 0.50, 0.78 − 0.52
    assert first["effect"] == pytest.approx(0.28) and first["points"]
    assert end["effect"] == pytest.approx(0.10)
    lam, trace, sharp = claims["hao-flatter-optima"]
    assert lam["values"] == pytest.approx([6.0, 2.0]) and lam["effect"] == pytest.approx(4.0)
    assert lam["std"] == pytest.approx(2 ** 1.5)  # sample std of 6 and 2
    assert trace["effect"] == pytest.approx(40.0)
    assert sharp["effect"] == pytest.approx(0.04) and not sharp["points"]
    # ρ of (0.7, 0.5, 0.3) vs (0.5, 0.3, 0.2) is 1; vs (0.5, 0.2, 0.3) it is 0.5
    assert claims["hao-loss-vs-generalisation"][0]["values"] == pytest.approx([1.0, 0.5])
    rise, drop = claims["hao-overfitting"]
    assert rise["values"] == pytest.approx([0.15, 0.15])  # random 0.8 − 0.6, pre 0.45 − 0.4
    assert drop["values"] == pytest.approx([0.0, 0.0])
    ratio, rollback = claims["hao-lower-layers"]
    assert ratio["values"] == pytest.approx([2.0, 2.0])  # 0.03 / 0.01 − 1
    assert rollback["values"] == pytest.approx([0.08, 0.08])  # lowest_1 0.78 − highest_1 0.70
    assert (out / "convergence.png").stat().st_size > 0
    text = (out / "hao.md").read_text()
    assert "| `hao-flatter-optima` | λ_max" in text
    assert "| dev accuracy after the first epoch (step 10), pre-trained − random |" in text
    # λ_max per side: random 10, 8 → 9 ± 1.414; pre-trained 4, 6 → 5 ± 1.414
    assert "; A 9 ± 1.414, B 5 ± 1.414 |" in text
    assert "measurements of 5 claims over 2 seeds" in capsys.readouterr().out


def test_refuses_missing_modes_and_other_budgets(tmp_path, capsys):
    good = make_seed(tmp_path, 1, [0.8, 0.8], [0.5, 0.7], 4.0, 10.0,
                     ((0.7, 0.5, 0.3), (0.5, 0.3, 0.2)))
    other = make_seed(tmp_path, 2, [0.8, 0.8], [0.5, 0.7], 4.0, 10.0,
                      ((0.7, 0.5, 0.3), (0.5, 0.3, 0.2)))
    os.remove(os.path.join(other, "rollback.csv"))
    out = tmp_path / "out"
    assert landscape_findings.run([PROG, f"--landscape_dirs={good},{other}",
                                   f"--output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kerasbert: error: ") and "missing rollback.csv" in err
    assert not out.exists()
    assert landscape_findings.run([PROG, f"--landscape_dirs={good}", f"--output_dir={out}"]) == 2
    assert "at least two seeds" in capsys.readouterr().err
    assert landscape_findings.run([PROG, f"--landscape_dirs={good},{good}",
                                   f"--output_dir={out}"]) == 2
    assert "a run appears twice" in capsys.readouterr().err
    _csv(os.path.join(tmp_path, "rnd1", "history.csv"),
         [{"phase": "finetune", "epoch": 1, "step": 30, "train_loss": 0.5, "dev_accuracy": 0.6}])
    third = make_seed(tmp_path, 3, [0.8, 0.8], [0.5, 0.7], 4.0, 10.0,
                      ((0.7, 0.5, 0.3), (0.5, 0.3, 0.2)))
    assert landscape_findings.run([PROG, f"--landscape_dirs={good},{third}",
                                   f"--output_dir={out}"]) == 2
    assert "different steps" in capsys.readouterr().err
