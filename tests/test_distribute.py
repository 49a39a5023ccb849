"""Strategies: mirrored on two virtual CPUs and two multi_worker processes on localhost.

Both need a fresh process (virtual devices and collective ops are configured before TF
starts), so they run in subprocesses with a bounded time.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kerasbert import distribute
from kerasbert.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code, env=None, timeout=300, **kwargs):
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2",
           "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


MIRRORED = """
    import json
    from kerasbert import distribute
    distribute.split_cpu(2)
    import tensorflow as tf
    from tests.helpers import tiny_training as T

    one_losses, one_weights = T.train(distribute.make_strategy("one_device"))
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert mirrored.num_replicas_in_sync == 2
    two_losses, two_weights = T.train(mirrored)
    accumulated_losses, _ = T.train(mirrored, accumulation_steps=2)
    float16_losses, _ = T.train(mirrored, policy="mixed_float16")
    _, one_head = T.train(distribute.make_strategy("one_device"), head_learning_rate=2e-2)
    _, two_head = T.train(mirrored, head_learning_rate=2e-2)
    from tensorflow.python.data.ops import multi_device_iterator_ops as m
    print(json.dumps({"one": one_losses.tolist(), "two": two_losses.tolist(),
                      "device_datasets_wrapped": getattr(m._create_device_dataset,
                                                         "kerasbert_wrapped", False),
                      "two_accumulated": accumulated_losses.tolist(),
                      "two_float16": float16_losses.tolist(),
                      "max_weight_diff": max(float(abs(a - b).max())
                                             for a, b in zip(one_weights, two_weights)),
                      "max_head_lr_diff": max(float(abs(a - b).max())
                                              for a, b in zip(one_head, two_head)),
                      "head_lr_moved": max(float(abs(a - b).max())
                                           for a, b in zip(two_head, two_weights))}))
"""


@pytest.mark.large
def test_mirrored_on_two_cpus_follows_the_one_device_loss_trajectory():
    """Also with gradient accumulation and with float16 loss scaling."""
    process = _python(MIRRORED, cwd=ROOT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    # Two replicas read their batches through tf.data's per-device datasets, which the
    # Trainer made without autotuning (tests/data/test_pipeline.py says why).
    assert result["device_datasets_wrapped"]
    # Same global batch of 8: two replicas of 4, gradients summed, clipped globally.
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-5)
    assert result["max_weight_diff"] < 1e-5
    # Two replicas × two micro-batches of 2 each: still the same steps.
    np.testing.assert_allclose(result["two_accumulated"], result["one"], rtol=1e-5)
    # A head rate of its own (--head_learning_rate) is found on the mirrored variables too.
    assert result["max_head_lr_diff"] < 1e-5 < result["head_lr_moved"]
    # float16 with loss scaling across replicas (the skip-step cond runs cross-replica).
    assert np.all(np.isfinite(result["two_float16"]))
    np.testing.assert_allclose(result["two_float16"], result["one"], rtol=0.05)


MIRRORED_NORMS = """
    import json
    from kerasbert import distribute
    distribute.split_cpu(2)
    import tensorflow as tf
    from tests.helpers import tiny_training as T

    one, two, two_clipped_off = [], [], []
    T.train(distribute.make_strategy("one_device"), grad_norms=one)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    T.train(mirrored, grad_norms=two)
    T.train(mirrored, grad_norms=two_clipped_off, clip_norm=0.0)
    print(json.dumps({"one": one, "two": two, "two_clipped_off": two_clipped_off}))
