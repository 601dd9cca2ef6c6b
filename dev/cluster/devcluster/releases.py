"""The release table (dev/cluster/releases.txt) for Python: the dev cluster and the tests.

``dev/cluster/releases.sh`` reads the same table for make and bash. Each line: release, Debian
suite, where it runs (``host`` or ``container``), port offset; ``#`` starts a comment line.
"""

import os
from typing import Dict, List, NamedTuple, Tuple

TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "releases.txt")


class Release(NamedTuple):
    """One line of the table."""

    name: str  # "24.11"
    suite: str  # Debian suite: "trixie"
    runs: str  # "host" or "container"
    port_offset: int


def read_releases(path: str = TABLE) -> List[Release]:
    """Every release of the table at ``path``, in its order; ValueError for a malformed line."""
    found = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) != 4 or words[2] not in ("host", "container") or not words[3].isdigit():
                raise ValueError(f"{path}:{number}: want 'release suite host|container port_offset'")
            found.append(Release(words[0], words[1], words[2], int(words[3])))
    return found


RELEASES: Tuple[Release, ...] = tuple(read_releases())
#: Every release, in the table's order ("all releases").
RELEASE_NAMES: Tuple[str, ...] = tuple(r.name for r in RELEASES)
#: The release that runs on the host (the default SLURM): the table's one ``host`` line.
HOST_RELEASE: str = next(r.name for r in RELEASES if r.runs == "host")
#: The releases that run in a podman container.
CONTAINER_RELEASES: Tuple[str, ...] = tuple(r.name for r in RELEASES if r.runs == "container")
PORT_OFFSETS: Dict[str, int] = {r.name: r.port_offset for r in RELEASES}
SUITES: Dict[str, str] = {r.name: r.suite for r in RELEASES}


def state_dir(repo: str, release: str) -> str:
    """The default state dir of ``release``'s dev cluster: ``repo/.devcluster`` for the host's
    release, ``repo/.devcluster-<release>`` for one in a container."""
    return os.path.join(repo, ".devcluster" if release == HOST_RELEASE else ".devcluster-" + release)
