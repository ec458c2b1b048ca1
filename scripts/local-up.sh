#!/usr/bin/env bash
# The main job on the local default: builds the toolchain if needed, starts a local Kubernetes 1.34 API
# server on 127.0.0.1, and runs `pulumi up` of stacks/Pulumi.local.yaml with the policy pack.
# `scripts/local-up.sh down` destroys the stack and stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/eks-hybrid-gpu local "${1:-up}"
