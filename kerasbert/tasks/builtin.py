"""Registers kerasbert's own tasks through the same hook third-party plugins use."""

from kerasbert.hookspecs import hookimpl


@hookimpl
def kerasbert_tasks():
    from kerasbert.tasks import conll, glue, squad, swag

    return [*glue.TASKS.values(), *squad.TASKS.values(), swag.TASK, conll.TASK]
