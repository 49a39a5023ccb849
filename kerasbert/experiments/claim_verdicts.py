"""The head of the findings report: one verdict per claim, its tries, and Holm.

A claim is usually measured more than once (more seeds, another budget, a control, a
confirmation). The verdict that counts is, in this order:

1. a confirmation planned before it ran (fresh seeds, the test written down first): the
   PLANNED entries with `confirmation=True`;
2. else a primary test planned before it ran (PLANNED, the latest plan listed);
3. else the measurement with the most seeds (of several that large: the first the report
   lists).

`tries` is how many measurements of the claim exist (the same runs found in two tables
are one). Each counted measurement has a p-value, the level at which its interval gives
its verdict, from scipy's one-sample t-test of the paired differences over seeds (the
test behind the report's Student-t interval): two-sided against 0 for a claim with a
direction; for a "≈" claim the smaller of that and the equivalence test within its margin
(two one-sided t-tests; p = twice the larger one-sided p, so that p < 0.05 exactly when
the 95% interval lies within the margin). The claims' p-values are then adjusted together
with Holm's step-down method (statsmodels), which holds the chance that any of their
separations (supported or contradicted) is false at 5%.
"""

import math
import os
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05


@dataclass(frozen=True)
class Plan:
    """A measurement planned before it ran: the claim its primary test answers, the
    folder(s) of its results files (the report's *run* column) and the PLAN.md that says
    so. A plan's secondary comparisons are not listed: they have no verdict of their own."""

    claim: str
    runs: tuple
    plan: str
    confirmation: bool = False


# Every docs/figures/**/PLAN.md, oldest first (tests/test_findings.py checks none is missed).
PLANNED = (
    Plan("bert-t5-ltr-mrpc", ("ablation-wordnet-sst2-5k-mrpc-seeds-9-16",),
         "docs/figures/bert/ablation-wordnet-sst2-5k-mrpc-seeds-9-16/PLAN.md",
         confirmation=True),
    Plan("wang-bimpm-no-context", ("stsb-heads-seeds-6-10-bimpm",
                                   "stsb-heads-seeds-6-10-bimpm_no_context"),
         "docs/figures/wang/stsb-bimpm-no-context-seeds-6-10/PLAN.md", confirmation=True),
    Plan("bert-t5-pretraining-features", ("ablation-wordnet-sst2-10k-sst2-feature-based",),
         "docs/figures/bert/ablation-wordnet-sst2-10k-sst2-feature-based/PLAN.md"),
    Plan("bert-t5-pretraining-features",
         ("ablation-wordnet-sst2-30k-continued-sst2-feature-based",),
         "docs/figures/bert/ablation-wordnet-sst2-30k-continued-sst2-feature-based/PLAN.md"),
    # its first addendum plans the SST-2 fine-tuned confirmation on fresh seeds 6-13
    Plan("bert-t5-pretraining-sst2",
         ("ablation-wordnet-sst2-30k-continued-sst2-fine-tuned-seeds-6-13",),
         "docs/figures/bert/ablation-wordnet-sst2-30k-continued-sst2-feature-based/PLAN.md",
         confirmation=True),
    # issue #58's main run, part 2: claims 1-4 and 6 over both tasks' tables (the plan's
    # verdict over tasks), claim 5 on RTE's 5 × 5 grid.
    *(Plan(claim, ("rte", "mrpc"), "docs/figures/stability/PLAN.md")
      for claim in ("mosbach-failure-rate", "mosbach-variance", "zhang-variance",
                    "zhang-mean", "mosbach-grad-norms")),
    Plan("dodge-order-vs-init", ("rte",), "docs/figures/stability/PLAN.md"),
    # claims 7 and 8: one pair / one campaign a task, measured and, as planned, not decided
    *(Plan(claim, ("rte", "mrpc"), "docs/figures/stability/PLAN.md")
      for claim in ("mosbach-barrier", "dodge-stop-early")),
)
# Plans written before their runs whose claims are not in the report yet (no run of theirs
# is measured): each moves to PLANNED, with its runs, once they are.
PENDING_PLANS = ()


def run_folders(result):
    """The folder names of a measurement's results files, the same runs' other tables
    included (a plan names the folder it wrote, which may be the one listed as "also in")."""
    return {os.path.basename(os.path.dirname(os.path.abspath(f)))
            for f in [*result["sources"], *result.get("also_in", [])]}


