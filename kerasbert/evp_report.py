"""Expected validation performance of a restarts table (Dodge et al. 2019/2020): per row,
the expected best dev score of n runs started, n = 1..N, as `evp.json`, `evp.md` and
`evp.png` beside the table. The arithmetic is kerasbert/analysis/evp.py's.

    evp_report.write(folder, {"rte": table})   # a restarts.summarize table per name

A row's N scores are its finished runs' (a failed or unfinished run has none: the curve is
that of the runs that finished). The budget of n runs is n × a run's cost: its optimizer
steps and its seconds of training and dev evaluation, each the mean over the row's runs of
their history.csv's last row. The sweep writes these files after every run; every
experiment's table (python -m kerasbert.experiments) writes them with its table.
"""

import os
import statistics

from kerasbert import run_folder
from kerasbert.analysis import evp
from kerasbert.io_utils import atomic_write_json, atomic_write_text

STEM = "evp"
COST_UNITS = ("steps", "seconds")


def run_seconds(history):
    """Seconds of training and dev evaluation over a run's history.csv rows: the clock of a
    resumed run starts again, so each stretch's last value is added (the work a kill lost
    is not counted); None where a row has no number."""
    total, last = 0.0, 0.0
    try:
        for row in history:
            seconds = float(row["seconds"])
            if seconds < last:  # a new process resumed the run
                total += last
            last = seconds
    except (KeyError, TypeError, ValueError):
        return None
    return total + last if history else None


def run_cost(run_dir):
    """{"steps", "seconds"} of a run from its history.csv (steps: optimizer steps, all
    phases, the last row's; seconds: training and dev evaluation, every process's that
    trained it), None each where unknown."""
    try:
        history = run_folder.read_run_history(run_dir)
    except (OSError, ValueError):
        history = []
    last = history[-1] if history else {}
    try:
        steps = int(float(last["step"]))
    except (KeyError, TypeError, ValueError):
        steps = None
    return {"steps": steps, "seconds": run_seconds(history)}


def row_cost(row, root=""):
    """The mean cost of the row's finished runs ({unit: value or None}); a run folder given
    relative (a sweep's) is under `root`."""
    costs = [run_cost(os.path.join(root, row["dirs"][str(seed)]))
             for seed in row["seeds"] if str(seed) in row.get("dirs", {})]
    mean = {}
    for unit in COST_UNITS:
        known = [c[unit] for c in costs if c[unit] is not None]
        mean[unit] = statistics.fmean(known) if known and len(known) == len(costs) else None
    return mean


def table_evp(table, root="", resamples=evp.RESAMPLES, level=evp.LEVEL):
    """{"metric", "higher_is_better", "level", "resamples", "rows": [{"label", "n",
    "cost": {"steps", "seconds"}, "curve": evp.curve(...)}]} of a restarts table; a row
    without a finished run has an empty curve."""
    greater = table["higher_is_better"] is not False
    rows = []
    for row in table["rows"]:
        cost = row_cost(row, root)
        curve = (evp.curve(row["values"], greater, resamples=resamples, level=level, cost=cost)
                 if row["values"] else [])
        rows.append({"label": row["label"], "n": len(row["values"]), "cost": cost,
                     "curve": curve})
    return {"metric": table["metric"], "higher_is_better": greater, "level": level,
            "resamples": resamples, "rows": rows}


def _num(x, scale, digits):
    return "–" if x is None else f"{x * scale:.{digits}f}"


def markdown(name, result, scale=1.0, digits=4):
    """One table per restarts table: a line per (row, n) with the expected best, its std,
    the bootstrap interval and the budget."""
    level = round(100 * result["level"])
    best = "highest" if result["higher_is_better"] else "lowest"
    lines = [f"## {name}: expected validation performance", "",
             f"Expected best ({best}) dev {result['metric']}"
             + (" (× 100)" if scale == 100 else "")
             + " of n runs drawn with replacement from a row's N finished runs (Dodge et al. "
             f"2019): E[best of n] ± the std of the best of n, and the {level}% percentile "
             f"bootstrap interval of E over the N scores ({result['resamples']} resamples). "
             "Budget: n × a run's mean optimizer steps and seconds (training and dev "
             "evaluation).", "",
             "| row | n | expected best ± std | "
             f"{level}% interval | steps | seconds |", "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        for p in row["curve"]:
            interval = ("–" if p["low"] is None else
                        f"[{_num(p['low'], scale, digits)}, {_num(p['high'], scale, digits)}]")
            seconds = "–" if p.get("seconds") is None else f"{p['seconds']:.0f}"
            lines.append(f"| {row['label']} | {p['n']} | {_num(p['expected'], scale, digits)} "
                         f"± {_num(p['std'], scale, digits)} | {interval} | "
                         f"{'–' if p.get('steps') is None else p['steps']} | {seconds} |")
        if not row["curve"]:
            lines.append(f"| {row['label']} | 0 | – (no finished run) | – | – | – |")
    return "\n".join(lines) + "\n"


def write(folder, tables, root="", stem=STEM, scale=1.0, digits=4, plot=True):
    """`<stem>.json` ({name: table_evp(...)}), `<stem>.md` and `<stem>.png` (with `plot`)
    of the restarts `tables` ({name: restarts.summarize table}) in `folder`; returns the
    JSON's dict."""
    results = {name: table_evp(table, root) for name, table in tables.items()}
    atomic_write_json(os.path.join(folder, f"{stem}.json"), results)
    atomic_write_text(os.path.join(folder, f"{stem}.md"), "\n".join(
        markdown(name, result, scale, digits) for name, result in results.items()))
    if plot and any(row["curve"] for r in results.values() for row in r["rows"]):
        from kerasbert.analysis.evp_plots import plot_evp  # matplotlib: only when drawn

        plot_evp(results, os.path.join(folder, f"{stem}.png"))
    return results
