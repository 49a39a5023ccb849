"""LoRA and BitFit (kerasbert/model/adapters.py): what trains, counted by hand on the tiny
2/32/2 encoder; what one run changes; resuming; exports with LoRA merged; bad flags."""

import csv
import os

import numpy as np
import pytest
from safetensors.numpy import load_file

from kerasbert import plugins, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.model import adapters, builder, encoders
from kerasbert.training import run_state

# 2 layers, hidden d = 32, 2 heads of 16, feed-forward 128; sst2's cls_linear head.
TINY = dict(task="sst2", init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
            train_batch_size=8, max_train_examples=16, max_eval_examples=8, seed=3,
            num_train_epochs=1.0, learning_rate=1e-2)
HEAD = 32 * 2 + 2  # cls_linear: a 32 → 2 kernel and its bias


def _config(tmp_path, name="run", **overrides):
    return RunConfig(**{**TINY, "output_dir": str(tmp_path / name), **overrides})


def _model(config):
    registry = plugins.registry()
    task = registry.task("sst2")
    backbone = encoders.random_encoder("2/32/2", seed=3).backbone
    model = builder.build_task_model(task, registry.head("cls_linear"), backbone)
    adapters.apply_strategy(model, config.resolved(task))
    return model


def _count(variables):
    return sum(int(np.prod(v.shape)) for v in variables)


# LoRA on a d × d kernel (query, key, value (32, 2, 16); attention output (2, 16, 32)):
# A (32, r) + B (r, 32) = 2·r·d = 64·r; on the feed-forward kernels (32, 128), (128, 32):
# 32·r + r·128 = 160·r each.
@pytest.mark.parametrize("targets, per_layer", [("query_value", 2 * 64),
                                                ("attention", 4 * 64),
                                                ("attention_ffn", 4 * 64 + 2 * 160)])
def test_lora_trains_exactly_the_hand_counted_factors_and_the_head(tmp_path, targets, per_layer):
    rank = 4
    model = _model(_config(tmp_path, lora_rank=rank, lora_targets=targets))
    trained = model.trainable_variables
    assert _count(trained) == 2 * per_layer * rank + HEAD
    encoder = {id(v) for v in model.backbone.weights}
    encoder_trained = [v for v in trained if id(v) in encoder]
    assert encoder_trained and all("lora_kernel" in v.path for v in encoder_trained)
    model.set_backbone_trainable(False)  # the frozen phase (stack-and-LoRA): the head only
    assert _count(model.trainable_variables) == HEAD
    model.set_backbone_trainable(True)  # fine-tuning again: the same factors, nothing else
    assert _count(model.trainable_variables) == 2 * per_layer * rank + HEAD


def test_bitfit_trains_the_encoder_biases_and_layer_norms(tmp_path):
    model = _model(_config(tmp_path, trainable_encoder="bitfit"))
    # per layer: q, k, v biases (2, 16) = 3·32, attention output 32, feed-forward 128 + 32,
    # two LayerNorms 2·64; plus the embeddings' LayerNorm 64 and the pooler's bias 32.
    per_layer = 3 * 32 + 32 + 128 + 32 + 2 * 64
    assert _count(model.trainable_variables) == 2 * per_layer + 64 + 32 + HEAD
    encoder = {id(v) for v in model.backbone.weights}
    leaves = {v.path.rsplit("/", 1)[-1] for v in model.trainable_variables if id(v) in encoder}
    assert leaves == {"bias", "gamma", "beta"}


def test_paths_of_the_encoder_weights_are_unique():
    backbone = encoders.random_encoder("2/32/2", seed=3).backbone
    paths = [v.path for v in backbone.weights]
    assert len(paths) == len(set(paths))  # TaskModel.train_only keeps variables as paths


def _snapshot_run(tmp_path, monkeypatch, name="run", **overrides):
    """Runs; returns (metrics, {path: value} of the live model at its last checkpoint,
    the live model)."""
    seen = {}
    original_save = run_state.RunState.save

    def save(self, *args):
        original_save(self, *args)
        seen["model"] = self.model
        seen["weights"] = {v.path: v.numpy().copy() for v in self.model.weights}

    monkeypatch.setattr(run_state.RunState, "save", save)
    metrics = run_lib.execute(_config(tmp_path, name, **overrides))
    monkeypatch.setattr(run_state.RunState, "save", original_save)
    return metrics, seen["weights"], seen["model"]


def _fresh():
    return {v.path: v.numpy() for v in encoders.random_encoder("2/32/2", seed=3).backbone.weights}


def _saved_encoder(run_dir):
    return {v.path: v.numpy() for v in encoders.load_encoder(run_dir).backbone.weights}


