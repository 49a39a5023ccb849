"""The process's peak resident memory during a training phase (history.csv's peak_rss_mb).

Linux keeps a high-water mark of the resident set (VmHWM in /proc/self/status); writing 5
to /proc/self/clear_refs resets it to the current resident set, so a phase's own peak can
be read even when several runs share one process (the pretraining_ablation experiment runs
all its fine-tunings in one). Where there is no procfs (macOS) the mark cannot be reset and
the peak is not recorded: None, and the column stays empty.
"""


def reset_peak_rss():
    """Starts a new high-water mark at the current resident set; False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb():
    """The resident set's high-water mark in MiB since the last reset (or process start);
    None where /proc/self/status does not give it."""
    return _status_mb("VmHWM")


def rss_mb():
    """The resident set now, in MiB; None where /proc/self/status does not give it."""
    return _status_mb("VmRSS")


def _status_mb(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None
