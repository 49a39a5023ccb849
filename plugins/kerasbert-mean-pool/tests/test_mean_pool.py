import numpy as np
import pytest
from kerasbert_mean_pool import MeanPoolHead


def test_mean_over_real_tokens_only():
    head = MeanPoolHead(1, dropout=0.0)
    sequence = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], np.float32)
    features = {"sequence_output": sequence, "padding_mask": np.array([[1, 1, 0]], np.int32)}
    out = np.asarray(head(features))
    kernel, bias = (np.asarray(w) for w in head.output_dense.weights)
    # mean of the two real tokens: [2, 3]; the padded [100, 100] must not count
    np.testing.assert_allclose(out, np.array([[2.0, 3.0]]) @ kernel + bias, rtol=1e-6)


def test_registered_through_the_entry_point():
    from kerasbert import plugins

    plugins.registry.cache_clear()
    registry = plugins.registry()
    assert registry.head("mean_pool").kinds == ("classification", "regression",
                                                "multiple_choice")
    assert registry.heads["mean_pool"][1] == "plugin distribution 'kerasbert-mean-pool'"


@pytest.mark.large
def test_trains_with_kerasbert_main(tmp_path):
    import json

    from kerasbert.config import RunConfig
    from kerasbert.run import execute

    config = RunConfig(task="sst2", head="mean_pool", output_dir=str(tmp_path / "run"),
                       init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
                       num_train_epochs=1.0, max_train_examples=16, train_batch_size=8,
                       head_options={"mean_pool_dropout": 0.0})
    metrics = execute(config)
    assert json.loads((tmp_path / "run" / "run_config.json").read_text())["head"] == "mean_pool"
    assert 0.0 <= metrics["accuracy"] <= 1.0
