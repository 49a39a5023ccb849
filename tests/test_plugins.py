import types

import pytest

from kerasbert import hookspecs, plugins
from kerasbert.errors import InputError
from kerasbert.hookspecs import HeadSpec, hookimpl
from kerasbert.tasks.base import Task


class FakeEntryPoint:
    def __init__(self, name, target, group=plugins.ENTRY_POINT_GROUP):
        self.name, self.group, self._target = name, group, target

    def load(self):
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


class FakeDistribution:
    def __init__(self, name, entry_points):
        self.metadata = {"name": name}
        self.entry_points = entry_points


def _plugin_module(name, heads):
    module = types.ModuleType(name)

    @hookimpl
    def kerasbert_heads():
        return heads

    module.kerasbert_heads = kerasbert_heads
    return module


def _head(name):
    return HeadSpec(name=name, kinds=("classification",), build=lambda ctx: None)


class _Complete(Task):
    """A task with what the contract requires (no test splits: no prediction file)."""

    name, test_splits = "complete", ()

    def read_examples(self, data_dir, split):
        return []

    def sample_dir(self):
        return "unused"

    def compute_metrics(self, predictions, labels):
        return {"accuracy": 1.0}


@pytest.fixture
def fake_distributions(monkeypatch):
    installed = []
    monkeypatch.setattr(plugins.importlib.metadata, "distributions", lambda: list(installed))
    monkeypatch.delenv(plugins.DISABLE_AUTOLOAD_ENV, raising=False)
    return installed


def _registry(blocked=()):
    manager, problems, dists = plugins.make_manager(blocked)
    registry = plugins.Registry(manager, dists)
    for line in problems:
        registry._problem(line)
    return registry


def test_builtins_are_registered_through_the_hooks(fake_distributions):
    registry = _registry()
    assert "cls_linear" in registry.heads
    assert {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"} <= set(
        registry.tasks)
    assert registry.heads["cls_linear"][1] == "'kerasbert.heads.builtin'"


def test_entry_point_plugin_is_discovered(fake_distributions):
    module = _plugin_module("kb_mean_pool", [_head("mean_pool")])
    fake_distributions.append(FakeDistribution(
        "kerasbert-mean-pool", [FakeEntryPoint("mean_pool", module),
                                FakeEntryPoint("other", None, group="console_scripts")]))
    registry = _registry()
    assert registry.head("mean_pool").name == "mean_pool"
    assert registry.heads["mean_pool"][1] == "plugin distribution 'kerasbert-mean-pool'"
    assert registry.problems == []


def test_broken_plugin_is_reported_and_others_still_work(fake_distributions):
    good = _plugin_module("kb_good", [_head("good_head")])
    fake_distributions.append(FakeDistribution("kb-broken", [
        FakeEntryPoint("broken", ImportError("No module named 'torch'"))]))
    fake_distributions.append(FakeDistribution("kb-good", [FakeEntryPoint("good", good)]))
    registry = _registry()
    assert "good_head" in registry.heads and "cls_linear" in registry.heads
    assert len(registry.problems) == 1
    assert "kb-broken" in registry.problems[0] and "torch" in registry.problems[0]


def test_duplicate_head_name_keeps_first_and_names_both(fake_distributions):
    dup = _plugin_module("kb_dup", [_head("cls_linear")])
    fake_distributions.append(FakeDistribution("kb-dup", [FakeEntryPoint("dup", dup)]))
    registry = _registry()
    assert registry.heads["cls_linear"][1] == "'kerasbert.heads.builtin'"
    (problem,) = registry.problems
    assert "kb-dup" in problem and "'cls_linear' is already registered" in problem


def test_bad_hook_result_is_reported(fake_distributions):
    bad = _plugin_module("kb_bad", [object()])
    fake_distributions.append(FakeDistribution("kb-bad", [FakeEntryPoint("bad", bad)]))
    registry = _registry()
    assert any("kb-bad" in p and "has no name" in p for p in registry.problems)


