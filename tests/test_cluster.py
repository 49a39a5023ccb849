"""TF_CONFIG from SLURM's variables: the host-list parser on hand-written node lists, the
rank layout, the errors; and (large) a two-worker training started the way `srun` starts
one, with no TF_CONFIG."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from kerasbert import cluster
from kerasbert.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("nodelist, hosts", [
    ("node01", ["node01"]),
    ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
    ("node[8-11]", ["node8", "node9", "node10", "node11"]),
    ("node[098-101]", ["node098", "node099", "node100", "node101"]),
    ("gpu-a[1-2],login,cpu[3,5]", ["gpu-a1", "gpu-a2", "login", "cpu3", "cpu5"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("n[1-2].cluster.org", ["n1.cluster.org", "n2.cluster.org"]),
    ("127.0.0.1", ["127.0.0.1"]),
])
def test_compressed_node_lists_expand_in_slurms_order(nodelist, hosts):
    assert cluster.expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("nodelist, message", [
    ("node[01-03", "unbalanced brackets"),
    ("node01-03]", "unbalanced brackets"),
    ("node[[1-2]]", "unbalanced brackets"),
    ("node[3-1]", "runs backwards"),
    ("node[a-c]", "'a-c' is not a number or a range"),
    ("node1,,node2", "an empty host name"),
])
def test_malformed_node_lists_name_the_variable(nodelist, message):
    with pytest.raises(InputError, match=r"SLURM_JOB_NODELIST=.*" + message):
        cluster.expand_nodelist(nodelist)


def test_tasks_per_node_expand_their_repeat_counts():
    assert cluster.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert cluster.expand_tasks_per_node("4") == [4]
    with pytest.raises(InputError, match=r"SLURM_TASKS_PER_NODE=2\(3\): '2\(3\)' is not"):
        cluster.expand_tasks_per_node("2(3)")


def _slurm(**overrides):
    env = {"SLURM_JOB_NODELIST": "node[01-02],gpu7", "SLURM_TASKS_PER_NODE": "2(x2),1",
           "SLURM_NTASKS": "5", "SLURM_PROCID": "3"}
    return {k: v for k, v in {**env, **overrides}.items() if v is not None}


def test_ranks_are_laid_out_host_by_host_with_a_port_per_task():
    config = cluster.tf_config_from_slurm(_slurm())
    assert config == {"cluster": {"worker": ["node01:8888", "node01:8889", "node02:8888",
                                             "node02:8889", "gpu7:8888"]},
                      "task": {"type": "worker", "index": 3}}
    config = cluster.tf_config_from_slurm(_slurm(KERASBERT_WORKER_PORT="20000"))
    assert config["cluster"]["worker"][:2] == ["node01:20000", "node01:20001"]


def test_step_variables_win_over_the_allocations():
    env = _slurm(SLURM_STEP_NODELIST="node02", SLURM_STEP_NUM_TASKS="2",
                 SLURM_STEP_TASKS_PER_NODE="2", SLURM_PROCID="1")
    assert cluster.tf_config_from_slurm(env) == {
        "cluster": {"worker": ["node02:8888", "node02:8889"]},
        "task": {"type": "worker", "index": 1}}


def test_without_tasks_per_node_the_tasks_divide_evenly_or_it_says_so():
    env = _slurm(SLURM_TASKS_PER_NODE=None, SLURM_NTASKS="6", SLURM_PROCID="0")
    assert cluster.tf_config_from_slurm(env)["cluster"]["worker"][::2] == [
        "node01:8888", "node02:8888", "gpu7:8888"]
    with pytest.raises(InputError, match="5 tasks do not divide evenly over 3 hosts"):
        cluster.tf_config_from_slurm(_slurm(SLURM_TASKS_PER_NODE=None))


@pytest.mark.parametrize("overrides, message", [
    ({"SLURM_PROCID": "5"}, "SLURM_PROCID=5: not below SLURM_NTASKS=5"),
    ({"SLURM_NTASKS": "4"}, "SLURM_NTASKS=4: but the hosts' task counts add up to 5"),
    ({"SLURM_NTASKS": None}, "SLURM_STEP_NUM_TASKS: not set, but SLURM_PROCID is"),
    ({"SLURM_NTASKS": "two"}, "SLURM_NTASKS=two: not a non-negative integer"),
    ({"SLURM_TASKS_PER_NODE": "2,1"}, "SLURM_TASKS_PER_NODE: 2 host.s. but the node list has 3"),
    ({"KERASBERT_WORKER_PORT": "65535"}, "KERASBERT_WORKER_PORT=65535: not a port"),
])
def test_inconsistent_slurm_variables_are_one_line_errors(overrides, message):
    with pytest.raises(InputError, match=message):
        cluster.tf_config_from_slurm(_slurm(**overrides))


def test_only_an_srun_task_counts_as_a_slurm_step():
    assert cluster.in_slurm_step(_slurm())
    assert not cluster.in_slurm_step(_slurm(SLURM_PROCID=None))  # salloc / sbatch shell
    assert not cluster.in_slurm_step({})


def test_read_tf_config_builds_and_sets_tf_config_in_a_slurm_task(monkeypatch, capsys):
    from kerasbert import distribute

    monkeypatch.setenv("TF_CONFIG", "")  # empty = unset; restored (to unset) at teardown
    for name, value in _slurm(SLURM_PROCID="0").items():
        monkeypatch.setenv(name, value)
    config = distribute.read_tf_config()
    assert json.loads(os.environ["TF_CONFIG"]) == config
    assert config["task"] == {"type": "worker", "index": 0}
    assert distribute.writes_outputs("multi_worker")  # worker 0 is the chief
    assert capsys.readouterr().out == ("kerasbert: TF_CONFIG from SLURM: worker 0 of 5 "
                                       "(node01:8888; worker 0 at node01:8888)\n")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:1"]},
                                                "task": {"type": "worker", "index": 1}}))
    assert distribute.read_tf_config()["cluster"] == {"worker": ["a:1", "b:1"]}  # TF_CONFIG wins


def _two_free_consecutive_ports():
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base >= 65535:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", base))
                b.bind(("127.0.0.1", base + 1))
            return base
        except OSError:
            continue
    pytest.skip("no two consecutive free ports on 127.0.0.1")


# Each worker dumps its final weights to compare (as tests/test_distribute.py's workers do).
WORKER = """
import sys
import numpy as np
from kerasbert import main
from kerasbert.training import run_state

