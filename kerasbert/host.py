"""The CPU a process runs on, from /proc/cpuinfo: its model name and ISA flags.

One reader for the three places that ask (the bfloat16 hint of a run, and the host record
every benchmark writes beside its numbers), so they cannot disagree about a host.
"""

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
