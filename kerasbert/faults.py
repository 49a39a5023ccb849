"""Deterministic crash points for the resume tests.

`KERASBERT_TEST_KILL_AT=<event>[:<n>]` makes the process SIGKILL itself the n-th time
(default: the first) it reaches the named point, exactly as an outside `kill -9` would,
but at a reproducible moment. Events: train_step (after each optimizer step), checkpoint
(after a checkpoint is complete), checkpoint_torn (same, but the checkpoint's data is
truncated first, as a crash mid-write can leave it), evaluation, prediction, export.
Unset (always, outside tests), every crash point is a no-op.
"""

import collections
import os
import signal
import sys

ENV = "KERASBERT_TEST_KILL_AT"
_reached = collections.Counter()


def crash_point(event, before_kill=None):
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != event:
        return
    _reached[event] += 1
    if _reached[event] == int(nth or 1):
        if before_kill is not None:
            before_kill()
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
