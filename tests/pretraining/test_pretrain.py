"""Pre-training objectives on a tiny model: losses fall, the causal mask holds in
pre-training, fine-tuning and export, and the output is an --init_checkpoint."""

import csv
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.config import RunConfig
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.model.backbone import random_backbone
from kerasbert.model.encoders import load_encoder
from kerasbert.pretraining import data, objectives
from kerasbert.pretraining.train import (PretrainConfig, continued_heads, pretraining_runs,
                                         run_pretraining)
from kerasbert.run import execute

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "log", "a", "red", "big", "small"]


@pytest.fixture(scope="module")
def corpus_data(tmp_path_factory):
    """Tiny data in two flavours: with NSP pairs (bert) and contiguous (no_nsp, ltr)."""
    root = tmp_path_factory.mktemp("pretraining")
    rng = random.Random(0)
    with open(root / "corpus.txt", "w", encoding="utf-8") as f:
        for _ in range(16):
            for _ in range(6):
                f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8))) + " .\n")
            f.write("\n")
    (root / "vocab.txt").write_text("\n".join([*data.SPECIAL_TOKENS, ".", *WORDS]) + "\n")
    tokenizer = WordPieceTokenizer(str(root / "vocab.txt"), do_lower_case=True)
    out = {}
    for name, nsp in (("nsp", 0.5), ("contiguous", 0.0)):
        options = data.DataOptions(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2,
                                   heldout_fraction=0.3, next_sentence_prob=nsp)
        data.create_pretraining_data([str(root / "corpus.txt")], str(root / name), tokenizer,
                                     options)
        out[name] = str(root / name / "train-*")
    return root, out, {}


STEPS = 16


def _pretrain(corpus_data, objective):
    """Pre-trains (once per module) and returns (metrics, output folder)."""
    root, files, done = corpus_data
    if objective not in done:
        config = PretrainConfig(
            input_file=files["contiguous" if objective != "bert" else "nsp"],
            output_dir=str(root / objective), objective=objective, model_size="2/32/2",
            train_batch_size=8, eval_batch_size=16, num_train_steps=STEPS, num_warmup_steps=2,
            learning_rate=5e-3, log_every=1, max_eval_steps=2, seed=3)
        done[objective] = run_pretraining(config, show_progress=False), config.output_dir
    return done[objective]


@pytest.mark.parametrize("objective", objectives.OBJECTIVES)
def test_each_objective_loss_decreases_and_metrics_are_written(corpus_data, objective):
    metrics, out = _pretrain(corpus_data, objective)
    with open(f"{out}/history.csv") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == STEPS and all(np.isfinite(losses))
    # From ~ln(17) (+ ln 2 for NSP) at the start; noise between steps is ~0.05.
    assert np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.2
    written = json.loads(Path(out, "metrics.json").read_text())
    assert written == pytest.approx(metrics)
    prefix = "lm" if objective == "ltr" else "mlm"
    assert 0 <= metrics[f"heldout_{prefix}_accuracy"] <= 1
    assert metrics[f"heldout_{prefix}_perplexity"] == pytest.approx(
        np.exp(metrics[f"heldout_{prefix}_loss"]))
    # A learned LM beats the uniform guess over the vocabulary (17 tokens).
    assert metrics[f"heldout_{prefix}_perplexity"] < 17
    assert ("heldout_nsp_accuracy" in metrics) == (objective == "bert")
    encoder = json.loads(Path(out, "encoder", "encoder_config.json").read_text())
    assert encoder.get("causal", False) == (objective == "ltr")


def _inputs(ids):
    ids = np.array([ids], np.int32)
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids),
            "padding_mask": np.ones_like(ids)}


def _changed_after(ids, t, new_id):
    changed = list(ids)
    changed[t + 1] = new_id
    return changed


def test_causal_mask_blocks_the_future_in_the_pretraining_model():
    backbone = random_backbone("2/32/2", 40, max_position=64, dropout=0.0, seed=1, causal=True)
    model = objectives.PretrainingModel(backbone, "ltr")
    ids, t = [2, 9, 10, 11, 12, 13, 14, 3], 3
    features = {"input_ids": ids, "input_mask": [1] * 8, "segment_ids": [0] * 8,
                "masked_lm_positions": [0], "masked_lm_ids": [0], "masked_lm_weights": [0.0]}
    run = lambda ids: model({k: tf.constant([ids if k == "input_ids" else v])
                             for k, v in features.items()})["lm_logits"].numpy()[0]
    before, after = run(ids), run(_changed_after(ids, t, 20))
    np.testing.assert_array_equal(before[: t + 1], after[: t + 1])
    assert np.abs(before[t + 1:] - after[t + 1:]).max() > 1e-4
    # The same encoder without the mask does look ahead.
    bidirectional = random_backbone("2/32/2", 40, max_position=64, dropout=0.0, seed=1)
    seq = lambda ids: bidirectional(_inputs(ids))["sequence_output"].numpy()[0]
    assert np.abs(seq(ids)[:t + 1] - seq(_changed_after(ids, t, 20))[:t + 1]).max() > 1e-4
    with pytest.raises(InputError, match="causal"):
        objectives.PretrainingModel(bidirectional, "ltr")


