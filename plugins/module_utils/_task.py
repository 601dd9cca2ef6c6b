# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one shape of every module's run: ``main()`` builds the ``AnsibleModule`` and hands a task
to :func:`run_task` (or ``_slurm_cli.run_module``, which adds the Slurm command layer); the task
returns the result or raises, and only :func:`run_task` calls ``exit_json``/``fail_json``.

Private to the collection (the leading underscore): no API promise outside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, Type, Union  # noqa: F401

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes

if TYPE_CHECKING:  # the type of the module argument; modules import it themselves
    from ansible.module_utils.basic import AnsibleModule  # noqa: F401


class TaskFailure(Exception):
    """The task fails with ``msg`` and the result keys ``result`` (e.g. what it did before it
    stopped); ``failed_cause`` among them is why (``_causes``; ``configuration`` when not given: a
    task raises this itself mostly for an option it cannot take)."""

    def __init__(self, msg: str, **result: Any) -> None:
        super(TaskFailure, self).__init__(msg)
        self.msg = msg
        self.result = result


def run_task(module: AnsibleModule, task: Callable[[Any], Dict[str, Any]],
             errors: Tuple[Type[Exception], ...] = (),
             always: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
    """Run ``task(module)`` and exit with the result it returns, or fail with the message and
    result keys of the :class:`TaskFailure` it raises, or with the text of one of ``errors`` (the
    module's own kinds of bad input, e.g. ``CheckpointError``). ``always()`` gives keys every
    answer carries (``commands``), computed after the task. Every failure has ``failed_cause``
    (``_causes``): the TaskFailure's own, the error's ``cause`` attribute, an OSError's
    (:func:`_causes.of_os_error`), else ``configuration``.

    Never returns: ``exit_json`` and ``fail_json`` end the module.
    """
    try:
        outcome: Union[Dict[str, Any], TaskFailure] = task(module)
    except TaskFailure as exc:
        outcome = exc
    except tuple(errors) as exc:
        cause = getattr(exc, "cause", None) or (causes.of_os_error(exc) if isinstance(exc, OSError)
                                                else causes.CONFIGURATION)
        outcome = TaskFailure(str(exc), failed_cause=cause)
    extra = always() if always is not None else {}
    if isinstance(outcome, TaskFailure):
        module.fail_json(msg=outcome.msg, **dict(dict(extra, failed_cause=causes.CONFIGURATION), **outcome.result))
    module.exit_json(**dict(extra, **outcome))
