# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/quickstart.md's marked blocks (tests/quickstart_blocks.py: the scheme) parse and are what
tests/integration/test_quickstart.py can run, so that a page broken for the test fails here first,
without a cluster; and the parser refuses every malformed page of a table."""

from __future__ import annotations

import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def qs(tests_script):
    return tests_script("quickstart_blocks")


def version():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["version"]


def test_the_quickstart_page_has_every_block_the_test_runs(qs):
    with open(qs.PAGE, encoding="utf-8") as handle:
        found = qs.blocks(handle.read())
    assert list(found) == list(qs.ROLES)
    assert all(found[role]["language"] == language for role, language in qs.ROLES.items())
    taken = qs.check(found, version())
    assert taken["install"][:3] == ["ansible-galaxy", "collection", "install"]
    assert taken["plan"][0] == taken["act"][0] == "ansible-playbook"
    assert "clusterops.slurm.remediate" in taken["plan"] and "clusterops.slurm.remediate" in taken["act"]
    assert taken["inventory_file"] == "inventory.yml"
    # What the integration test maps from the page's example to the dev cluster must be in the summary.
    summary = "\n".join(taken["summary"])
    for name in (taken["host"], "trn", "gpu017", "gpu042", "'Prolog error'", "'disk swap'",
                 taken["inventory"]["all"]["children"]["slurm_controller"]["vars"]["remediate_training_registry"]):
        assert name in summary, name


def test_the_summary_lines_are_the_roles_own_words(qs):
    """The page's summary lines keep the words of the tasks that print them (the templates in
    roles/remediate/tasks/report.yml, roles/remediate_nodes/tasks/main.yml,
    roles/remediate_training/tasks/main.yml), so that a changed wording shows up here too."""
    with open(qs.PAGE, encoding="utf-8") as handle:
        summary = qs.check(qs.blocks(handle.read()), version())["summary"]
    sources = ""
    for path in ("roles/remediate/tasks/report.yml", "roles/remediate_nodes/tasks/main.yml",
                 "roles/remediate_training/tasks/main.yml", "plugins/module_utils/_node_remediation/report.py",
                 "plugins/module_utils/_node_remediation/policy.py"):
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            sources += handle.read()
    for fragment in ("nodes in the cluster", "in scope, at most", "rebooting or acted on at once", "in flight",
                     "training run(s) registered in", "healed", "skipped", "overflow",
                     "resubmitted", "reason matches no class (drained on purpose?)"):
        assert any(fragment in line for line in summary), fragment
        assert fragment in sources, fragment


PAGE = """# Page

<!-- quickstart-test: install -->
```sh
ansible-galaxy collection install clusterops-slurm-1.2.3.tar.gz   # as yourself
```

<!-- quickstart-test: inventory -->
```yaml
all:
  children:
    slurm_controller:
      hosts:
        ctl.example.org:
      vars:
        slurm_conf: /etc/slurm/slurm.conf
        remediate_training_registry: /srv/runs
```

```sh
# an unmarked block, and a marker-like line inside a block that is not a marker:
<!-- quickstart-test: act -->
```

<!-- quickstart-test: plan -->
```sh
ansible-playbook -i inventory.yml \\
  clusterops.slurm.remediate --check
```

<!-- quickstart-test: act -->
```sh
ansible-playbook -i inventory.yml clusterops.slurm.remediate
```