def test_ltr_checkpoint_stays_causal_in_fine_tuning_and_export(corpus_data):
    from kerasbert.export.saved_model import load_run

    root = corpus_data[0]
    _, pretrained = _pretrain(corpus_data, "ltr")
    # The [CLS] classifier of a causal encoder can only see [CLS]: its served output must
    # not change with later tokens, however much it was fine-tuned.
    out = root / "finetuned"
    execute(RunConfig(task="sst2", init_checkpoint=pretrained, output_dir=str(out),
                      max_seq_length=32, train_batch_size=8, max_train_examples=16,
                      max_eval_examples=8, num_train_epochs=1.0, learning_rate=1e-3,
                      export_dir=str(root / "serving"), seed=1))
    run = load_run(str(out))
    assert run.model.backbone.causal
    ids, t = [2, 6, 7, 8, 9, 10, 3], 2
    seq = lambda ids: run.model.backbone(_inputs(ids))["sequence_output"].numpy()[0]
    np.testing.assert_allclose(seq(ids)[: t + 1], seq(_changed_after(ids, t, 11))[: t + 1],
                               atol=1e-6)
    served = tf.saved_model.load(str(root / "serving" / "1")).signatures["serve_token_ids"]
    probs = lambda ids: served(**{k: tf.constant(v) for k, v in
                                  _inputs(ids).items()})["probabilities"].numpy()
    np.testing.assert_allclose(probs(ids), probs([2, 11, 11, 11, 12, 12, 3]), atol=1e-6)
    assert np.abs(probs(ids) - probs([5] + ids[1:])).max() > 1e-7  # [CLS] itself does count


def test_bilstm_span_head_fine_tunes_from_the_ltr_checkpoint(corpus_data):
    # Classification with last_token / top_bilstm is covered by tests/heads/test_every_head.py.
    task, head = "squad_v1", "top_bilstm"
    root = corpus_data[0]
    _, pretrained = _pretrain(corpus_data, "ltr")
    metrics = execute(RunConfig(
        task=task, head=head, init_checkpoint=str(pretrained),
        output_dir=str(root / f"{task}-{head}"), max_seq_length=48, max_query_length=16,
        doc_stride=16, train_batch_size=4, max_train_examples=8, max_eval_examples=4,
        num_train_epochs=1.0, head_options={"top_bilstm_units": 8}, seed=1))
    assert metrics and all(np.isfinite(v) for v in metrics.values())


