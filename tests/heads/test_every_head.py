"""Every registered head (built-ins and installed plugins) on a task of its kind: one
epoch of a tiny run trains it and exports it, and the SavedModel reloads and gives the same
outputs as the trained model. Every kind a head declares gets the head harness's checks
(tests/heads/test_head_harness.py); this end-to-end run takes its first."""

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert.config import RunConfig
from kerasbert.run import execute

TASK_FOR_KIND = {"classification": "mrpc", "regression": "stsb", "multiple_choice": "swag",
                 "span": "squad_v1", "tagging": "conll2003"}
# The feature-based head's default (concat of the last four layers) needs 4 layers.
OPTIONS = {"feature_bilstm": {"feature_bilstm_layers": "last", "feature_bilstm_lstm_units": 8},
           "bimpm": {"bimpm_perspectives": 4, "bimpm_lstm_units": 8},
           "bimpm_no_context": {"bimpm_no_context_perspectives": 4,
                                "bimpm_no_context_lstm_units": 8},
           "bilstm_crf": {"bilstm_crf_lstm_units": 8}}


# The slowest to train and export on CPU (40-90 s each); their own test files cover them in
# the quick suite, and this end-to-end check runs with the large tests.
SLOW = {"bimpm", "bimpm_no_context", "feature_bilstm", "mean_pool", "sequence_classifier"}


def _task_for(kind):
    """The task a head of `kind` trains on: ours for kerasbert's kinds; for a plugin's kind
    (installed plugins' heads are here too), the first registered task of it."""
    if kind in TASK_FOR_KIND:
        return TASK_FOR_KIND[kind]
    if plugins.registry().kind(kind).serving is None:
        pytest.skip(f"kind {kind!r} has no serving signature: nothing to export")
    names = sorted(name for name, (task, _) in plugins.registry().tasks.items()
                   if task.kind == kind)
    if not names:
        pytest.skip(f"no registered task is of kind {kind!r}")
    return names[0]


def _heads():
    return [pytest.param(head, marks=pytest.mark.large) if head in SLOW else head
            for head in sorted(plugins.registry().heads)]


@pytest.mark.parametrize("head", _heads())
def test_head_trains_and_exports(tmp_path, head):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the exported graph's ops)

    from kerasbert.export.saved_model import load_run

    spec = plugins.registry().head(head)
    kind = spec.kinds[0]
    config = RunConfig(
        task=_task_for(kind), head=head, output_dir=str(tmp_path / "run"),
        init_checkpoint="random", model_size="2/32/2", max_seq_length=48, max_query_length=16,
        doc_stride=16, train_batch_size=4, max_train_examples=8, max_eval_examples=4,
        num_train_epochs=1.0, head_options=OPTIONS.get(head, {}),
        export_dir=str(tmp_path / "serving"))
    metrics = execute(config)
    assert metrics and all(np.isfinite(v) for v in metrics.values())
    run = load_run(str(tmp_path / "run"))
    served = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures["serve_token_ids"]
    inputs = {"token_ids": [[2, 5, 6, 3, 7, 3]], "segment_ids": [[0, 0, 0, 0, 1, 1]],
              "padding_mask": [[1, 1, 1, 1, 1, 1]]}
    if kind == "multiple_choice":
        inputs = {k: [v[0], v[0]] for k, v in inputs.items()}
        inputs = {k: [v] for k, v in inputs.items()}
    inputs = {k: tf.constant(v, tf.int32) for k, v in inputs.items()}
    expected = run.model(inputs, training=False).numpy()
    outputs = served(**inputs)
    if kind == "regression":
        got, expected = outputs["score"].numpy(), expected[:, 0]
    elif kind == "span":
        got = np.stack([outputs["start_logits"].numpy(), outputs["end_logits"].numpy()], -1)
    elif kind in TASK_FOR_KIND:
        got, expected = outputs["probabilities"].numpy(), tf.nn.softmax(expected).numpy()
    else:  # a plugin's kind: its float outputs, as its own serving makes them eagerly
        own = run.kind.serving.outputs(run.task, tf.constant(expected))
        floats = sorted(k for k, v in own.items() if v.dtype.is_floating)
        assert floats, f"kind {kind!r} serves no float outputs to compare"
        got = np.concatenate([outputs[k].numpy().reshape(-1) for k in floats])
        expected = np.concatenate([own[k].numpy().reshape(-1) for k in floats])
    np.testing.assert_allclose(got, expected, atol=1e-5)