def counted(claim_id, results, plans=PLANNED):
    """(the measurement that counts, why, its plan or None) of one claim's measurements;
    (None, None, None) when there are none."""
    if not results:
        return None, None, None
    for confirmation in (True, False):
        for plan in reversed([p for p in plans if p.claim == claim_id
                              and p.confirmation == confirmation]):
            found = [r for r in results if set(plan.runs) <= run_folders(r)]
            if found:
                why = ("confirmation planned before it ran" if confirmation
                       else "primary test planned before it ran")
                return found[0], why, plan
    largest = max(r["n"] for r in results)
    ties = [r for r in results if r["n"] == largest]
    why = "the most seeds" + (f" (the first of {len(ties)} with n = {largest})"
                              if len(ties) > 1 else "")
    return ties[0], why, None


def _one_sample(differences, n, mean, std, popmean=0.0, alternative="two-sided"):
    """scipy's one-sample t-test p-value of the differences (or, where only their summary
    was recorded, of n, mean and sample std: the same statistic)."""
    from scipy import stats as scipy_stats

    if std == 0:  # no spread: the mean is exact
        side = {"two-sided": mean != popmean, "greater": mean > popmean,
                "less": mean < popmean}[alternative]
        return 0.0 if side else 1.0
    if differences is not None:
        return float(scipy_stats.ttest_1samp(differences, popmean,
                                              alternative=alternative).pvalue)
    t = (mean - popmean) / (std / math.sqrt(n))
    tail = {"two-sided": 2 * scipy_stats.t.sf(abs(t), n - 1),
            "greater": scipy_stats.t.sf(t, n - 1), "less": scipy_stats.t.cdf(t, n - 1)}
    return float(tail[alternative])


def p_value(result, direction, margin=None):
    """(p, test) of one measurement's verdict (see the module's docstring); (None, None)
    below two seeds."""
    if "p" in result:  # a measurement decided by its own test (stability_findings.json)
        return result["p"], result.get("test")
    n, std = result["n"], result.get("std")
    if n < 2 or std is None or not math.isfinite(std):
        return None, None
    differences = result.get("differences")
    mean = result["difference"]
    t_test = _one_sample(differences, n, mean, std)
    if direction != "≈" or margin is None:
        return t_test, "t"
    above = _one_sample(differences, n, mean, std, -margin, "greater")
    below = _one_sample(differences, n, mean, std, margin, "less")
    equivalence = min(1.0, 2 * max(above, below))
    return (equivalence, "TOST") if equivalence < t_test else (t_test, "t")


def holm(p_values):
    """Holm-adjusted p-values (statsmodels' multipletests), in the given order."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return []
    return [float(p) for p in multipletests(np.asarray(p_values), alpha=ALPHA,
                                            method="holm")[1]]


OVER_TASKS = "over tasks"  # the test of a verdict combined from per-task measurements
# A claim its plan measures once (one pair of runs, one campaign) and does not decide:
# listed with its number, outside Holm's family (it has no p-value).
NO_VERDICT = "measured once, no verdict"


def tries(results):
    """How many measurements of a claim exist: a verdict combined over tasks is made of
    the per-task measurements beside it, not a try of its own."""
    return sum(1 for r in results if r.get("test") != OVER_TASKS)


def head(claims, measured, plans=PLANNED):
    """One row per claim: {"claim", "result" (the measurement that counts, or None), "why",
    "plan", "tries", "p", "test", "p_holm", "after_holm"}. Claims without a p-value (not
    measured, or fewer than two seeds) are outside Holm's family."""
    rows = []
    for claim in claims:
        result, why, plan = counted(claim["id"], measured[claim["id"]], plans)
        p, test = (None, None) if result is None else p_value(
            result, claim["direction"], claim["margin"])
        rows.append({"claim": claim, "result": result, "why": why, "plan": plan,
                     "tries": tries(measured[claim["id"]]), "p": p, "test": test,
                     "p_holm": None, "after_holm": "not measured" if result is None
                     else result["verdict"]})
    tested = [row for row in rows if row["p"] is not None]
    for row, adjusted in zip(tested, holm([row["p"] for row in tested])):
        row["p_holm"] = adjusted
        if adjusted >= ALPHA:
            row["after_holm"] = "not distinguishable"
    return rows
