"""Offline stand-in for ansible-test's pip bootstrap script (get-pip-<version>.py).

ansible-test creates an empty virtual environment for each sanity test and bootstraps pip in it by running
``get-pip-<version>.py``, downloaded from its own CI file host. That host is not reachable from our build
machines, but ansible-test runs whatever lies at ``~/.ansible/test/cache/get_pip_<version>.py`` without a
checksum. tests/sanity/run.sh copies this file there.

What it does, with the arguments ansible-test passes (for example
``--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel``):

1. bootstrap the pip bundled with this Python through the standard library's ``ensurepip``;
2. ``pip install`` the same arguments with that pip, from the normal package index, so the exact pip version
   ansible-test pins ends up in the environment.

``--no-setuptools`` and ``--no-wheel`` are get-pip options that ``pip install`` does not know; they are dropped
(pip installs neither unless asked). The inner pip runs with a filtered environment and may not see the
machine's certificate setting, so ``--cert`` is passed explicitly when a CA bundle is found.
"""

import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = frozenset(("--no-setuptools", "--no-wheel", "--no-pip"))

CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/cert.pem",  # Alpine, macOS
)


def find_ca_bundle():
    """Return the path of a CA bundle file, or None when none is found."""
    for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        path = os.environ.get(name)
        if path and os.path.isfile(path):
            return path
    for path in CA_BUNDLES:
        if os.path.isfile(path):
            return path
    return None


def main():
    """Bootstrap pip with ensurepip, then pip install the requested packages."""
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])

    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    cert = find_ca_bundle()
    if cert and "--cert" not in args:
        args = ["--cert", cert] + args

    if any(not arg.startswith("-") for arg in args if arg != cert):
        subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main()
