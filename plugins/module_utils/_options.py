# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What modules take: :class:`ArgumentSpec` (a module's options and the rules between them,
merged from shared parts) and the readers of option values that need more than Ansible's types
(hostlists, state names, times).

Private to the collection (the leading underscore): no API promise outside it.

The shared parts live beside the code that reads them and are documented once, by a doc
fragment each: ``_slurm_cli.SLURM_COMMAND_OPTIONS`` (``clusterops.slurm.slurm_cli``),
``_checkpoint_options.CHECKPOINT_OPTIONS`` (``clusterops.slurm.checkpoint``),
``_job_actions.SUBMIT_RETRY_OPTIONS`` (``clusterops.slurm.submit_retries``) and
``_training_remediation.registry_options.REGISTRY_OPTIONS`` (``clusterops.slurm.run_registry``). A module writes
``AnsibleModule(**ArgumentSpec(...its own options...).merge(SHARED, ...).module_kwargs())``.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, List, Optional, Set

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    DEFAULT_RELEASE,
    expand_hostlist,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure


#: The rules between options that ``AnsibleModule`` takes, each a list.
RULES = ("mutually_exclusive", "required_together", "required_one_of", "required_if")


class ArgumentSpec(object):
    """A module's ``argument_spec`` (``{option: {type, default, choices, ...}}``) and its rules
    (:data:`RULES`: lists as ``AnsibleModule`` takes them), as community.crypto's ArgumentSpec.

    Raises:
        ValueError: :meth:`merge` of a part that defines an option (or alias) this one already has
        (one home for each option).
    """

    def __init__(self, argument_spec: Optional[Dict[str, Dict[str, Any]]] = None, **rules: List[Any]) -> None:
        unknown = sorted(set(rules) - set(RULES))
        if unknown:
            raise ValueError("not a rule between options: %s" % ", ".join(unknown))
        self.argument_spec: Dict[str, Dict[str, Any]] = dict(
            (name, dict(option)) for name, option in (argument_spec or {}).items())
        self.rules: Dict[str, List[Any]] = dict((rule, list(rules.get(rule) or [])) for rule in RULES)

    def names(self) -> Set[str]:
        """Every name an option answers to: the options and their aliases."""
        return set(self.argument_spec) | set(
            alias for option in self.argument_spec.values() for alias in option.get("aliases") or ())

    def merge(self, *parts: ArgumentSpec) -> ArgumentSpec:
        """A new spec with this one's options and rules and those of ``parts`` (copies)."""
        merged = ArgumentSpec(self.argument_spec, **self.rules)
        for part in parts:
            twice = sorted(merged.names() & part.names())
            if twice:
                raise ValueError("options defined twice: %s" % ", ".join(twice))
            merged.argument_spec.update((name, dict(option)) for name, option in part.argument_spec.items())
            for rule in RULES:
                merged.rules[rule].extend(part.rules[rule])
        return merged

    def module_kwargs(self, supports_check_mode: bool = True) -> Dict[str, Any]:
        """The keyword arguments of ``AnsibleModule`` (rules left out when empty)."""
        kwargs: Dict[str, Any] = dict((rule, items) for rule, items in self.rules.items() if items)
        return dict(kwargs, argument_spec=self.argument_spec, supports_check_mode=supports_check_mode)


def option_value(params: Dict[str, Any], option: str, parse: Callable[[Any], Any]) -> Any:
    """``parse(params[option])``, for an option whose value a module reads further.

    Raises:
        TaskFailure: ``parse`` raised a ValueError (HostlistError, SlurmStateError, JobStateError
        and a time that is not one are ValueErrors): ``"<option>: <its text>"``.
    """
    try:
        return parse(params[option])
    except ValueError as exc:
        raise TaskFailure("%s: %s" % (option, exc))


def hostlist_option(params: Dict[str, Any], option: str, release: Any = DEFAULT_RELEASE) -> List[str]:
    """The names of a list option of hostlist expressions (``nodes``), expanded by the rules of
    ``release`` (the newest by default, to check before any call; then the cluster's own).

    Ansible splits a list option given as a string on its commas (``n[1,3]`` arrives as ``n[1``
    and ``3]``); joining the items back is exact for any list of expressions.

    Raises:
        TaskFailure: ``"<option>: <HostlistError>"``.
    """
    return option_value(params, option, lambda items: expand_hostlist(",".join(items or []), release=release))


def state_names_option(params: Dict[str, Any], option: str, state_matches: Callable[[Any, List[str]], bool], state: Any) -> List[str]:
    """The state names of a list option (``states``) of node or job states, each checked by
    ``state_matches(state, [name])`` (``_node_state`` or ``_job_state``), which raises a
    ValueError for a name that is no state; ``state`` is any parsed state of that kind.

    Raises:
        TaskFailure: ``"<option>: <the state module's error>"``, before any call.
    """
    def check(names: List[str]) -> List[str]:
        for name in names:
            state_matches(state, [name])   # one at a time: a match ends the node states' loop
        return names
    return option_value(params, option, check)


_RELATIVE = re.compile(r"^now(?:\s*(?P<sign>[+-])\s*(?P<count>\d+)\s*(?P<unit>[a-z]*))?$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "week": 604800, "weeks": 604800}
_ISO_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M",
                "%Y-%m-%d")


def parse_time_option(value: Any, now: Optional[float] = None) -> Optional[int]:
    """Unix seconds from a module's time option: an integer (Unix seconds), ``YYYY-MM-DD``,
    ``YYYY-MM-DDTHH:MM[:SS]`` (local time), ``now`` or ``now-<n><unit>`` / ``now+<n><unit>``
    (units as sacct takes them: seconds, minutes, hours, days, weeks). None for empty.

    Raises:
        ValueError: anything else.
    """
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    if re.match(r"^\d+$", text):
        return int(text)
    relative = _RELATIVE.match(text)
    if relative:
        base = int(now if now is not None else time.time())
        if not relative.group("sign"):
            return base
        unit = relative.group("unit").lower()
        if unit not in _UNITS:
            raise ValueError("unknown time unit %r in %r" % (unit, text))
        delta = int(relative.group("count")) * _UNITS[unit]
        return base - delta if relative.group("sign") == "-" else base + delta
    for fmt in _ISO_FORMATS:
        try:
            return int(time.mktime(time.strptime(text, fmt)))
        except ValueError:
            continue
    raise ValueError("not a time: %r (use Unix seconds, YYYY-MM-DD[THH:MM[:SS]] or now-<n>days)" % text)


def window_start(params: Dict[str, Any], now: float) -> int:
    """Unix seconds from the options ``window`` (seconds before ``now``) and ``start`` (a time of
    :func:`parse_time_option`), one of which a module requires (``slurm_node_event_info``,
    ``cluster_goodput_info``).

    Raises:
        TaskFailure: a negative window, an empty start, or a start that is not a time.
    """
    if params.get("window") is not None:
        if params["window"] < 0:
            raise TaskFailure("window: must be 0 or more seconds, not %s" % params["window"])
        return int(now) - params["window"]
    start = option_value(params, "start", parse_time_option)
    if start is None:
        raise TaskFailure("start: empty")
    return start