"""


@pytest.mark.large
def test_mirrored_gradient_norms_are_those_of_the_summed_gradient():
    """Each replica holds half the batch's gradient: the recorded norms are of their sum
    (the one-device run's), with clipping on or off, not of one replica's part."""
    process = _python(MIRRORED_NORMS, cwd=ROOT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert len(result["one"]) == 4 and len(result["one"][0]) == 6  # 5 groups and total
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-4)
    # Without clipping the steps differ from the clipped run's after the first.
    np.testing.assert_allclose(result["two_clipped_off"][0], result["one"][0], rtol=1e-4)


WORKER = """
    import sys
    import numpy as np
    from kerasbert import main
    from kerasbert.training import run_state

    save = run_state.save_weights_atomically

    def save_and_dump(model, path):  # the final weights, also from the non-chief worker
        np.savez(sys.argv[1], *[w.numpy() for w in model.weights])
        save(model, path)

    run_state.save_weights_atomically = save_and_dump
    sys.argv = ["kerasbert", *sys.argv[2:]]
    main.run()
"""


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.large
def test_two_workers_train_the_same_weights_and_only_the_chief_writes(tmp_path):
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    processes = []
    for index in range(2):
        temp = tmp_path / f"tmp{index}"
        temp.mkdir()
        env = {"TF_CONFIG": json.dumps({"cluster": cluster,
                                        "task": {"type": "worker", "index": index}}),
               "TMPDIR": str(temp)}
        args = ["--task=sst2", "--init_checkpoint=random", "--model_size=2/32/2",
                "--max_seq_length=32", "--train_batch_size=8", "--max_train_examples=32",
                "--max_eval_examples=16", "--num_train_epochs=1", "--dropout=0",
                "--distribution_strategy=multi_worker", "--seed=5",
                f"--output_dir={tmp_path / f'out{index}'}"]
        code = WORKER.replace("sys.argv[1]", repr(str(tmp_path / f"weights{index}.npz")))
        processes.append(_python(code.replace("*sys.argv[2:]", ", ".join(map(repr, args))),
                                 env=env))
    try:
        results = [p.communicate(timeout=300) for p in processes]
    finally:
        for p in processes:
            p.kill()
    for p, (out, err) in zip(processes, results):
        assert p.returncode == 0, err[-3000:]
    batch_line = next(line for line in results[0][0].splitlines() if "global batch" in line)
    assert "global batch 8 = 2 replica(s) × 4" in batch_line, batch_line
    chief, worker = (np.load(tmp_path / f"weights{i}.npz") for i in range(2))
    assert len(chief.files) == len(worker.files) > 0
    for name in chief.files:
        np.testing.assert_array_equal(chief[name], worker[name])
    # The chief (worker 0) wrote the run; worker 1 wrote to a temporary folder, now gone.
    assert (tmp_path / "out0" / "metrics.json").exists()
    assert (tmp_path / "out0" / "model.weights.h5").exists()
    assert not (tmp_path / "out1").exists()
    assert os.listdir(tmp_path / "tmp1") == []


def test_chief_is_worker_zero_or_the_chief_task():
    workers = {"worker": ["a:1", "b:1"]}
    assert distribute.is_chief_task("worker", 0, workers)
    assert not distribute.is_chief_task("worker", 1, workers)
    with_chief = {"chief": ["c:1"], **workers}
    assert distribute.is_chief_task("chief", 0, with_chief)
    assert not distribute.is_chief_task("worker", 0, with_chief)
    assert distribute.is_chief(distribute.make_strategy("one_device"))


def test_bad_tf_config_and_missing_tpu_are_input_errors(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(InputError, match="TF_CONFIG: not a JSON object"):
        distribute.make_strategy("multi_worker")
    with pytest.raises(InputError, match="--tpu: --distribution_strategy=tpu needs"):
        distribute.make_strategy("tpu")


def test_batch_description_names_global_and_per_replica_sizes():
    strategy = distribute.make_strategy("one_device")
    assert distribute.describe_batch(strategy, 32) == "global batch 32 = 1 replica(s) × 32"
    assert distribute.describe_batch(strategy, 32, 4) == (
        "global batch 32 = 1 replica(s) × 32, each as 4 micro-batches of 8")


def _run_two_workers(tmp_path, tag, output_dir, extra_env=None, extra_args=()):
    """Runs the 2-worker CLI (both workers given the same --output_dir, as on a shared
    file system); returns [(returncode, stdout, stderr)] and the weights files."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    processes, weights = [], []
    for index in range(2):
        temp = tmp_path / f"{tag}-tmp{index}"
        temp.mkdir()
        env = {"TF_CONFIG": json.dumps({"cluster": cluster,
                                        "task": {"type": "worker", "index": index}}),
               "TMPDIR": str(temp), **(extra_env or {})}
        args = ["--task=sst2", "--init_checkpoint=random", "--model_size=2/32/2",
                "--max_seq_length=32", "--train_batch_size=8", "--max_train_examples=32",
                "--max_eval_examples=16", "--num_train_epochs=2", "--dropout=0.1",
                "--save_checkpoints_steps=2", "--distribution_strategy=multi_worker",
                "--seed=5", f"--output_dir={output_dir}", *extra_args]
        weights.append(tmp_path / f"{tag}-weights{index}.npz")
        code = WORKER.replace("sys.argv[1]", repr(str(weights[-1])))
        processes.append(_python(code.replace("*sys.argv[2:]", ", ".join(map(repr, args))),
                                 env=env))
    try:
        results = [(p.communicate(timeout=300), p.returncode) for p in processes]
    finally:
        for p in processes:
            p.kill()
    return [(code, out, err) for (out, err), code in results], weights


@pytest.mark.large
def test_two_workers_killed_mid_run_resume_from_the_chiefs_checkpoint(tmp_path):
    reference, reference_weights = _run_two_workers(tmp_path, "whole", tmp_path / "whole")
    assert all(code == 0 for code, _, _ in reference), reference[0][2][-3000:]
    # Both workers die by SIGKILL right after the second checkpoint (step 4 of 8) ...
    killed, _ = _run_two_workers(tmp_path, "killed", tmp_path / "run",
                                 extra_env={"KERASBERT_TEST_KILL_AT": "checkpoint:2"})
    assert [code for code, _, _ in killed] == [-9, -9], killed[0][2][-3000:]
    assert not (tmp_path / "run" / "metrics.json").exists()
    # ... and the same command again continues from it on both workers.
    resumed, resumed_weights = _run_two_workers(tmp_path, "resumed", tmp_path / "run")
    assert all(code == 0 for code, _, _ in resumed), resumed[1][2][-3000:]
    assert "resuming at phase 1" in resumed[0][1] + resumed[0][2]
    assert "resuming at phase 1" in resumed[1][1] + resumed[1][2]
    whole = np.load(reference_weights[0])
    for path in resumed_weights:  # both workers end where the uninterrupted run ended
        ended = np.load(path)
        for name in whole.files:
            np.testing.assert_allclose(ended[name], whole[name], rtol=0, atol=1e-6)
    assert (json.loads((tmp_path / "run" / "metrics.json").read_text())
            == json.loads((tmp_path / "whole" / "metrics.json").read_text()))
