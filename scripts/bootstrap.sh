#!/usr/bin/env bash
# Creates .venv with the pinned Python dependencies (PyPI only). Re-runs are a no-op until pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ -f "$stamp" ]; then exit 0; fi
echo "[bootstrap] creating .venv with the pinned dependencies" >&2
rm -rf .venv
"$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
touch "$stamp"
