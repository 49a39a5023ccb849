"""The run folder's layout: one module names every file, reads and writes them."""

import json
import os

import pytest

from kerasbert import metrics, run_folder
from kerasbert.config import RunConfig
from kerasbert.errors import InputError


def _config(tmp_path, **overrides):
    return RunConfig(**{"task": "mrpc", "output_dir": str(tmp_path / "run"), **overrides})


def test_status_follows_the_files_a_run_leaves(tmp_path):
    run = str(tmp_path / "run")
    assert run_folder.status(run) == "pending"
    os.makedirs(run)
    run_folder.write_config(run, _config(tmp_path))
    assert run_folder.status(run) == "unfinished"
    run_folder.write_failure(run, ValueError("the loss became nan"))
    assert run_folder.status(run) == "failed"
    assert run_folder.read_failure(run) == "the loss became nan"
    run_folder.write_metrics(run, {"accuracy": 0.5})
    assert run_folder.status(run) == "finished" and run_folder.is_finished(run)


def test_metrics_keep_each_phase_only_when_there_were_several(tmp_path):
    run = str(tmp_path)
    run_folder.write_metrics(run, {"f1": 0.7}, {"finetune": {"f1": 0.7}})
    assert run_folder.read_metrics(run) == {"f1": 0.7}
    run_folder.write_metrics(run, {"f1": 0.7}, {"frozen": {"f1": 0.4}, "finetune": {"f1": 0.7}})
    assert run_folder.read_metrics(run)["phases"] == {"frozen": {"f1": 0.4},
                                                      "finetune": {"f1": 0.7}}


def test_eval_results_round_trip_as_google_research_bert_writes_them(tmp_path):
    run = str(tmp_path)
    run_folder.write_eval_results(run, {"f1": 88.5, "best_f1_thresh": -1.25})
    text = open(os.path.join(run, run_folder.EVAL_RESULTS)).read()
    assert text == "best_f1_thresh = -1.25\nf1 = 88.5\n"
    assert run_folder.read_eval_results(run) == {"f1": 88.5, "best_f1_thresh": -1.25}
    assert run_folder.read_eval_results(str(tmp_path / "none")) == {}


def test_history_export_record_and_pruned_list(tmp_path):
    run = str(tmp_path)
    run_folder.write_run_history(run, [{"epoch": 1, "train_loss": 0.5}])
    assert run_folder.read_run_history(run) == [{"epoch": "1", "train_loss": "0.5"}]
    assert run_folder.read_export_record(run) is None
    run_folder.write_export_record(run, "/srv/model/3")
    assert run_folder.read_export_record(run) == "/srv/model/3"
    run_folder.write_pruned(run, {"encoder/", "model.weights.h5"})
    assert run_folder.read_pruned(run) == ["encoder/", "model.weights.h5"]


def test_run_config_reads_back_without_data_paths(tmp_path):
    run = tmp_path / "run"
    os.makedirs(run)
    _config(tmp_path, data_dir=str(tmp_path), learning_rate=3e-5).save(
        str(run / run_folder.RUN_CONFIG))
    config = run_folder.read_run_config(str(run))
    assert config.learning_rate == 3e-5 and config.data_dir is None
    (run / run_folder.RUN_CONFIG).write_text(json.dumps({"task": "mrpc"}))
    with pytest.raises(InputError, match=r"run_config\.json: not a kerasbert run config"):
        run_folder.read_run_config(str(run))


def test_prepare_resumes_same_settings_and_names_the_first_changed_one(tmp_path):
    config = _config(tmp_path, learning_rate=2e-5, seed=1)
    run_folder.prepare(config)
    run_folder.write_config(config.output_dir, config)
    run_folder.prepare(_config(tmp_path, learning_rate=2e-5, seed=1, eval_batch_size=8))
    with pytest.raises(InputError, match=r"started with --learning_rate=2e-05 \(now 5e-05\)"):
        run_folder.prepare(_config(tmp_path, learning_rate=5e-5, seed=2))
    run_folder.write_metrics(config.output_dir, {"accuracy": 1.0})
    with pytest.raises(InputError, match="holds a finished run"):
        run_folder.prepare(config)
    run_folder.prepare(_config(tmp_path, overwrite_output_dir=True))
    assert os.listdir(config.output_dir) == []


def test_nothing_else_in_the_package_spells_a_run_file_name():
    """run_folder.py owns the names: no other module writes them as string literals."""
    package = os.path.dirname(run_folder.__file__)
    names = [run_folder.RUN_CONFIG, run_folder.METRICS, run_folder.EVAL_RESULTS,
             run_folder.MODEL_WEIGHTS, run_folder.EXPORT_RECORD, run_folder.FAILED,
             run_folder.PRUNED, run_folder.SWEEP_JSON, run_folder.BEST_HEAD]
    offenders = []
    for folder, _, files in os.walk(package):
        for file in files:
            path = os.path.join(folder, file)
            if not file.endswith(".py") or path == run_folder.__file__:
                continue
            text = open(path, encoding="utf-8").read()
            offenders += [f"{os.path.relpath(path, package)}: {n}" for n in names
                          if f'"{n}"' in text]
    assert offenders == []


@pytest.mark.parametrize("metric, value, best, better", [
    ("accuracy", 0.8, 0.7, True), ("accuracy", 0.7, 0.8, False),
    ("eval_loss", 0.5, 0.7, True), ("perplexity", 9.0, 8.0, False),
    ("f1", 0.1, None, True)])
def test_metric_direction(metric, value, best, better):
    assert metrics.improves(metric, value, best) is better
