# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md, the newcomers' map, names every file of plugins/ and no file that is gone."""

from __future__ import annotations

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_the_architecture_map_names_every_plugin_file():
    plugins = os.path.join(REPO, "plugins")
    files = sorted(os.path.relpath(os.path.join(top, name), plugins).replace(os.sep, "/")
                   for top, dirs, names in os.walk(plugins) if "__pycache__" not in top
                   for name in names if name.endswith(".py"))
    with open(os.path.join(REPO, "docs", "architecture.md")) as handle:
        text = handle.read()
    table = text[text.index("## Every file of `plugins/`"):]
    named = sorted(re.findall(r"^\| `([a-z_/]+\.py)` \|", table, re.MULTILINE))
    assert named == files