<!-- quickstart-test: summary -->
```text
    "msg": [
        "cluster c: ctl.example.org acted; nodes healed 1, skipped 0, overflow 0; runs resubmitted 0"
    ]
```
"""


def test_a_well_formed_page_parses(qs):
    found = qs.blocks(PAGE)
    assert [(role, block["language"], block["line"]) for role, block in found.items()] == [
        ("install", "sh", 3), ("inventory", "yaml", 8), ("plan", "sh", 25), ("act", "sh", 31), ("summary", "text", 36)]
    taken = qs.check(found, "1.2.3")
    assert taken["install"] == ["ansible-galaxy", "collection", "install", "clusterops-slurm-1.2.3.tar.gz"]
    assert taken["plan"] == ["ansible-playbook", "-i", "inventory.yml", "clusterops.slurm.remediate", "--check"]
    assert taken["host"] == "ctl.example.org"
    assert taken["summary"] == ["cluster c: ctl.example.org acted; nodes healed 1, skipped 0, overflow 0; runs resubmitted 0"]


def broken(old, new):
    assert old in PAGE, old
    return PAGE.replace(old, new, 1)


@pytest.mark.parametrize("page,version,message", [
    (broken("<!-- quickstart-test: install -->", "<!-- quickstart-test install -->"), "1.2.3", "not a marker"),
    (broken("<!-- quickstart-test: install -->", "<!-- quickstart-test: setup -->"), "1.2.3", "unknown role 'setup'"),
    (broken("<!-- quickstart-test: install -->\n", "<!-- quickstart-test: install -->\n\n"), "1.2.3",
     "not followed by a fenced block"),
    (broken("```yaml", "```yml"), "1.2.3", "must be ```yaml"),
    (broken("<!-- quickstart-test: summary -->\n```text", "<!-- quickstart-test: summary -->\n```"), "1.2.3",
     "must be ```text"),
    (broken("<!-- quickstart-test: summary -->", "<!-- quickstart-test: plan -->"), "1.2.3", "marked twice"),
    (broken("<!-- quickstart-test: summary -->", "<!-- other -->"), "1.2.3", "no block marked for summary"),
    (PAGE.replace("<!-- quickstart-test: plan -->", "<!-- quickstart-test: X -->")
     .replace("<!-- quickstart-test: act -->\n```sh\nansible-playbook -i inventory.yml clusterops.slurm.remediate\n",
              "<!-- quickstart-test: plan -->\n```sh\nansible-playbook -i inventory.yml clusterops.slurm.remediate\n")
     .replace("<!-- quickstart-test: X -->", "<!-- quickstart-test: act -->"), "1.2.3", "in the order"),
    (PAGE[:PAGE.rindex("```")], "1.2.3", "never closes"),
    (PAGE, "2.0.0", "galaxy.yml's version"),
    (broken("--check", ""), "1.2.3", "--check"),
    (broken("ansible-playbook -i inventory.yml clusterops.slurm.remediate\n```",
            "ansible-playbook -i other.yml clusterops.slurm.remediate\n```"), "1.2.3", "same inventory"),
    (broken("ansible-galaxy collection install", "sudo ansible-galaxy collection install"), "1.2.3",
     "one ansible-galaxy command"),
    (broken("        remediate_training_registry: /srv/runs\n", ""), "1.2.3", "remediate_training_registry"),
    (broken("        ctl.example.org:\n", "        ctl.example.org:\n        ctl2.example.org:\n"), "1.2.3", "one host"),
    (broken('"cluster c:', '"cluster: c'), "1.2.3", "no fleet summary line"),
], ids=["malformed-marker", "unknown-role", "blank-before-fence", "wrong-language", "no-language", "twice",
        "missing", "order", "unclosed", "version", "plan-without-check", "two-inventories", "install-program",
        "registry-not-set", "two-hosts", "no-fleet-line"])
def test_a_broken_page_is_refused_naming_why(qs, page, version, message):
    with pytest.raises(qs.PageError, match=re.escape(message)):
        qs.check(qs.blocks(page), version)


@pytest.mark.parametrize("line,text,matches", [
    ("cluster trn: slurm-ctl.example.org acted; nodes healed 1", "cluster devcluster: localhost acted; nodes healed 1", True),
    ("cluster trn: slurm-ctl.example.org acted; nodes healed 1", "cluster devcluster: localhost acted; nodes healed 12", True),
    ("cluster trn: slurm-ctl.example.org acted", "cluster trn: slurm-ctl.example.org acted", False),
    ("gpu017: resume (1 node, IDLE+DRAIN)", "n1: resume (1 node, IDLE+DRAIN)", True),
    ("gpu017: resume (1 node, IDLE+DRAIN)", "n2: resume (1 node, IDLE+DRAIN)", False),
    ("128 nodes in the cluster,  128 in scope", "4 nodes in the cluster, 4 in scope", True),
    ("0 training run(s) registered in /var/lib/clusterops/runs", "0 training run(s) registered in /tmp/q/runs", True),
    ("0 training run(s) registered in /var/lib/clusterops/runs", "0 training run(s) registered in /var/lib/clusterops/runs",
     False),
])
def test_a_summary_line_becomes_a_pattern_of_the_real_names(qs, line, text, matches):
    names = {"trn": "devcluster", "slurm-ctl.example.org": "localhost", "gpu017": "n1",
             "/var/lib/clusterops/runs": "/tmp/q/runs"}
    assert bool(qs.line_pattern(line, names).search(text)) is matches


def test_commands_split_as_a_shell_would_without_one(qs):
    assert qs.commands("# a comment\n\nansible-playbook -e 'a b' x.yml  # why\nls \\\n  -l\n") == [
        ["ansible-playbook", "-e", "a b", "x.yml"], ["ls", "-l"]]
