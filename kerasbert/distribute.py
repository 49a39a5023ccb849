"""The tf.distribute strategy from the flags; who writes outputs; virtual CPUs for tests.

Every strategy runs the same custom loop (kerasbert/training/loop.py). Batch sizes in
the flags are global: each of `num_replicas_in_sync` replicas gets 1/N of a batch.
"""

import json
import os
import shutil
import tempfile

import tensorflow as tf

from kerasbert import cluster, storage
from kerasbert.errors import InputError
from kerasbert.run_folder import CHECKPOINT_DIR


def make_strategy(name="one_device", tpu=None):
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        read_tf_config()  # a malformed TF_CONFIG fails here with a clear message
        # The cluster (workers' host:port) and this process's role come from TF_CONFIG
        # (built from SLURM's variables in an srun task, see read_tf_config); without one
        # it is a cluster of one.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _tpu_strategy(tpu)
    raise InputError(f"--distribution_strategy={name}: unknown strategy")


def _tpu_strategy(tpu):
    if not tpu:
        raise InputError("--tpu: --distribution_strategy=tpu needs the TPU's name or address")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"--tpu={tpu}: no TPU reachable ({reason})") from None
    return tf.distribute.TPUStrategy(resolver)


def read_tf_config():
    """The parsed TF_CONFIG environment variable ({} when unset).

    Unset in a task of a SLURM job step (srun), it is first built from SLURM's variables
    (kerasbert/cluster.py) and set, so that MultiWorkerMirroredStrategy reads the same."""
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip() and cluster.in_slurm_step(os.environ):
        config = cluster.tf_config_from_slurm(os.environ)
        os.environ["TF_CONFIG"] = text = json.dumps(config)
        workers, index = config["cluster"]["worker"], config["task"]["index"]
        print(f"kerasbert: TF_CONFIG from SLURM: worker {index} of {len(workers)} "
              f"({workers[index]}; worker 0 at {workers[0]})", flush=True)
    if not text.strip():
        return {}
    try:
        config = json.loads(text)
        config.get("cluster", {}), config.get("task", {})
    except (ValueError, AttributeError) as e:
        raise InputError(f"TF_CONFIG: not a JSON object with cluster and task ({e})") from None
    return config


def is_chief(strategy):
    """Whether this process writes the run's outputs (every strategy but multi_worker has
    one process: the chief)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    return is_chief_task(resolver.task_type, resolver.task_id,
                         resolver.cluster_spec().as_dict())


def writes_outputs(strategy_name):
    """`is_chief` before the strategy exists (a run takes its folder's lock first): from
    TF_CONFIG, which is where MultiWorkerMirroredStrategy learns this process's role."""
    if strategy_name != "multi_worker":
        return True
    config = read_tf_config()
    task = config.get("task") or {}
    try:
        return is_chief_task(task.get("type"), int(task.get("index", 0)),
                             dict(config.get("cluster") or {}))
    except (AttributeError, TypeError, ValueError):
        raise InputError("TF_CONFIG: task must be an object with type and index") from None


def is_chief_task(task_type, task_id, cluster):
    """TensorFlow's convention: the `chief` task, or worker 0 when there is no chief."""
    if task_type is None or task_type == "chief":
        return True
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def worker_output_dir(strategy, output_dir, resume=True):
    """Where this process writes: `output_dir` for the chief; for any other worker a fresh
    temporary folder (it still runs every save, whose collectives need all workers),
    removed with `discard_worker_output`.

    With `resume`, a worker starts from the chief's checkpoints when `output_dir` holds
    them (a shared file system, as TF's multi-worker training assumes): they are linked
    (or copied) into its folder, so every worker restores the same state the chief does.
    """
    if is_chief(strategy):
        return output_dir
    folder = tempfile.mkdtemp(prefix="kerasbert-worker-")
    chief_checkpoints = os.path.join(output_dir, CHECKPOINT_DIR)
    if resume and storage.is_local(output_dir) and os.path.isdir(chief_checkpoints):
        shutil.copytree(chief_checkpoints, os.path.join(folder, CHECKPOINT_DIR),
                        copy_function=_link_or_copy)
    elif resume and storage.isdir(chief_checkpoints):  # gs://: the same state, downloaded
        os.makedirs(os.path.join(folder, CHECKPOINT_DIR))
        for name in storage.listdir(chief_checkpoints):
            if storage.isfile(os.path.join(chief_checkpoints, name)):
                storage.copy(os.path.join(chief_checkpoints, name),
                             os.path.join(folder, CHECKPOINT_DIR, name))
    return folder


def _link_or_copy(source, destination):
    try:
        os.link(source, destination)  # no copy of the weights when on the same file system
    except OSError:
        shutil.copy2(source, destination)


def discard_worker_output(strategy, output_dir):
    if not is_chief(strategy):
        shutil.rmtree(output_dir, ignore_errors=True)


def describe_batch(strategy, global_batch_size, accumulation_steps=1):
    """'global batch 32 = 2 replicas × 16' (and the micro-batches, when accumulating)."""
    replicas = strategy.num_replicas_in_sync
    per_replica = -(-global_batch_size // replicas)
    text = f"global batch {global_batch_size} = {replicas} replica(s) × {per_replica}"
    if accumulation_steps > 1:
        text += (f", each as {accumulation_steps} micro-batches of "
                 f"{-(-per_replica // accumulation_steps)}")
    return text


def split_cpu(count):
    """Splits the CPU into `count` logical devices (must run before TF initialises them)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
