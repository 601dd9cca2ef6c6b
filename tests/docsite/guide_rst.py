# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the operator's guide (docs/<page>.md, the one source) as the docsite's extra docs,
docs/docsite/rst/<page>.rst, for the pages docs/docsite/extra-docs.yml lists.

antsibull-docs reads extra docs only as RST, the guide is GitHub Markdown (what the repository and
the installed collection show), so the RST is written from it before every tarball and docsite
build (make tarball, tests/packaging's tarball, tests/docsite/build.sh) and never edited by hand
(.gitignore keeps it out of git). Conversion: pandoc (pypandoc-binary, pinned in
requirements-test.txt) with guide_links.lua, which turns links between pages into :ref: roles.

    python tests/docsite/guide_rst.py [REPO]    -> prints the pages written, one per line

Exit status 1, nothing written, when extra-docs.yml and docs/*.md do not list the same pages, or
a page links to a file the docsite does not carry.
"""

from __future__ import annotations

import glob
import os
import sys

import pypandoc
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
NOTICE = ".. Written by tests/docsite/guide_rst.py from docs/{page}.md: edit that file, not this one.\n\n"


def listed_pages(repo: str) -> list[str]:
    """Page names of every toctree in docs/docsite/extra-docs.yml, in order."""
    with open(os.path.join(repo, "docs", "docsite", "extra-docs.yml"), encoding="utf-8") as handle:
        index = yaml.safe_load(handle)
    return [name for section in index["sections"] for name in section["toctree"]]


def guide_pages(repo: str) -> list[str]:
    """Names of the guide's Markdown pages, docs/<name>.md."""
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(repo, "docs", "*.md")))


def convert(repo: str, page: str, pages: list[str]) -> str:
    """RST of docs/<page>.md; raises RuntimeError (pandoc's message) on a link the filter refuses."""
    body = pypandoc.convert_file(
        os.path.join(repo, "docs", page + ".md"), "rst", format="gfm",
        extra_args=["--columns=110", "--lua-filter", os.path.join(HERE, "guide_links.lua"),
                    "--metadata", "page=" + page, "--metadata", "pages=" + ",".join(pages)])
    return NOTICE.format(page=page) + body


def main(repo: str) -> int:
    listed, found = listed_pages(repo), guide_pages(repo)
    if sorted(listed) != found:
        print("guide_rst: docs/docsite/extra-docs.yml lists %s, docs/ has %s" % (sorted(listed), found),
              file=sys.stderr)
        return 1
    try:
        texts = {page: convert(repo, page, listed) for page in listed}
    except RuntimeError as err:
        print("guide_rst: %s" % err, file=sys.stderr)
        return 1
    out = os.path.join(repo, "docs", "docsite", "rst")
    os.makedirs(out, exist_ok=True)
    for stale in glob.glob(os.path.join(out, "*.rst")):
        if os.path.splitext(os.path.basename(stale))[0] not in texts:
            os.remove(stale)
    for page, text in texts.items():
        with open(os.path.join(out, page + ".rst"), "w", encoding="utf-8") as handle:
            handle.write(text)
        print(os.path.join("docs", "docsite", "rst", page + ".rst"))
    return 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(HERE))))