@pytest.mark.large
def test_pretrain_cli(corpus_data, tmp_path):
    files = corpus_data[1]
    cmd = [sys.executable, "-m", "kerasbert.pretrain", f"--input_file={files['nsp']}",
           f"--output_dir={tmp_path / 'cli'}", "--model_size=2/32/2", "--num_train_steps=3",
           "--num_warmup_steps=1", "--train_batch_size=4", "--max_eval_steps=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "heldout_nsp_accuracy" in json.loads((tmp_path / "cli" / "metrics.json").read_text())
    bad = subprocess.run(cmd[:3] + [f"--output_dir={tmp_path / 'x'}", "--input_file=/nope*"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "--input_file" in bad.stderr.strip().splitlines()[-1]
    for steps, message in (("2,x", "--snapshot_steps=2,x: expected whole numbers"),
                           ("3", "--snapshot_steps: each must be between 1 and")):
        bad = subprocess.run(cmd + [f"--snapshot_steps={steps}"], capture_output=True,
                             text=True, check=False)
        assert bad.returncode == 2 and message in bad.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "cli" / "step-3").exists()


def test_snapshots_keep_the_encoder_at_their_steps_without_changing_the_run(corpus_data,
                                                                           tmp_path):
    """--snapshot_steps writes step-<N>/ (encoder, history, held-out metrics) mid-run; the
    held-out pass it makes there leaves the run's own steps (dropout on) as they were."""
    files = corpus_data[1]
    runs = {}
    for snapshots in ((), (2, 4)):
        config = PretrainConfig(
            input_file=files["nsp"], output_dir=str(tmp_path / f"snap-{len(snapshots)}"),
            objective="bert", model_size="2/32/2", train_batch_size=8, num_train_steps=6,
            num_warmup_steps=1, learning_rate=5e-3, log_every=1, max_eval_steps=2, seed=3,
            snapshot_steps=snapshots)
        runs[snapshots] = run_pretraining(config, show_progress=False), Path(config.output_dir)
    (plain, plain_dir), (snapped, out) = runs[()], runs[(2, 4)]
    assert snapped == pytest.approx({**plain, "train_seconds": snapped["train_seconds"]})
    assert (plain_dir / "history.csv").read_text() == (out / "history.csv").read_text()
    full = (out / "history.csv").read_text().splitlines()
    weights = []
    for step in (2, 4):
        snap = out / f"step-{step}"
        metrics = json.loads((snap / "metrics.json").read_text())
        assert metrics["train_steps"] == step and 0 <= metrics["heldout_mlm_accuracy"] <= 1
        assert (snap / "history.csv").read_text().splitlines() == full[:step + 1]
        weights.append(load_encoder(str(snap)).backbone.get_weights())
    weights.append(load_encoder(str(out)).backbone.get_weights())
    for earlier, later in zip(weights, weights[1:]):
        assert any(not np.array_equal(a, b) for a, b in zip(earlier, later))
    with pytest.raises(InputError, match=r"--snapshot_steps: each must be between 1 and "
                                         r"--num_train_steps - 1 \(5\), got 6"):
        PretrainConfig(input_file="x", output_dir="y", num_train_steps=6,
                       snapshot_steps=(6,)).check()


def test_a_continued_pretraining_counts_the_steps_it_continued_from(corpus_data, tmp_path):
    """--init_checkpoint=<an earlier output> continues that encoder: pretraining_runs()
    gives each run's steps, oldest first, for the output, its snapshots and encoder/."""
    first = Path(_pretrain(corpus_data, "bert")[1])
    config = PretrainConfig(
        input_file=corpus_data[1]["nsp"], output_dir=str(tmp_path / "continued"),
        init_checkpoint=str(first / "encoder"), objective="bert", train_batch_size=8,
        num_train_steps=4, num_warmup_steps=1, learning_rate=5e-3, max_eval_steps=1,
        seed=4, snapshot_steps=(2,))
    run_pretraining(config, show_progress=False)
    out = Path(config.output_dir)
    assert pretraining_runs(str(first)) == [STEPS]
    assert pretraining_runs(str(out)) == [STEPS, 4]
    assert pretraining_runs(str(out / "encoder")) == [STEPS, 4]
    assert pretraining_runs(str(out / "step-2")) == [STEPS, 2]
    link = tmp_path / "pretrained_bert"  # how the ablation tool links a snapshot in
    link.symlink_to(out / "step-2")
    assert pretraining_runs(str(link)) == [STEPS, 2]
    assert pretraining_runs(None) == pretraining_runs("random") == []
    assert pretraining_runs(str(tmp_path / "nowhere")) == []


def test_a_continued_pretraining_starts_from_the_lm_and_nsp_layers_of_its_run(corpus_data,
                                                                              tmp_path):
    """From a finished output the LM/NSP layers continue too: one step at a negligible rate
    reproduces that run's held-out losses. A snapshot keeps no such layers: from it they
    start afresh, and the held-out losses are not the snapshot's."""
    files = corpus_data[1]
    first_metrics, first = _pretrain(corpus_data, "bert")
    snapshot_run = PretrainConfig(
        input_file=files["nsp"], output_dir=str(tmp_path / "with-snapshot"), objective="bert",
        model_size="2/32/2", train_batch_size=8, eval_batch_size=16, num_train_steps=12,
        num_warmup_steps=2, learning_rate=5e-3, max_eval_steps=2, seed=3, snapshot_steps=(10,))
    run_pretraining(snapshot_run, show_progress=False)
    snapshot = Path(snapshot_run.output_dir) / "step-10"

    def one_step_from(init, name):
        config = PretrainConfig(
            input_file=files["nsp"], output_dir=str(tmp_path / name), init_checkpoint=init,
            objective="bert", train_batch_size=8, eval_batch_size=16, num_train_steps=1,
            num_warmup_steps=0, learning_rate=1e-12, max_eval_steps=2, seed=5)
        assert (continued_heads(config) is not None) == (init == str(first))
        return run_pretraining(config, show_progress=False)

    same = one_step_from(str(first), "from-output")
    for key in ("heldout_mlm_loss", "heldout_nsp_loss"):
        assert same[key] == pytest.approx(first_metrics[key], rel=1e-5)
    fresh = one_step_from(str(snapshot), "from-snapshot")
    trained = json.loads((snapshot / "metrics.json").read_text())
    assert abs(fresh["heldout_mlm_loss"] - trained["heldout_mlm_loss"]) > 1e-3


def test_xla_pretraining_takes_the_same_steps_as_the_default(corpus_data, tmp_path):
    """--jit_compile pads each trimmed batch back up to a multiple of 32 (few XLA shapes),
    its sequence inputs only: padding is masked, so without dropout the losses are those
    of the plain run."""
    files = corpus_data[1]
    losses = {}
    for jit in (False, True):
        config = PretrainConfig(
            input_file=files["nsp"], output_dir=str(tmp_path / f"jit-{jit}"), objective="bert",
            model_size="2/32/2", train_batch_size=8, num_train_steps=4, num_warmup_steps=1,
            learning_rate=5e-3, log_every=1, max_eval_steps=1, seed=3, dropout=0.0,
            jit_compile=jit)
        run_pretraining(config, show_progress=False)
        with open(tmp_path / f"jit-{jit}" / "history.csv") as f:
            losses[jit] = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses[True]) == 4
    np.testing.assert_allclose(losses[True], losses[False], rtol=2e-4)
