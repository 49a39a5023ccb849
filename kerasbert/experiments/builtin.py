"""The built-in experiments, registered exactly as a plugin registers its own.

Only names here: each module is imported when its experiment is chosen, so listing them
loads no TensorFlow and defines no experiment's flags.
"""

from kerasbert.hookspecs import ExperimentSpec, hookimpl

EXPERIMENTS = (
    ExperimentSpec(
        "lr_sweep", "kerasbert.experiments.lr_sweep",
        "learning-rate sweep with random restarts, the best run picked on dev "
        "(sweep.json, report.md)",
        "Devlin et al. 2019, section 4"),
    ExperimentSpec(
        "strategies", "kerasbert.experiments.strategies",
        "fine-tune only vs frozen only vs stack-and-finetune over seeds, optionally LoRA, "
        "stack-and-LoRA and BitFit (comparison.md/json, curves.png)",
        "Wang et al. 2019, stack-and-finetune"),
    ExperimentSpec(
        "ner_table", "kerasbert.experiments.ner_table",
        "CoNLL-2003: fine-tuning vs the feature-based layer choices, or the CRF and "
        "document-context rows, over seeds (table.md/json)",
        "Devlin et al. 2019, Table 7"),
    ExperimentSpec(
        "model_size", "kerasbert.experiments.model_size",
        "dev metric against encoder size L/H/A (random or given checkpoints) over seeds "
        "(grid.md/json/csv/png)",
        "Devlin et al. 2019, Table 6"),
    ExperimentSpec(
        "pretraining_ablation", "kerasbert.experiments.pretraining_ablation",
        "pre-training objectives (MLM + NSP, no NSP, LTR, + BiLSTM, none) at CPU size, then "
        "fine-tuned or feature-based over seeds (table.md, results.json)",
        "Devlin et al. 2019, Table 5"),
    ExperimentSpec(
        "stability", "kerasbert.experiments.stability",
        "fine-tuning stability: failure rates, variance and expected best of BERT's, "
        "Mosbach's and Zhang's recipes over seeds, the data order × initialisation grid, "
        "start-many-stop-early, the failed run's plane (stability.md/json)",
        "Dodge et al. 2020, Mosbach et al. 2021, Zhang et al. 2021"),
    ExperimentSpec(
        name="findings", module="kerasbert.experiments.findings",
        description="the findings report from the experiments' JSON: a verdict per claim "
                    "(Holm-corrected) and per measurement",
        reproduces="the claims of Wang et al., BERT, Hao et al. and the stability papers"),
    ExperimentSpec(
        name="landscape_findings", module="kerasbert.experiments.landscape_findings",
        description="pre-trained vs random init from landscape folders, paired by seed",
        reproduces="Hao et al. 2019 over seeds"),
)


@hookimpl
def kerasbert_experiments():
    return list(EXPERIMENTS)