save = run_state.save_weights_atomically
dump = sys.argv[1]

def save_and_dump(model, path):
    np.savez(dump, *[w.numpy() for w in model.weights])
    save(model, path)

run_state.save_weights_atomically = save_and_dump
sys.argv = ["kerasbert", *sys.argv[2:]]
main.run()
"""


@pytest.mark.large
def test_two_srun_tasks_train_as_two_workers_without_tf_config(tmp_path):
    port = _two_free_consecutive_ports()
    processes = []
    for rank in range(2):
        temp = tmp_path / f"tmp{rank}"
        temp.mkdir()
        env = {k: v for k, v in os.environ.items()  # a real SLURM step's vars would win
               if k != "TF_CONFIG" and not k.startswith("SLURM_")}
        env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                   TMPDIR=str(temp), SLURM_JOB_NODELIST="127.0.0.1", SLURM_NTASKS="2",
                   SLURM_TASKS_PER_NODE="2", SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),
                   KERASBERT_WORKER_PORT=str(port))
        args = ["--task=sst2", "--init_checkpoint=random", "--model_size=2/32/2",
                "--max_seq_length=32", "--train_batch_size=8", "--max_train_examples=32",
                "--max_eval_examples=16", "--num_train_epochs=1", "--dropout=0",
                "--distribution_strategy=multi_worker", "--seed=5",
                f"--output_dir={tmp_path / f'out{rank}'}"]
        processes.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path / f"weights{rank}.npz"), *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        results = [p.communicate(timeout=300) for p in processes]
    finally:
        for p in processes:
            p.kill()
    for p, (out, err) in zip(processes, results):
        assert p.returncode == 0, err[-3000:]
    for rank, (out, _) in enumerate(results):
        assert (f"kerasbert: TF_CONFIG from SLURM: worker {rank} of 2 "
                f"(127.0.0.1:{port + rank}; worker 0 at 127.0.0.1:{port})") in out
    assert "global batch 8 = 2 replica(s) × 4" in results[0][0]
    _assert_one_training_of_two_workers(tmp_path)


def _assert_one_training_of_two_workers(folder):
    """Both workers (WORKER's weight dumps) end with the same weights; only worker 0, the
    chief, writes its output folder."""
    chief, worker = (np.load(folder / f"weights{r}.npz") for r in range(2))
    assert len(chief.files) == len(worker.files) > 0
    for name in chief.files:
        np.testing.assert_array_equal(chief[name], worker[name])
    assert (folder / "out0" / "metrics.json").exists()
    assert not (folder / "out1").exists()


# Ray Train's loop in each worker: TensorflowTrainer has set TF_CONFIG in the process, and
# the kerasbert command it starts inherits it (the README's recipe).
def _ray_worker_loop(config):
    import json as json_lib
    import os as os_lib
    import subprocess as subprocess_lib
    import sys as sys_lib

    rank = json_lib.loads(os_lib.environ["TF_CONFIG"])["task"]["index"]
    folder = config["folder"]
    # Ray sets TF_USE_LEGACY_KERAS=1 for Keras 2 code; kerasbert is Keras 3 (README recipe).
    env = {k: v for k, v in os_lib.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env = {**env, "PYTHONPATH": config["root"], "TF_CPP_MIN_LOG_LEVEL": "2",
           "CUDA_VISIBLE_DEVICES": "", "TMPDIR": os_lib.path.join(folder, f"tmp{rank}")}
    os_lib.makedirs(env["TMPDIR"], exist_ok=True)
    done = subprocess_lib.run(
        [sys_lib.executable, "-c", config["worker"], os_lib.path.join(folder, f"weights{rank}.npz"),
         *config["args"], f"--output_dir={os_lib.path.join(folder, f'out{rank}')}"],
        env=env, capture_output=True, text=True, check=False)
    with open(os_lib.path.join(folder, f"log{rank}.txt"), "w") as f:
        f.write(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"worker {rank}: exit {done.returncode}: {done.stderr[-2000:]}")


@pytest.mark.large
def test_two_ray_train_workers_train_as_two_tf_workers(tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'ray[train]'")
    from ray.train import RunConfig, ScalingConfig
    from ray.train.tensorflow import TensorflowTrainer

    args = ["--task=sst2", "--init_checkpoint=random", "--model_size=2/32/2",
            "--max_seq_length=32", "--train_batch_size=8", "--max_train_examples=32",
            "--max_eval_examples=16", "--num_train_epochs=1", "--dropout=0",
            "--distribution_strategy=multi_worker", "--seed=5"]
    ray.init(num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False,
             log_to_driver=False)
    try:
        TensorflowTrainer(
            _ray_worker_loop,
            train_loop_config={"folder": str(tmp_path), "root": ROOT, "worker": WORKER,
                               "args": args},
            scaling_config=ScalingConfig(num_workers=2, use_gpu=False,
                                         resources_per_worker={"CPU": 1}),
            run_config=RunConfig(storage_path=str(tmp_path / "ray"), name="kerasbert"),
        ).fit()
    finally:
        ray.shutdown()
    logs = [(tmp_path / f"log{r}.txt").read_text() for r in range(2)]
    assert "global batch 8 = 2 replica(s) × 4" in logs[0]
    _assert_one_training_of_two_workers(tmp_path)
