"""Progress lines for a log: when stdout is not a terminal (a file, a pipe, a cluster's log),
no progress bar redraws there, so a phase prints one line at least every `every` seconds and
at each epoch's end:

    kerasbert: finetune step 120/900 (epoch 1/3): 85.3 examples/s, ETA 9m08s, loss 0.6931

`KERASBERT_PROGRESS_SECONDS` changes the 30 s (0: a line every step). It reads the loss the
training loop already brought to the host and the clock: no extra device work per step.
"""

import os
import sys
import time

EVERY_SECONDS = 30.0


def format_seconds(seconds):
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class Progress:
    """One phase's progress lines. `step(n, loss)` after each optimizer step (n: the
    phase's steps done so far), `epoch_end(...)` after each epoch."""

    def __init__(self, phase, total_steps, batch_size, log, every=None, enabled=None,
                 clock=time.monotonic):
        self.phase, self.total, self.batch_size, self.log = phase, total_steps, batch_size, log
        if every is None:
            every = float(os.environ.get("KERASBERT_PROGRESS_SECONDS", EVERY_SECONDS))
        self.every, self.clock = every, clock
        self.enabled = (not sys.stdout.isatty()) if enabled is None else enabled
        self.started = self.last = clock()
        self.first_step = None  # the step this process started at (a resumed run: later)
        self.losses, self.epoch_losses, self.epoch = [], [], ""

    def step(self, step, loss, epoch=None, epochs=None):
        if not self.enabled:
            return
        if self.first_step is None:
            self.first_step = step - 1
        self.losses.append(loss)
        self.epoch_losses.append(loss)
        if epoch is not None:
            self.epoch = f" (epoch {epoch}/{epochs})"
        if self.clock() - self.last >= self.every:
            self.emit(step)

    def epoch_end(self, step, epoch, epochs):
        if self.enabled:
            self.epoch = f" (epoch {epoch}/{epochs} done)"
            self.losses = self.epoch_losses  # the epoch's mean training loss
            self.emit(step)
            self.epoch_losses = []

    def emit(self, step):
        now = self.clock()
        steps = step - (self.first_step if self.first_step is not None else step)
        elapsed = max(now - self.started, 1e-9)
        rate = steps / elapsed
        parts = [f"{rate * self.batch_size:.1f} examples/s"]
        if rate > 0:
            parts.append(f"ETA {format_seconds((self.total - step) / rate)}")
        if self.losses:
            parts.append(f"loss {sum(self.losses) / len(self.losses):.4f}")
        self.log(f"kerasbert: {self.phase} step {step}/{self.total}{self.epoch}: "
                 + ", ".join(parts))
        self.losses, self.last = [], now
