#!/usr/bin/env bash
# Creates .venv with the locked Python dependencies (PyPI only): requirements.lock, every file checked against its
# sha256 (--require-hashes), then this project itself without resolving anything (--no-deps; the build backend
# comes from the lock too). Re-runs are a no-op until pyproject.toml or requirements.lock changes.
# Changing a dependency: edit pyproject.toml, run scripts/lock.sh, commit both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
stamp=".venv/.installed-$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then exit 0; fi
echo "[bootstrap] creating .venv from requirements.lock" >&2
rm -rf .venv
"$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
.venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
touch "$stamp"
