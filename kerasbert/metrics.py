"""Which way a metric improves, and its value when it has a usable one."""

import math

# Every main metric of the built-in tasks is "higher is better"; these words mark the
# opposite (a plugin task's loss, perplexity or error rate).
LOWER_IS_BETTER = ("loss", "perplexity", "error", "mse")


def higher_is_better(metric):
    return not any(word in metric.lower() for word in LOWER_IS_BETTER)


def improves(metric, value, best):
    """Whether `value` of `metric` beats `best` (None: nothing to beat yet)."""
    if best is None:
        return True
    return value > best if higher_is_better(metric) else value < best


def finite_value(metrics, metric):
    """metrics[metric] when it is a finite number, else None (failed or unfinished runs)."""
    value = (metrics or {}).get(metric)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None
