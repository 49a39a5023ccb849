"""Separate seeds for what varies (Dodge et al. 2020): --data_order_seed, --head_init_seed and
--dropout_seed each drive one part of a run and nothing else; left out, --seed drives it."""

import dataclasses
import json

import h5py
import keras
import numpy as np
import pytest

from kerasbert import plugins, restarts, sweep
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.data import pipeline
from kerasbert.errors import InputError
from kerasbert.experiments import runner
from kerasbert.model import builder, encoders


def seed_states(layer, named=False):
    """Every Keras seed generator's state under `layer`, in layer order (with the name of
    the layer holding it: Keras numbers unnamed layers on, so only with `named`)."""
    found = {}
    for sub in layer._flatten_layers(include_self=True):
        for value in vars(sub).values():
            if isinstance(value, keras.random.SeedGenerator) and id(value) not in found:
                state = tuple(int(v) for v in np.asarray(value.state))
                found[id(value)] = (sub.name, state) if named else state
    return list(found.values())


def build(head, head_init_seed, dropout_seed):
    """A tiny random encoder (its own weights fixed by seed 3) and `head`, built as a run
    builds them: the global generators seeded with the dropout seed first."""
    registry = plugins.registry()
    keras.utils.set_random_seed(head_init_seed if dropout_seed is None else dropout_seed)
    encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.1, seed=3)
    model = builder.build_task_model(registry.task("mrpc"), registry.head(head),
                                     encoder.backbone, seed=head_init_seed,
                                     dropout_seed=dropout_seed)
    return ([w.numpy() for w in model.head.weights], seed_states(model.head),
            seed_states(model.backbone))


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("head", ["cls_linear", "sim_transformer"])
def test_head_init_seed_and_dropout_seed_each_change_only_their_part(head):
    weights, head_dropout, encoder_dropout = build(head, 1, 7)
    assert head_dropout and encoder_dropout  # there is dropout to seed
    again = build(head, 1, 7)
    assert same(weights, again[0]) and head_dropout == again[1] and encoder_dropout == again[2]

    other_init = build(head, 2, 7)  # the weights move, every dropout stream stays
    assert not same(weights, other_init[0])
    assert head_dropout == other_init[1] and encoder_dropout == other_init[2]

    other_dropout = build(head, 1, 8)  # the weights stay, the head's and encoder's masks move
    assert same(weights, other_dropout[0])
    assert head_dropout != other_dropout[1] and encoder_dropout != other_dropout[2]


def test_a_dropout_seed_equal_to_the_head_seed_builds_what_one_seed_built():
    # The default (--dropout_seed = --seed) leaves the head's seed generators as they were.
    one_seed = build("sim_transformer", 4, None)
    assert same(one_seed[0], build("sim_transformer", 4, 4)[0])
    assert one_seed[1:] == build("sim_transformer", 4, 4)[1:]
    # The head's own dropout layer was seeded with the head's seed: now with the dropout seed.
    registry = plugins.registry()
    encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.1, seed=3)
    model = builder.build_task_model(registry.task("mrpc"), registry.head("cls_linear"),
                                     encoder.backbone, seed=4, dropout_seed=9)
    assert seed_states(model.head, named=True) == [("dropout", (9, 0))]


def test_each_part_takes_its_own_seed_else_seed():
    config = RunConfig(task="sst2", output_dir="out", seed=5, head_init_seed=6)
    assert [config.seed_of(p) for p in ("data_order", "head_init", "dropout")] == [5, 6, 5]
    filled = config.with_seeds()
    assert (filled.data_order_seed, filled.head_init_seed, filled.dropout_seed) == (5, 6, 5)
    assert config.describe_seeds() == "seeds data order 5, head init 6, dropout 5"
    assert RunConfig(task="sst2", output_dir="out", seed=5).describe_seeds() == "seed 5"


@pytest.mark.parametrize("vary", ["all", "data_order", "head_init", "dropout"])
def test_a_restart_varies_only_the_part_vary_seed_names(vary, tmp_path):
    base = RunConfig(task="sst2", output_dir=str(tmp_path), seed=5, vary_seed=vary)
    task = plugins.registry().task("sst2")
    runs = runner.seed_runs(base, task, str(tmp_path / "row"), [11, 12])
    planned = sweep.plan_sweep(base.resolved(task), [2e-5], 2, seeds=["11", "12"])
    for restart, config in [(11, runs[11]), (12, runs[12])] + [(p.seed, p.config)
                                                              for p in planned]:
        seeds = {p: config.seed_of(p) for p in ("data_order", "head_init", "dropout")}
        if vary == "all":
            assert config.seed == restart and set(seeds.values()) == {restart}
        else:
            assert config.seed == 5
            assert seeds == {p: restart if p == vary else 5 for p in seeds}
    assert runs[11].output_dir == restarts.seed_folder(str(tmp_path / "row"), 11)


