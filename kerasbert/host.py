"""The CPU a process runs on, from /proc/cpuinfo: its model name and ISA flags.

One reader for the places that ask (the bfloat16 hint of a run, the host record every
benchmark writes beside its numbers, the LiteRT server's default threads), so they cannot
disagree about a host.
"""

import os
import platform
import re


def read_cpuinfo():
    """/proc/cpuinfo's text, or "" where there is none (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def cpu(cpuinfo=None):
    """{"model": the first processor's model name (else platform.processor(), else
    "unknown CPU"), "flags": the set of its ISA flags ("avx512f", "amx_bf16", ...)}.
    `cpuinfo`: /proc/cpuinfo's text (read when None)."""
    text = read_cpuinfo() if cpuinfo is None else cpuinfo
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    return {"model": model.group(1).strip() if model else platform.processor() or "unknown CPU",
            "flags": set(flags.group(1).split()) if flags else set()}


def usable_cores():
    """The cores this process may run on (its CPU affinity: a container's or taskset's
    limit), which is what a thread pool should be sized to, not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
