# The Pulumi engine's environment on the GPU machine, from the stages of scripts/hardware/stage_engine.sh unpacked at
# / (`tar -C / -xJf out/hw/stage-engine-N/bin.tar.xz`, one device call each). Sourced from the repository root:
#
#   source scripts/hardware/engine_env.sh && python3 scripts/hardware/program_run.py ...
#
# Installs the wheels once (/tmp/hw-site, kept while the machine stays warm), puts them first on PYTHONPATH (they
# shadow the machine's older grpcio/protobuf) with the repository after them, sets the engine's variables as every
# engine run of the program sets them (eks_hybrid_gpu.engine.isolated_variables: own Pulumi home, file backend,
# passphrase, no plugin downloads), registers the Kubernetes provider plugin from its file, and checks `pulumi
# version` and the imports. Fails (returns non-zero) naming what is missing.
# shellcheck shell=bash

hw_engine_env() {
  local repo engine site state toolchain version
  repo=$(pwd)
  engine=${HW_ENGINE:-/opt/hw-engine}
  site=${HW_SITE:-/tmp/hw-site}
  state=${HW_PULUMI_STATE:-/var/lib/hw-pulumi}
  toolchain=${TOOLCHAIN:-$HOME/.cache/eks-hybrid-gpu/toolchain}
  # shellcheck source=../toolchain-versions.env
  source "$repo/scripts/toolchain-versions.env" || return 1
  local pulumi_bin=$toolchain/pulumi-$PULUMI_VERSION/bin
  local provider=$toolchain/kubernetes-provider-$K8S_PROVIDER_VERSION/pulumi-resource-kubernetes
  local missing=()
  [ -x "$pulumi_bin/pulumi" ] || missing+=("$pulumi_bin/pulumi (stage-engine-1)")
  [ -x "$provider" ] || missing+=("$provider (stage-engine-2)")
  compgen -G "$engine/wheels/*.whl" > /dev/null || missing+=("$engine/wheels (stage-engine-3)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "engine_env: not unpacked: ${missing[*]}" >&2
    return 1
  fi
  if [ ! -f "$site/.installed" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$engine"/wheels/*.whl || return 1
    touch "$site/.installed"
  fi
  export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
  mkdir -p "$state"
  eval "$(python3 - "$pulumi_bin" "$state" <<'PY'
import shlex
import sys
from pathlib import Path

from eks_hybrid_gpu.engine import isolated_variables

bin_dir, state = sys.argv[1], Path(sys.argv[2])
for key, value in isolated_variables([bin_dir], state / "pulumi-home", state / "backend").items():
    print(f"export {key}={shlex.quote(value)}")
PY
)" || return 1
  if [ ! -x "$PULUMI_HOME/plugins/resource-kubernetes-v$K8S_PROVIDER_VERSION/pulumi-resource-kubernetes" ]; then
    pulumi plugin install resource kubernetes "$K8S_PROVIDER_VERSION" --file "$provider" || return 1
  fi
  export HW_CHARTS="$engine/charts"
  pulumi version || return 1
  python3 -c 'import pulumi, pulumi_kubernetes, pulumi_policy, pydantic, kubernetes, components.program' || return 1
  echo "engine_env: pulumi $(pulumi version), python $(python3 -c 'import sys; print(sys.version.split()[0])')," \
    "PULUMI_HOME=$PULUMI_HOME, backend $PULUMI_BACKEND_URL"
}

hw_engine_env
