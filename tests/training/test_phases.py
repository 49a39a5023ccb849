"""Stack-and-finetune phases: what is trained when, and resuming across the boundary."""

import csv
import json

import numpy as np
import pytest

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.model import encoders
from kerasbert.training import run_state
from kerasbert.training.phases import plan_phases

TINY = dict(task="sst2", init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
            train_batch_size=8, max_train_examples=32, max_eval_examples=16, seed=3)


def _config(tmp_path, name="run", **overrides):
    return RunConfig(**{**TINY, "output_dir": str(tmp_path / name), **overrides})


def test_phase_plans_for_the_three_strategies(tmp_path):
    def names(**kw):
        return [(p.name, p.num_epochs, p.learning_rate, p.train_backbone)
                for p in plan_phases(_config(tmp_path, learning_rate=2e-5, **kw))]

    assert names(num_train_epochs=3.0) == [("finetune", 3.0, 2e-5, True)]
    assert names(frozen_epochs=2.0, num_train_epochs=0.0,
                 frozen_learning_rate=1e-3) == [("frozen", 2.0, 1e-3, False)]
    assert names(frozen_epochs=2.0, num_train_epochs=1.0, frozen_learning_rate=1e-3) == [
        ("frozen", 2.0, 1e-3, False), ("finetune", 1.0, 2e-5, True)]


def _encoder_weights(path):
    return [w.numpy() for w in encoders.load_encoder(path).backbone.weights]


def test_frozen_phase_leaves_the_encoder_bit_identical(tmp_path):
    run_lib.execute(_config(tmp_path, frozen_epochs=2.0, num_train_epochs=0.0))
    fresh = [w.numpy() for w in encoders.random_encoder("2/32/2", seed=3).backbone.weights]
    for trained, initial in zip(_encoder_weights(str(tmp_path / "run")), fresh):
        np.testing.assert_array_equal(trained, initial)


def test_stack_and_finetune_moves_the_encoder_only_in_phase_two(tmp_path, monkeypatch):
    snapshots = {}
    original_save = run_state.RunState.save

    def save(self, phase, epochs, *rest):
        original_save(self, phase, epochs, *rest)
        snapshots[(phase, epochs)] = [v.numpy().copy() for v in
                                      self.checkpoint.model.backbone.weights]

    monkeypatch.setattr(run_state.RunState, "save", save)
    metrics = run_lib.execute(_config(tmp_path, frozen_epochs=1.0, num_train_epochs=1.0,
                                       learning_rate=1e-3))
    fresh = [w.numpy() for w in encoders.random_encoder("2/32/2", seed=3).backbone.weights]
    after_frozen = snapshots[(1, 0)]  # phase 0 complete
    after_finetune = snapshots[(2, 0)]
    assert all(np.array_equal(a, b) for a, b in zip(after_frozen, fresh))
    assert any(not np.allclose(a, b) for a, b in zip(after_finetune, after_frozen))

    out = tmp_path / "run"
    rows = list(csv.DictReader(open(out / "history.csv")))
    assert [(r["phase"], r["epoch"]) for r in rows] == [("frozen", "1"), ("finetune", "1")]
    # Each phase has its own schedule: 32 examples / 8 = 4 steps, warmup 10% → int(0.4) = 0,
    # so each phase starts at its peak and ends at 0; the global step goes on counting.
    assert [int(r["step"]) for r in rows] == [4, 8]
    assert [float(r["learning_rate"]) for r in rows] == [0.0, 0.0]
    assert {"train_accuracy", "train_dev_gap"} <= set(rows[0])
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved["phases"]) == {"frozen", "finetune"}
    assert saved["accuracy"] == metrics["accuracy"] == saved["phases"]["finetune"]["accuracy"]


def test_head_learning_rate_moves_the_head_and_leaves_the_encoder_at_its_own_rate(tmp_path):
    """--head_learning_rate: with the encoder's rate near 0, a head at 1e-2 moves and the
    encoder does not (Adam moves a weight at most ~its rate per step); without it the head
    stays where the seed put it too. run_config.json keeps the rate."""
    from kerasbert import plugins
    from kerasbert.model import builder

    fresh = [w.numpy() for w in encoders.random_encoder("2/32/2", seed=3).backbone.weights]
    heads = {}
    for name, head_rate in (("own", 1e-2), ("shared", None)):
        config = _config(tmp_path, name, num_train_epochs=1.0, learning_rate=1e-9,
                         head_learning_rate=head_rate, warmup_proportion=0.0)
        run_lib.execute(config)
        for trained, initial in zip(_encoder_weights(config.output_dir), fresh):
            np.testing.assert_allclose(trained, initial, atol=1e-6)
        saved = json.loads((tmp_path / name / "run_config.json").read_text())
        assert saved["head_learning_rate"] == head_rate
        registry = plugins.registry()
        model, _ = builder.rebuild_trained_model(config.output_dir, config.resolved(
            registry.task("sst2")), registry.task("sst2"), registry)
        heads[name] = [w.numpy() for w in model.head.weights]
    # 4 steps at ≤ 1e-2 each against ≤ 4e-9: the two heads differ by far more than 1e-9
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(*heads.values())) > 1e-3


def test_early_stopping_keeps_the_best_head(tmp_path, monkeypatch):
    # Dev accuracy is scripted: it peaks at epoch 2, so with patience 1 the phase stops
    # after epoch 3 and the head of epoch 2 comes back.
    from kerasbert.tasks import glue

    scripted = iter([0.5, 0.75, 0.625, 0.75])
    monkeypatch.setattr(glue.GlueTask, "evaluate",
                        lambda self, *a, **k: {"accuracy": next(scripted)})
    metrics = run_lib.execute(_config(tmp_path, frozen_epochs=5.0, num_train_epochs=0.0,
                                       frozen_patience=1))
    rows = list(csv.DictReader(open(tmp_path / "run" / "history.csv")))
    assert [r["dev_accuracy"] for r in rows] == ["0.5", "0.75", "0.625"]
    assert metrics["accuracy"] == 0.75  # the re-evaluation after restoring the best head


def test_resume_across_the_phase_boundary(tmp_path, interrupt_after_save):
    kwargs = dict(frozen_epochs=1.0, num_train_epochs=2.0, learning_rate=1e-3)
    reference = run_lib.execute(_config(tmp_path, "straight", **kwargs))
    restore = interrupt_after_save(1, 1)  # first epoch of fine-tuning saved
    with pytest.raises(KeyboardInterrupt):
        run_lib.execute(_config(tmp_path, "resumed", **kwargs))
    restore()
    resumed = run_lib.execute(_config(tmp_path, "resumed", **kwargs))
    rows = list(csv.DictReader(open(tmp_path / "resumed" / "history.csv")))
    straight = list(csv.DictReader(open(tmp_path / "straight" / "history.csv")))
    assert [(r["phase"], r["epoch"], r["step"]) for r in rows] == [
        (r["phase"], r["epoch"], r["step"]) for r in straight]
    assert float(rows[-1]["train_loss"]) == pytest.approx(float(straight[-1]["train_loss"]),
                                                          abs=1e-5)
    assert resumed == pytest.approx(reference, abs=1e-6)