def test_autoload_kill_switch_and_blocking(fake_distributions, monkeypatch):
    module = _plugin_module("kb_x", [_head("x_head")])
    fake_distributions.append(FakeDistribution("kb-x", [FakeEntryPoint("x", module)]))
    assert "x_head" not in _registry(blocked=("x",)).heads
    assert "x_head" not in _registry(blocked=("kb-x",)).heads
    monkeypatch.setenv(plugins.DISABLE_AUTOLOAD_ENV, "1")
    assert "x_head" not in _registry().heads


def test_unknown_names_list_what_exists(fake_distributions):
    registry = _registry()
    with pytest.raises(InputError, match=r"--head=nope: unknown head; available: .*cls_linear"):
        registry.head("nope")
    with pytest.raises(InputError, match=r"--task=nope: unknown task; available: .*mrpc"):
        registry.task("nope")


def test_hookspecs_document_the_contract():
    for name in ("kerasbert_heads", "kerasbert_tasks", "kerasbert_define_flags"):
        assert getattr(hookspecs, name).__doc__.strip()


def test_kinds_register_through_the_hook_and_tasks_of_unknown_kinds_are_refused(
        fake_distributions):
    from kerasbert.kinds.base import TaskKind

    class Ranking(TaskKind):
        name = "ranking"

    class RankTask(_Complete):
        name, kind = "rank_me", "ranking"

    class Orphan(_Complete):
        name, kind = "orphan", "clustering"

    module = types.ModuleType("kinds_plugin")
    module.kerasbert_kinds = hookimpl(lambda: [Ranking()])
    module.kerasbert_tasks = hookimpl(lambda: [RankTask(), Orphan()])
    fake_distributions.append(FakeDistribution(
        "kerasbert-ranking", [FakeEntryPoint("ranking", module)]))
    registry = _registry()
    assert {"classification", "regression", "multiple_choice", "span", "tagging",
            "ranking"} <= set(registry.kinds)
    assert registry.kind_of(registry.task("rank_me")).name == "ranking"
    assert registry.kinds["ranking"][1] == "plugin distribution 'kerasbert-ranking'"
    assert "orphan" not in registry.tasks
    assert registry.problems == [
        "plugin distribution 'kerasbert-ranking': task 'orphan' is of kind 'clustering', which "
        "no plugin registers (kinds: classification, multiple_choice, ranking, regression, "
        "span, tagging)"]
    with pytest.raises(InputError, match="unknown task kind 'clustering'"):
        registry.kind("clustering")


def test_a_task_missing_a_required_method_is_refused_naming_it(fake_distributions):
    class NoReader(_Complete):
        name = "no_reader"
        read_examples = Task.read_examples

    class ScoredByEvaluate(_Complete):  # evaluate instead of compute_metrics will do
        name = "by_evaluate"
        compute_metrics = Task.compute_metrics

        def evaluate(self, outputs, features, output_dir=None, split="dev"):
            return {"accuracy": 1.0}

    class NoPredictions(_Complete):  # test splits, and no way to write their predictions
        name, test_splits = "no_predictions", ("test",)

    class Bare(Task):
        name = "bare"

    module = types.ModuleType("partial_plugin")
    module.kerasbert_tasks = hookimpl(lambda: [
        NoReader(), ScoredByEvaluate(), NoPredictions(), Bare(),
        types.SimpleNamespace(name="duck", kind="classification"), _Complete()])
    fake_distributions.append(FakeDistribution(
        "kerasbert-partial", [FakeEntryPoint("partial", module)]))
    registry = _registry()
    assert {"by_evaluate", "complete"} <= set(registry.tasks)
    origin = "plugin distribution 'kerasbert-partial'"
    assert registry.problems == [
        f"{origin}: task 'no_reader' does not implement Task.read_examples",
        f"{origin}: task 'no_predictions' does not implement Task.write_test_predictions or "
        "Task.write_predictions",
        f"{origin}: task 'bare' does not implement Task.read_examples; Task.sample_dir; "
        "Task.compute_metrics or Task.evaluate; Task.write_test_predictions or "
        "Task.write_predictions",
        f"{origin}: task 'duck' is a SimpleNamespace, not a kerasbert.tasks.base.Task"]
