#!/usr/bin/env bash
# The main job on the local default: builds the toolchain if needed, starts a local Kubernetes cluster (1.37.2,
# or the version stacks/Pulumi.local.yaml declares) on 127.0.0.1 with simulated hybrid GPU nodes (kwok), and runs `pulumi up` of stacks/Pulumi.local.yaml with
# the policy pack. `scripts/local-up.sh [up] --chart-mirror DIR` takes the charts from a mirror folder.
# `scripts/local-up.sh down` stops the cluster and removes it with the stack's state.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# Flags alone are `up`'s: `scripts/local-up.sh --chart-mirror DIR` is `scripts/local-up.sh up --chart-mirror DIR`.
if [ $# -eq 0 ] || [[ "$1" == -* && "$1" != -h && "$1" != --help ]]; then set -- up "$@"; fi
# `up` runs with --yes: this script is the command that asks for it (the README's main job, run unattended too);
# `eks-hybrid-gpu local up` without --yes shows the plan and asks first.
if [ "$1" = up ]; then shift; set -- up --yes "$@"; fi
exec .venv/bin/eks-hybrid-gpu local "$@"
