"""--reinit_top_layers=L: the top L transformer layers and the pooler start again from BERT's
pre-training initialisation (Zhang et al. 2021); nothing below them moves."""

import keras
import numpy as np
import pytest

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.model.backbone import random_backbone, reinit_top_layers

# A truncated normal's std: 0.02 · sqrt(1 − 4·φ(2)/(2Φ(2) − 1)) for a cut at 2 sigma.
TRUNCATED_STD = 0.02 * 0.87962566


def filled_backbone(value=0.5):
    """A 3-layer encoder with every weight set to `value`: unlike any initialisation."""
    backbone = random_backbone("3/64/2", vocab_size=100, max_position=32)
    for weight in backbone.weights:
        weight.assign(np.full(weight.shape, value, weight.dtype))
    return backbone


def by_path(weights):
    return {w.path: np.array(w.numpy()) for w in weights}


def test_top_layers_and_pooler_start_from_berts_initialisation_the_rest_stays():
    backbone = filled_backbone()
    reinit_top_layers(backbone, 2, seed=5)
    layers = backbone.transformer_layers
    untouched = (list(backbone.token_embedding.weights) + list(layers[0].weights)
                 + list(backbone.embeddings_layer_norm.weights))
    assert all((value == 0.5).all() for value in by_path(untouched).values())

    reset = by_path([w for layer in layers[1:] for w in layer.weights]
                    + list(backbone.pooled_dense.weights))
    kernels = np.concatenate([v.ravel() for p, v in reset.items() if p.endswith("kernel")])
    assert len(kernels) > 30_000
    assert abs(kernels.mean()) < 5e-4
    assert kernels.std() == pytest.approx(TRUNCATED_STD, rel=0.02)  # N(0, 0.02) cut at 2σ
    assert np.abs(kernels).max() <= 0.04
    for path, value in reset.items():
        leaf = path.rsplit("/", 1)[-1]
        if leaf in ("bias", "beta"):
            assert (value == 0).all(), path
        elif leaf == "gamma":
            assert (value == 1).all(), path
    # 2 layers × (q, k, v, output, 2 feed-forward kernels) + the pooler's kernel
    assert sum(p.endswith("kernel") for p in reset) == 13
    assert any("pooled_dense" in p for p in reset)


def test_the_same_seed_gives_the_same_weights_another_seed_others():
    weights = []
    for seed in (5, 5, 6):
        backbone = filled_backbone()
        reinit_top_layers(backbone, 1, seed=seed)
        weights.append(by_path(backbone.weights))
    assert all(np.array_equal(weights[0][p], weights[1][p]) for p in weights[0])
    pooler = [p for p in weights[0] if "pooled_dense" in p and p.endswith("kernel")]
    assert pooler and not np.array_equal(weights[0][pooler[0]], weights[2][pooler[0]])


def test_zero_changes_nothing_and_too_many_layers_or_no_bert_structure_are_refused():
    backbone = filled_backbone()
    reinit_top_layers(backbone, 0, seed=5)
    assert all((w.numpy() == 0.5).all() for w in backbone.weights)
    with pytest.raises(InputError, match=r"^--reinit_top_layers=4: the encoder has only 3 "):
        reinit_top_layers(backbone, 4, seed=5)
    with pytest.raises(InputError, match=r"^--reinit_top_layers=1: the encoder \(Dense\) has "
                                         "no BERT transformer layers"):
        reinit_top_layers(keras.layers.Dense(3), 1, seed=5)


def test_bad_values_and_combinations_are_refused_before_training(tmp_path):
    base = dict(task="sst2", output_dir=str(tmp_path / "out"))
    with pytest.raises(InputError, match="^--reinit_top_layers=-1: must be 0"):
        RunConfig(**base, reinit_top_layers=-1)
    with pytest.raises(InputError, match="^--reinit_top_layers=2: re-initialised layers must "
                                         "be fine-tuned in full; --lora_rank"):
        RunConfig(**base, reinit_top_layers=2, lora_rank=4)
    with pytest.raises(InputError, match="^--reinit_top_layers=2: .*--num_train_epochs=0"):
        RunConfig(**base, reinit_top_layers=2, num_train_epochs=0, frozen_epochs=1)
    # More layers than the encoder has: refused once the encoder is known, before any
    # training and before the run folder is made.
    with pytest.raises(InputError, match="^--reinit_top_layers=3: the encoder has only 2 "):
        run_lib.execute(RunConfig(**base, reinit_top_layers=3, init_checkpoint="random",
                                  model_size="2/32/2", max_train_examples=8,
                                  max_eval_examples=8, max_seq_length=16))
    assert not (tmp_path / "out" / "run_config.json").exists()