def test_lora_leaves_base_kernels_bit_identical_and_saves_them_merged(tmp_path, monkeypatch):
    rank, alpha = 2, 6.0
    _, live, model = _snapshot_run(tmp_path, monkeypatch, lora_rank=rank, lora_alpha=alpha)
    fresh, saved = _fresh(), _saved_encoder(str(tmp_path / "run"))
    assert set(saved) == set(fresh)  # encoder/ has no LoRA factors
    adapted = {layer.path + "/kernel" for layer in
               adapters.lora_layers(model.backbone, "query_value")}
    assert len(adapted) == 4
    for path, initial in fresh.items():
        np.testing.assert_array_equal(live[path], initial)  # the live base weights: untouched
        if path not in adapted:
            np.testing.assert_array_equal(saved[path], initial)
            continue
        a, b = live[path.replace("/kernel", "/lora_kernel_a")], live[
            path.replace("/kernel", "/lora_kernel_b")]
        assert np.abs(b).max() > 0  # B starts at 0: training moved it
        assert a.shape == (32, rank) and b.shape == (rank, 2, 16)  # the paper's factors
        merged = initial + alpha / rank * np.einsum("ir,rhj->ihj", a, b)
        np.testing.assert_allclose(saved[path], merged, rtol=0, atol=1e-6)
        assert not np.allclose(saved[path], initial)
    with open(tmp_path / "run" / "history.csv") as f:
        assert [int(r["trained_parameters"]) for r in csv.DictReader(f)] == [
            2 * 2 * 64 * rank + HEAD]


def test_bitfit_changes_only_encoder_biases_and_layer_norms(tmp_path, monkeypatch):
    _snapshot_run(tmp_path, monkeypatch, trainable_encoder="bitfit")
    fresh, saved = _fresh(), _saved_encoder(str(tmp_path / "run"))
    changed = {p for p in fresh if not np.array_equal(saved[p], fresh[p])}
    assert changed and {p.rsplit("/", 1)[-1] for p in changed} <= {"bias", "gamma", "beta"}
    assert any(p.endswith("/gamma") for p in changed) and any(p.endswith("/bias") for p in changed)


def test_the_run_state_restores_the_lora_factors(tmp_path):
    def state(model):
        return run_state.RunState(str(tmp_path), model, {})

    config = _config(tmp_path, lora_rank=2, lora_targets="attention")
    model = _model(config)
    for i, variable in enumerate(model.trainable_variables):  # as if trained
        variable.assign(np.full(variable.shape, 0.01 * (i + 1), "float32"))
    state(model).save(1, 1)
    again = _model(config)
    assert state(again).restore(lambda _: None).phase == 1
    for got, want in zip(again.weights, model.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert sum("lora_kernel" in v.path for v in again.weights) == 2 * 4 * 2


@pytest.mark.large  # three runs: ~30 s on 2 cores
def test_stack_and_lora_resumes_to_the_uninterrupted_run(tmp_path, interrupt_after_save):
    kwargs = dict(frozen_epochs=1.0, num_train_epochs=2.0, lora_rank=2,
                  lora_targets="attention_ffn")
    reference = run_lib.execute(_config(tmp_path, "straight", **kwargs))
    restore = interrupt_after_save(1, 1)  # the first LoRA epoch saved
    with pytest.raises(KeyboardInterrupt):
        run_lib.execute(_config(tmp_path, "resumed", **kwargs))
    restore()
    resumed = run_lib.execute(_config(tmp_path, "resumed", **kwargs))
    assert resumed == pytest.approx(reference, abs=1e-6)
    straight, again = (_saved_encoder(str(tmp_path / n)) for n in ("straight", "resumed"))
    moved = 0
    for path, value in straight.items():
        np.testing.assert_allclose(again[path], value, rtol=0, atol=1e-6)
        moved += not np.array_equal(value, _fresh()[path]) if path.endswith("kernel") else 0
    assert moved == 2 * 6  # every adapted kernel: the LoRA factors were restored, not reset
    rows = [list(csv.DictReader(open(tmp_path / n / "history.csv")))
            for n in ("straight", "resumed")]
    assert [(r["phase"], r["step"], r["trained_parameters"]) for r in rows[1]] == [
        (r["phase"], r["step"], r["trained_parameters"]) for r in rows[0]]
    assert [int(r["trained_parameters"]) for r in rows[0]] == [
        HEAD, 2 * (4 * 64 + 2 * 160) * 2 + HEAD, 2 * (4 * 64 + 2 * 160) * 2 + HEAD]


def test_exports_are_plain_encoders_with_the_lora_models_outputs(tmp_path, monkeypatch):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    from kerasbert.export import checkpoint, saved_model

    _, _, model = _snapshot_run(tmp_path, monkeypatch, lora_rank=4,
                                lora_targets="attention_ffn")
    run_dir = str(tmp_path / "run")
    assert adapters.has_lora(model.backbone)
    rng = np.random.default_rng(0)
    ids = {"token_ids": rng.integers(1, 1000, (3, 12)).astype("int32"),
           "segment_ids": np.zeros((3, 12), "int32"), "padding_mask": np.ones((3, 12), "int32")}
    ids["padding_mask"][1, 7:] = 0
    want_logits = model(ids).numpy()
    want_sequence = model.backbone(ids)["sequence_output"].numpy()

    path = saved_model.export_run(run_dir, str(tmp_path / "serving"))
    loaded = tf.saved_model.load(path)
    stored = {tuple(shape) for _, shape in tf.train.list_variables(
        os.path.join(path, "variables", "variables"))}
    factors = {tuple(w.shape) for layer in adapters.lora_layers(model.backbone, "attention_ffn")
               for w in (layer.lora_kernel_a, layer.lora_kernel_b)}
    assert (32, 2, 16) in stored and (128, 32) in stored  # the kernels are there...
    assert not stored & factors  # ...and no LoRA factor: (32, 2, 4), (4, 16), (32, 4), ...
    served = loaded.signatures["serve_token_ids"](**{k: tf.constant(v) for k, v in ids.items()})
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               tf.nn.softmax(want_logits).numpy(), atol=1e-5)

    checkpoint.export_checkpoint(run_dir, str(tmp_path / "hf"), "huggingface")
    tensors = load_file(str(tmp_path / "hf" / checkpoint.HF_WEIGHTS))
    assert tensors and not [k for k in tensors if "lora" in k]
    hf = encoders.load_encoder(str(tmp_path / "hf")).backbone
    assert not adapters.has_lora(hf)
    np.testing.assert_allclose(hf(ids)["sequence_output"].numpy(), want_sequence, atol=1e-5)
    rebuilt = saved_model.load_run(run_dir).model  # model.weights.h5: what every export reads
    assert not adapters.has_lora(rebuilt.backbone)
    np.testing.assert_allclose(rebuilt(ids).numpy(), want_logits, atol=1e-5)


