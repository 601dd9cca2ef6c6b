"""`python3 dev/cluster/devcluster ...`: the dev cluster's command line (cli.main)."""

import os
import sys

if not __package__:
    # Run as a folder: Python put the package's own folder first on sys.path; its parent
    # (dev/cluster) makes it importable as the package `devcluster`, with relative imports.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from devcluster.cli import main  # noqa: E402  # pylint: disable=wrong-import-position

sys.exit(main())
