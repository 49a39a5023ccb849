"""TF_CONFIG from a cluster launcher's environment: a SLURM job step.

MultiWorkerMirroredStrategy learns the cluster and this process's place in it from
TF_CONFIG. Under `srun` every task already knows both from SLURM's variables, so a
`--distribution_strategy=multi_worker` run started by `srun` without TF_CONFIG gets one
built from them (kerasbert/distribute.py):

    SLURM_STEP_NODELIST / SLURM_JOB_NODELIST   the hosts, compressed: node[01-03,07],gpu-b
    SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE   tasks on each host: 2(x3),1
    SLURM_STEP_NUM_TASKS / SLURM_NTASKS         how many tasks in all
    SLURM_PROCID                                this task's rank
    KERASBERT_WORKER_PORT                       the first port on each host (default 8888);
                                                the k-th task on a host listens on port + k

Ranks are laid out as SLURM's default block distribution does: the first host's tasks
first, then the next host's (with `srun --distribution=cyclic` the ranks would not match:
set TF_CONFIG yourself then). Ray Train's TensorflowTrainer and Kubeflow's TFJob write
TF_CONFIG themselves: nothing is needed here for them.
"""

import itertools
import re

from kerasbert.errors import InputError

DEFAULT_PORT = 8888  # what tf.distribute.cluster_resolver.SlurmClusterResolver starts at
PORT_VARIABLE = "KERASBERT_WORKER_PORT"


def expand_nodelist(text, name="SLURM_JOB_NODELIST"):
    """SLURM's compressed host list as host names, in order:
    "node[01-03,07],login" -> node01 node02 node03 node07 login (zero padding kept;
    several bracket groups in one name multiply: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2)."""
    hosts = []
    for entry in _split_top_level(text, name):
        parts = re.split(r"(\[[^\[\]]*\])", entry)
        if any(c in p for p in parts[::2] for c in "[]"):
            raise InputError(f"{name}={text}: unbalanced brackets in {entry!r}")
        choices = [_expand_ranges(p[1:-1], text, name) if p.startswith("[") else [p]
                   for p in parts]
        hosts += ["".join(combo) for combo in itertools.product(*choices)]
    return hosts


def _split_top_level(text, name):
    """Splits on the commas outside brackets."""
    entries, depth, current = [], 0, ""
    for char in text.strip():
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise InputError(f"{name}={text}: unbalanced brackets")
        if char == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise InputError(f"{name}={text}: unbalanced brackets")
    entries.append(current)
    if not all(entries):
        raise InputError(f"{name}={text}: an empty host name")
    return entries


def _expand_ranges(spec, text, name):
    """"01-03,07" -> 01 02 03 07 (the width of a range's first number is kept)."""
    values = []
    for item in spec.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not match:
            raise InputError(f"{name}={text}: {item!r} is not a number or a range a-b")
        first, last = match[1], match[2] if match[2] is not None else match[1]
        if int(last) < int(first):
            raise InputError(f"{name}={text}: the range {item!r} runs backwards")
        values += [str(n).zfill(len(first)) for n in range(int(first), int(last) + 1)]
    return values


def expand_tasks_per_node(text, name="SLURM_TASKS_PER_NODE"):
    """"2(x3),1" -> [2, 2, 2, 1]."""
    counts = []
    for item in text.strip().split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not match or int(match[1]) < 1:
            raise InputError(f"{name}={text}: {item!r} is not a count or count(xN)")
        counts += [int(match[1])] * int(match[2] or 1)
    return counts


def in_slurm_step(environ):
    """Whether this process is a task of a SLURM job step (started by srun)."""
    return "SLURM_PROCID" in environ and any(
        environ.get(v) for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))


def tf_config_from_slurm(environ):
    """The TF_CONFIG dict of this SLURM task: every task a worker, this one at its rank."""
    def variable(*names):
        for n in names:
            if environ.get(n, "").strip():
                return n, environ[n].strip()
        raise InputError(f"{names[0]}: not set, but SLURM_PROCID is (a SLURM job step "
                         "needs it to build TF_CONFIG)")

    def integer(name, value):
        if not re.fullmatch(r"\d+", value):
            raise InputError(f"{name}={value}: not a non-negative integer")
        return int(value)

    nodelist_name, nodelist = variable("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                       "SLURM_NODELIST")
    nodes = expand_nodelist(nodelist, nodelist_name)
    ntasks = integer(*variable("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"))
    rank = integer("SLURM_PROCID", environ["SLURM_PROCID"].strip())
    port_text = environ.get(PORT_VARIABLE, str(DEFAULT_PORT)).strip()
    port = integer(PORT_VARIABLE, port_text)
    if any(environ.get(n, "").strip() for n in ("SLURM_STEP_TASKS_PER_NODE",
                                                "SLURM_TASKS_PER_NODE")):
        per_node_name, per_node_text = variable("SLURM_STEP_TASKS_PER_NODE",
                                                "SLURM_TASKS_PER_NODE")
        per_node = expand_tasks_per_node(per_node_text, per_node_name)
    else:
        if ntasks % len(nodes):
            raise InputError(f"SLURM_TASKS_PER_NODE: not set, and {ntasks} tasks do not "
                             f"divide evenly over {len(nodes)} hosts")
        per_node_name, per_node = "SLURM_NTASKS", [ntasks // len(nodes)] * len(nodes)
    if len(per_node) != len(nodes):
        raise InputError(f"{per_node_name}: {len(per_node)} host(s) but the node list has "
                         f"{len(nodes)}")
    if not 0 < port <= 65535 - max(per_node) + 1:
        raise InputError(f"{PORT_VARIABLE}={port_text}: not a port (1-65535) for "
                         f"{max(per_node)} task(s) per host")
    workers = [f"{host}:{port + k}" for host, count in zip(nodes, per_node)
               for k in range(count)]
    if len(workers) != ntasks:
        raise InputError(f"SLURM_NTASKS={ntasks}: but the hosts' task counts add up to "
                         f"{len(workers)}")
    if rank >= ntasks:
        raise InputError(f"SLURM_PROCID={rank}: not below SLURM_NTASKS={ntasks}")
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}
