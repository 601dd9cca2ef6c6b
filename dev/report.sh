#!/usr/bin/env bash
# make report RUN=<run>: the goodput page of a training run of the dev cluster (by default the
# demo's, after `make demo`), written by playbooks/goodput_report.yml with the dev cluster's
# inventory and the demo's run registry. Prints the page's path.
#   RUN         the run's name (required), e.g. demo-llm
#   REGISTRY    the run registry (default: the demo's, where dev/demo.sh keeps it)
#   REPORT_DIR  where the page goes (default: <the demo's folder>/reports)
#   HISTORY     the jobs from when (Unix seconds, now-7days ...; default: for the demo's registry, when
#               the demo started - earlier demos' jobs have the same name and owner; else the module's)
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
export ANSIBLE_PYTHON_INTERPRETER="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
[[ -n "${RUN:-}" ]] || { echo "report: make report RUN=<run name>, e.g. RUN=demo-llm (after make demo)" >&2; exit 2; }
# shellcheck source=dev/cluster/releases.sh
source dev/cluster/releases.sh
SLURM="${SLURM:-$(release_host)}"
state="${DEVCLUSTER_DIR:-$(release_state_dir "${PWD}" "${SLURM}")}" ||
  { echo "report: SLURM=${SLURM} is not in dev/cluster/releases.txt ($(release_names))" >&2; exit 2; }
[[ -e "${state}/inventory.yml" ]] || { echo "report: no dev cluster in ${state} (make cluster-up, make demo)" >&2; exit 2; }
# The demo's folder, as dev/demo.sh chooses it: /var/tmp on the host, the shared folder in a container.
shared=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("shared_dir") or "/var/tmp")' \
  "${state}/cluster.json")
if [[ "$(release_runs "${SLURM}")" == host ]]; then demo=/var/tmp/clusterops-demo; else demo="${shared}/demo-${SLURM}"; fi
registry="${REGISTRY:-${demo}/registry}"
history="${HISTORY:-}"
if [[ -z "${history}" && -z "${REGISTRY:-}" && -r "${demo}/started" ]]; then history=$(<"${demo}/started"); fi
dir="${REPORT_DIR:-${demo}/reports}"
mkdir -p "${dir}"
vars=$(python3 -c 'import json, sys
names = ("goodput_report_run", "goodput_report_registry", "goodput_report_dir", "goodput_report_history")
print(json.dumps(dict((k, v) for k, v in zip(names, sys.argv[1:]) if v)))' \
  "${RUN}" "${registry}" "$(cd "${dir}" && pwd)" "${history}")
ansible-playbook -i "${state}/inventory.yml" playbooks/goodput_report.yml -e "${vars}" >"${dir}/${RUN}.log" 2>&1 ||
  { cat "${dir}/${RUN}.log" >&2; echo "report: the playbook failed (log: ${dir}/${RUN}.log)" >&2; exit 1; }
echo "$(cd "${dir}" && pwd)/${RUN}.html"
