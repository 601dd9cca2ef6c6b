# shellcheck shell=bash
# The release table (dev/cluster/releases.txt) for bash and make: source this file for its
# functions, or run one of them as `bash dev/cluster/releases.sh FUNCTION [ARG...]` (make's
# $(shell ...)).
#
#   release_names [host|container]   every release (or those that run there), space separated
#   release_host                     the release that runs on the host (the default SLURM)
#   release_suite RELEASE            its Debian suite; fails for a release not in the table
#   release_runs RELEASE             host or container; fails for a release not in the table
#   release_state_dir REPO RELEASE   its dev cluster's state dir: REPO/.devcluster on the host,
#                                    REPO/.devcluster-RELEASE in a container

_releases_table="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/releases.txt"

# _release_column RELEASE N: column N of RELEASE's line; fails when there is none.
_release_column() {
  awk -v r="$1" -v n="$2" '$1 !~ /^#/ && NF >= 4 && $1 == r { print $n; found = 1; exit }
                           END { exit !found }' "${_releases_table}"
}

release_names() {
  awk -v where="${1:-}" '$1 !~ /^#/ && NF >= 4 && (where == "" || $3 == where) { printf "%s%s", sep, $1; sep = " " }
                         END { print "" }' "${_releases_table}"
}

release_host() { release_names host; }

release_suite() { _release_column "$1" 2; }

release_runs() { _release_column "$1" 3; }

release_state_dir() {
  local runs
  runs="$(release_runs "$2")" || return 1
  if [[ "${runs}" == host ]]; then echo "$1/.devcluster"; else echo "$1/.devcluster-$2"; fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  case "${1:-}" in
    release_names | release_host | release_suite | release_runs | release_state_dir) "$@" ;;
    *) echo "usage: bash $0 release_names|release_host|release_suite|release_runs|release_state_dir ARG..." >&2; exit 2 ;;
  esac
fi
