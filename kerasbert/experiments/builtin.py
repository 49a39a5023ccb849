"""The built-in experiments, registered exactly as a plugin registers its own.

Only names here: each module is imported when its experiment is chosen, so listing them
loads no TensorFlow and defines no experiment's flags.
"""

from kerasbert.hookspecs import ExperimentSpec, hookimpl

EXPERIMENTS = (
    ExperimentSpec(
        name="findings", module="kerasbert.experiments.findings",
        description="the findings report from the experiments' JSON: a verdict per claim "
                    "(Holm-corrected) and per measurement",
        reproduces="the claims of Wang et al., BERT and Hao et al."),
    ExperimentSpec(
        name="landscape_findings", module="kerasbert.experiments.landscape_findings",
        description="pre-trained vs random init from landscape folders, paired by seed",
        reproduces="Hao et al. 2019 over seeds"),
)


@hookimpl
def kerasbert_experiments():
    return list(EXPERIMENTS)
