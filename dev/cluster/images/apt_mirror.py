# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Debian mirror of this machine's apt sources, for debootstrap (images/lib.sh: mirror).

    /usr/bin/python3 dev/cluster/images/apt_mirror.py [SUITE]

Prints the first URI of a "deb" source of SUITE (default: the machine's own suite,
VERSION_CODENAME of /etc/os-release): deb822 ``.sources`` files first (disabled stanzas
skipped), then one-line ``.list`` files; security and updates suites have other names and are
not matched. The machine's mirror also serves the newer suites the images are made of. Exits
with a message when there is none. Read at run time, never written into the repository.
"""
from __future__ import annotations

import glob
import sys

OS_RELEASE = "/etc/os-release"
SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_DIR = "/etc/apt/sources.list.d"


def machine_suite(os_release: str = OS_RELEASE) -> str:
    """VERSION_CODENAME of os-release (bookworm on Debian 12)."""
    with open(os_release, encoding="utf-8") as handle:
        fields = dict(line.strip().split("=", 1) for line in handle if "=" in line)
    return fields["VERSION_CODENAME"].strip('"')


def deb822_uris(text: str, suite: str) -> list[str]:
    """URIs of the enabled "deb" stanzas of SUITE in a deb822 .sources file."""
    found: list[str] = []
    for stanza in text.split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.split()
        if "deb" in fields.get("types", []) and suite in fields.get("suites", []) \
                and fields.get("enabled", ["yes"])[0].lower() != "no":
            found += fields.get("uris", [])
    return found


def one_line_uris(text: str, suite: str) -> list[str]:
    """URIs of the "deb" lines of SUITE in a one-line .list file (its [options] skipped)."""
    found = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(None, 1)
        if not words or words[0] != "deb":
            continue
        rest = words[1].strip() if len(words) > 1 else ""
        if rest.startswith("["):  # [arch=amd64 signed-by=...]: one or more words
            rest = rest.partition("]")[2]
        words = rest.split()
        if len(words) >= 2 and words[1] == suite:
            found.append(words[0])
    return found


def mirrors(suite: str, sources_list: str = SOURCES_LIST, sources_dir: str = SOURCES_DIR) -> list[str]:
    """Every "deb" URI of SUITE, .sources files first: the first one is the mirror."""
    found = []
    for path in sorted(glob.glob(f"{sources_dir}/*.sources")):
        with open(path, encoding="utf-8") as handle:
            found += deb822_uris(handle.read(), suite)
    for path in [sources_list] + sorted(glob.glob(f"{sources_dir}/*.list")):
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue
        found += one_line_uris(text, suite)
    return found


def main(argv: list[str]) -> int:
    suite = argv[0] if argv else machine_suite()
    found = mirrors(suite)
    if not found:
        sys.exit(f"no apt source for suite {suite} in {SOURCES_LIST}{{,.d/}}")
    print(found[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
