"""report.md for a run: headline metric, metrics per phase, curves PNG, links, config."""

import json

from kerasbert import report
from kerasbert.config import RunConfig

HISTORY = """phase,epoch,step,train_loss,learning_rate,seconds,train_accuracy,dev_accuracy,dev_f1
frozen,1,4,0.70,0.001,1.0,0.50,0.55,0.60
frozen,2,8,0.66,0.0,2.0,0.56,0.60,0.65
finetune,1,12,0.52,2e-05,3.5,0.71,0.75,0.79
"""


def _run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    RunConfig(task="mrpc", output_dir=str(run), init_checkpoint="random", learning_rate=2e-5,
              frozen_epochs=2.0, num_train_epochs=1.0, seed=3).save(str(run / "run_config.json"))
    (run / "metrics.json").write_text(json.dumps({
        "accuracy": 0.75, "f1": 0.79,
        "phases": {"frozen": {"accuracy": 0.6, "f1": 0.65},
                   "finetune": {"accuracy": 0.75, "f1": 0.79}}}))
    (run / "history.csv").write_text(HISTORY)
    (run / "test_results.tsv").write_text("index\tprediction\n0\t1\n")
    (run / "tensorboard").mkdir()
    return run


def test_run_report_has_the_metrics_per_phase_curves_and_links(tmp_path):
    run = _run_dir(tmp_path)
    path = report.write_run_report(str(run))
    text = (run / "report.md").read_text()
    assert path == str(run / "report.md")
    assert text.startswith("# mrpc: run\n")
    # MRPC's main metric (F1, from the task registry) is the headline.
    assert "**dev f1 = 0.7900** (end of training)" in text
    assert "| phase | accuracy | f1 |" in text
    assert "| frozen | 0.6000 | 0.6500 |" in text and "| finetune | 0.7500 | 0.7900 |" in text
    assert "learning rate 2e-05" in text and "after 2.0 frozen" in text
    assert "![training curves](curves.png)" in text
    assert "| frozen | 2 | 8 | 0.6600 | 0.5600 | 0.6500 |" in text  # the per-epoch table
    assert "- [test_results.tsv](test_results.tsv)" in text
    assert "- [tensorboard/](tensorboard/)" in text
    assert '| seed | 3 |' in text
    png = (run / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_report_command_regenerates_and_refuses_a_non_run(tmp_path, capsys):
    run = _run_dir(tmp_path)
    assert report.main([str(run)]) == 0
    first = (run / "report.md").read_text()
    (run / "report.md").unlink()
    assert report.main([str(run)]) == 0
    assert (run / "report.md").read_text() == first
    assert report.main([str(tmp_path)]) == 2
    assert "not a kerasbert run (no run_config.json)" in capsys.readouterr().err


def test_unfinished_run_says_so(tmp_path):
    run = _run_dir(tmp_path)
    (run / "metrics.json").unlink()
    report.write_run_report(str(run))
    text = (run / "report.md").read_text()
    assert "No dev metrics" in text and "![training curves](curves.png)" in text