def test_vary_seed_and_that_parts_own_seed_are_refused_together():
    config = RunConfig(task="sst2", output_dir="out", vary_seed="dropout", dropout_seed=3)
    with pytest.raises(InputError, match=r"^--dropout_seed=3: --vary_seed=dropout gives"):
        sweep.plan_sweep(config, [2e-5], 2)
    with pytest.raises(InputError, match="^--vary_seed=none: must be one of all, data_order"):
        RunConfig(task="sst2", output_dir="out", vary_seed="none")


# --- Whole runs ---------------------------------------------------------------------------

SETTINGS = dict(task="sst2", init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
                train_batch_size=8, num_train_epochs=1.0, learning_rate=1e-3,
                max_train_examples=24, max_eval_examples=16, seed=5, dropout=0.1)


@pytest.fixture
def observed(monkeypatch):
    """run(**settings) → what the run started from and did: the token ids of its training
    batches in order, the head's initial weights, every dropout seed at the start, the
    final weights and the run_config.json it wrote."""
    seen = {}
    dataset_of, build_task_model = pipeline.dataset_of, builder.build_task_model

    def recording_dataset_of(features, batch_size, shuffle_seed=None, **kw):
        ds = dataset_of(features, batch_size, shuffle_seed, **kw)
        if shuffle_seed is not None:  # a training epoch
            seen["order"] = [x["token_ids"].numpy() for x, _ in ds]
        return ds

    def recording_build(*args, **kw):
        model = build_task_model(*args, **kw)
        seen["head"] = [w.numpy() for w in model.head.weights]
        seen["dropout"] = seed_states(model)
        return model

    monkeypatch.setattr(pipeline, "dataset_of", recording_dataset_of)
    monkeypatch.setattr(builder, "build_task_model", recording_build)

    def run(tmp_path, name, **changes):
        out = tmp_path / name
        run_lib.execute(RunConfig(**{**SETTINGS, **changes}, output_dir=str(out)))
        with h5py.File(out / "model.weights.h5") as f:
            final = []
            f.visititems(lambda n, o: final.append(o[()]) if isinstance(o, h5py.Dataset)
                         else None)
        config = json.loads((out / "run_config.json").read_text())
        return dict(seen, final=final, config=config)

    return run


@pytest.mark.large  # five tiny training runs (~1 min on a loaded CPU)
def test_each_seed_moves_only_its_part_of_a_run(tmp_path, observed):
    base = observed(tmp_path, "base")
    assert {k: base["config"][k] for k in ("data_order_seed", "head_init_seed",
                                          "dropout_seed")} == dict.fromkeys(
        ("data_order_seed", "head_init_seed", "dropout_seed"), 5)  # recorded, filled in

    explicit = observed(tmp_path, "explicit", data_order_seed=5, head_init_seed=5,
                        dropout_seed=5)  # the default is --seed, bit for bit
    assert same(explicit["order"], base["order"]) and same(explicit["head"], base["head"])
    assert explicit["dropout"] == base["dropout"] and same(explicit["final"], base["final"])

    order = observed(tmp_path, "order", data_order_seed=6)
    assert not same(order["order"], base["order"])
    assert same(order["head"], base["head"]) and order["dropout"] == base["dropout"]

    init = observed(tmp_path, "init", head_init_seed=6)
    assert not same(init["head"], base["head"])
    assert same(init["order"], base["order"]) and init["dropout"] == base["dropout"]

    dropout = observed(tmp_path, "dropout", dropout_seed=6)
    assert dropout["dropout"] != base["dropout"]
    assert same(dropout["order"], base["order"]) and same(dropout["head"], base["head"])
    assert not same(dropout["final"], base["final"])  # other masks, another outcome
    assert dropout["config"]["dropout_seed"] == 6 and dropout["config"]["seed"] == 5


def test_a_run_recorded_with_its_seeds_resumes_under_the_same_flags(tmp_path):
    # run_config.json holds the filled-in seeds; the same flags (seeds left out) are the
    # same run, and so is a folder written before the seeds had settings of their own.
    from kerasbert import run_folder

    config = RunConfig(task="sst2", output_dir=str(tmp_path), seed=5)
    run_folder.write_config(str(tmp_path), config.with_seeds())
    assert run_folder.changed_settings(str(tmp_path), config, ()) == []
    old = {k: v for k, v in config.to_dict().items() if not k.endswith("_seed")
           or k == "seed"}
    (tmp_path / "run_config.json").write_text(json.dumps(old))
    assert run_folder.changed_settings(str(tmp_path), config.with_seeds(), ()) == []
    changed = run_folder.changed_settings(
        str(tmp_path), dataclasses.replace(config, dropout_seed=6), ())
    assert changed == [("dropout_seed", 5, 6)]
