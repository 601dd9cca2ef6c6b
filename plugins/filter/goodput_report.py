# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: goodput_report
short_description: The goodput report of a training run as one self-contained HTML page
version_added: 0.2.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
description:
  - Takes one run of the result of M(clusterops.slurm.training_goodput_info) and returns a single
    HTML page a person opens in a browser - the steps lost and the time to training again of each
    restart first, then each failure in words with its failed node, a timeline of the run's jobs
    (queued, running, the detection after the last progress - lost time - and how each ended),
    remediation's actions and the checkpoints; the progress curve (step over time) with the lost
    work of each restart shaded; the goodput table, the restarts with their time to training split,
    the jobs, and what is not known and why.
  - The timeline and the progress curve share one time axis (the same range and unit - seconds,
    minutes or hours since the first submission - and the plot areas at the same x), and mark each
    failure at the last progress before it, labelled with the job, its end state, the failed node
    (RV(clusterops.slurm.training_goodput_info#module:runs[].failures[].failed_nodes)) and the step.
  - The pictures are drawn with matplotlib and embedded as inline SVG - the page has no script and
    no reference to anything outside it, so it opens offline and can be mailed or archived as it is.
  - Everything that comes from users or Slurm (the run's name, its owner, states, node names, the
    reasons a figure is unknown) is HTML-escaped, and written as escaped SVG text in the pictures.
  - Runs on the controller. It needs matplotlib there (the collection's C(requirements.txt) pins it);
    without it the filter fails saying so.
options:
  _input:
    description: One entry of RV(clusterops.slurm.training_goodput_info#module:runs).
    type: dict
    required: true
seealso:
  - module: clusterops.slurm.training_goodput_info
  - name: Goodput
    description: The figures, and the report (docs/goodput.md).
    link: https://github.com/clusterops/slurm/blob/main/docs/goodput.md
"""

EXAMPLES = r"""
- name: Goodput of one run
  clusterops.slurm.training_goodput_info:
    runs: [llama-8b]
    event_log: events.jsonl
  register: goodput

- name: Its page, on the controller
  ansible.builtin.copy:
    content: "{{ goodput.runs[0] | clusterops.slurm.goodput_report }}"
    dest: /srv/reports/llama-8b.html
    mode: "0644"
  delegate_to: localhost

# Or the whole of it: ansible-playbook clusterops.slurm.goodput_report -e goodput_report_run=llama-8b
"""

RETURN = r"""
_value:
  description:
    - The page, HTML text (UTF-8), about 45 kB for a run with a restart. Its elements carry
      ids a program can read back - C(steps-lost) and C(time-to-training) (the exact values in
      C(data-value), seconds, one per restart), the list C(failures) (C(failure-N), its time in
      C(data-time)), tables C(totals), C(restarts) and C(jobs), figures C(timeline) and
      C(progress) (the shared time axis in C(data-unit) and C(data-xlim)).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.goodput_report import (
    ReportError,
    render_report,
)


def goodput_report(run):
    """The HTML page of ``run`` (one entry of training_goodput_info's ``runs``)."""
    try:
        return render_report(run)
    except ReportError as exc:
        raise AnsibleFilterError("goodput_report: %s" % exc)
    # Figures of a shape the page was not written for (a value out of any range, a string for a number):
    # the filter's own clear error, never a Python traceback in the play.
    except Exception as exc:  # pylint: disable=broad-except
        name = run.get("name") if isinstance(run, dict) else None
        raise AnsibleFilterError("goodput_report: cannot render the report of run %r: %s: %s"
                                 % (name, type(exc).__name__, exc))


class FilterModule(object):
    """The goodput report filter."""

    def filters(self):
        return {"goodput_report": goodput_report}
