#!/usr/bin/env bash
# The test command: lint, type check, then every test — unit (mocks), policy (no engine) and integration
# (the real Pulumi engine and Kubernetes provider against a local 1.37 API server, and 1.34 where a test says so). The integration tests
# build the offline toolchain on first use (about 35-50 min on 2 cores) and reuse the cache afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
echo "[test] ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "[test] mypy" >&2
.venv/bin/mypy cluster components eks_hybrid_gpu payloads policy testkit bench scripts/hardware scripts/build_hostcheck.py
echo "[test] pytest" >&2
.venv/bin/pytest -q -p no:cacheprovider "$@"