@pytest.mark.parametrize("overrides, message", [
    (dict(lora_rank=-1), "--lora_rank=-1: must be 0 (off) or a positive rank"),
    (dict(lora_alpha=8.0), "--lora_alpha=8.0: scales LoRA's update: needs --lora_rank"),
    (dict(lora_rank=4, lora_alpha=0.0), "--lora_alpha=0.0: must be positive"),
    (dict(lora_targets="attention"), "--lora_targets=attention: chooses the kernels LoRA "
     "adapts: needs --lora_rank"),
    (dict(lora_targets="ffn", lora_rank=2), "--lora_targets=ffn: must be one of query_value, "
     "attention, attention_ffn"),
    (dict(trainable_encoder="head"), "--trainable_encoder=head: must be one of all, bitfit"),
    (dict(lora_rank=4, trainable_encoder="bitfit"), "--trainable_encoder=bitfit: --lora_rank "
     "already decides what trains"),
    (dict(lora_rank=4, num_train_epochs=0.0, frozen_epochs=1.0), "--lora_rank=4: adapts the "
     "encoder in the fine-tune phase, but --num_train_epochs=0 has none"),
    (dict(trainable_encoder="bitfit", num_train_epochs=0.0, frozen_epochs=1.0),
     "--trainable_encoder=bitfit: adapts the encoder in the fine-tune phase"),
    (dict(lora_rank=4, save_trajectory_every=2), "--save_trajectory_every=2: the landscape "
     "rebuilds a plain encoder"),
])
def test_bad_strategy_flags_are_one_clear_line(tmp_path, overrides, message):
    with pytest.raises(InputError) as error:
        _config(tmp_path, **overrides)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_feature_based_head_with_lora_is_refused_before_training(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(InputError, match="--lora_rank: the head feature_bilstm keeps the "
                       "encoder frozen"):
        run_lib.execute(RunConfig(**{**TINY, "task": "conll2003", "head": "feature_bilstm",
                                     "model_size": "4/32/2", "output_dir": str(out), "lora_rank": 2}))
    assert not os.path.exists(run_folder.path(str(out), run_folder.HISTORY))
    assert not os.path.exists(run_folder.path(str(out), run_folder.MODEL_WEIGHTS))
