"""Which way a metric improves, and its value when it has a usable one."""

import math

# Every main metric of the built-in tasks is "higher is better"; these words mark the
# opposite (a plugin task's loss, perplexity or error rate). The guess of a metric that no
# task declares (`greater_is_better`), e.g. in a run folder of a task no longer installed.
LOWER_IS_BETTER = ("loss", "perplexity", "error", "mse")


def higher_is_better(metric):
    """The name-based guess: False for a metric whose name has a LOWER_IS_BETTER word."""
    return not any(word in metric.lower() for word in LOWER_IS_BETTER)


def greater_is_better(metric, task=None, kind=None):
    """Whether a larger `metric` is better: for the main metric of `task`, what the task
    declares (`Task.greater_is_better`), else what its kind declares
    (`TaskKind.greater_is_better`); otherwise (undeclared, or another metric) the guess
    from the name (`higher_is_better`)."""
    if task is not None and metric == getattr(task, "main_metric", None):
        for declared in (getattr(task, "greater_is_better", None),
                         getattr(kind, "greater_is_better", None)):
            if declared is not None:
                return bool(declared)
    return higher_is_better(metric)


def improves(metric, value, best, greater=None):
    """Whether `value` of `metric` beats `best` (None: nothing to beat yet); `greater`:
    whether larger is better (None: `higher_is_better`'s guess from the name)."""
    if best is None:
        return True
    greater = higher_is_better(metric) if greater is None else greater
    return value > best if greater else value < best


def finite_value(metrics, metric):
    """metrics[metric] when it is a finite number, else None (failed or unfinished runs)."""
    value = (metrics or {}).get(metric)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def failure_check(metric, value, baseline, margin, greater=None):
    """failure_check.json's record of a run whose dev `metric` is `value`: "failed" when
    it is at or below `baseline` (the constant-prediction baseline,
    `Task.constant_baseline`) plus `margin` (at or above baseline − margin where lower is
    better; Mosbach et al. 2021: at or below the majority classifier). "failed" is None
    when the value or the baseline is unknown (never guessed)."""
    greater = higher_is_better(metric) if greater is None else bool(greater)
    value = value if isinstance(value, (int, float)) and math.isfinite(value) else None
    failed = None
    if value is not None and baseline is not None:
        # 1e-9: a run that predicts the majority class equals the baseline up to rounding.
        failed = (value <= baseline + margin + 1e-9 if greater
                  else value >= baseline - margin - 1e-9)
    return {"failed": failed, "metric": metric, "value": value, "baseline": baseline,
            "margin": margin, "greater_is_better": greater}
