#!/usr/bin/env bash
# Stages the Pulumi engine and the program's Python packages for the GPU machine, so that the program's own
# `pulumi up` and `eks-hybrid-gpu migrate` run there (scripts/hardware/program_run.py). The machine has python3 3.12
# with a few packages and no network; one device call carries at most 64 MiB, the working tree included.
#
# Under out/hw/ (ignored, never committed):
#   engine/wheels/      the cp312 manylinux x86_64 wheels, at exactly requirements.lock's versions, of what the
#                       program, `migrate` and the policy pack import at run time (WHEELS below)
#   engine/charts/      the pinned owner chart archives the hardware stacks name (from ../shared/charts)
#   stage-engine-N/bin.tar.xz   each unpacked at / there: 1 the Pulumi CLI (the toolchain's bin folder, at the same
#                       cache path as here), 2 the Kubernetes provider plugin (likewise), 3 /opt/hw-engine/{wheels,
#                       charts}. Each is at most LIMIT_MIB; the script fails when one is larger.
# There, `source scripts/hardware/engine_env.sh` installs the wheels and sets the engine's environment.
#
# Usage: scripts/hardware/stage_engine.sh [all|wheels|stages|1|2|3]   (default all; wheels: download only; a number:
#   that stage only)
set -euo pipefail
cd "$(dirname "$0")/../.."
part=${1:-all}
OUT=out/hw
ENGINE=$OUT/engine
# 64 MiB a call, less the working tree (about 5 MB) and the other files a call may carry with a stage.
LIMIT_MIB=${LIMIT_MIB:-56}
TOOLCHAIN=${TOOLCHAIN:-$HOME/.cache/eks-hybrid-gpu/toolchain}
# shellcheck source=../toolchain-versions.env
source scripts/toolchain-versions.env
PULUMI_BIN=$TOOLCHAIN/pulumi-$PULUMI_VERSION/bin
PROVIDER=$TOOLCHAIN/kubernetes-provider-$K8S_PROVIDER_VERSION/pulumi-resource-kubernetes
SHARED_CHARTS=${SHARED_CHARTS:-../shared/charts}
CHARTS=(nvidia-device-plugin-0.20.0.tgz dra-driver-nvidia-gpu-0.5.0.tgz)
# What `python -X importtime` shows the program (components.program), `migrate` (its runner: pulumi.automation) and
# the policy pack (pulumi_policy) import, by distribution. Left out because the GPU machine's python3 has them:
# PyYAML, requests, urllib3, six, setuptools. Shipped although the machine has them: grpcio, protobuf, packaging and
# typing-extensions, at the lock's versions, because pulumi's generated stubs refuse an older grpcio/protobuf and
# pydantic an older typing-extensions (the wheels come first on PYTHONPATH). Not imported, so not shipped:
# pulumi-aws (source eks only), debugpy (pulumi's debugger, on request), aiohttp (the kubernetes client's async API).
WHEELS=(
  pulumi pulumi-kubernetes pulumi-policy pydantic pydantic-core annotated-types typing-inspection typing-extensions
  dill semver parver grpcio protobuf packaging wrapt googleapis-common-protos
  opentelemetry-api opentelemetry-sdk opentelemetry-semantic-conventions opentelemetry-proto
  opentelemetry-exporter-otlp-proto-grpc opentelemetry-exporter-otlp-proto-common opentelemetry-exporter-otlp-common
  opentelemetry-instrumentation opentelemetry-instrumentation-grpc
  kubernetes certifi python-dateutil websocket-client requests-oauthlib oauthlib durationpy idna charset-normalizer
)

locked() {  # NAME...: each NAME's entry of requirements.lock (NAME==VERSION and its hashes), or fail
  local name entry
  for name in "$@"; do
    entry=$(awk -v n="$name" '$1 ~ "^"n"==" {on=1} on {print; if ($0 !~ /\\$/) exit}' requirements.lock)
    [ -n "$entry" ] || { echo "stage_engine: $name is not in requirements.lock" >&2; exit 1; }
    echo "$entry"
  done
}

wheels() {
  rm -rf "$ENGINE/wheels.partial"
  mkdir -p "$ENGINE/wheels.partial"
  locked "${WHEELS[@]}" > "$ENGINE/requirements.txt"
  # --require-hashes: every wheel is one the lock vouches for, as scripts/bootstrap.sh installs them here.
  "${PIP_PYTHON:-python3}" -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$ENGINE/wheels.partial" -r "$ENGINE/requirements.txt"
  rm -rf "$ENGINE/wheels"
  mv "$ENGINE/wheels.partial" "$ENGINE/wheels"
  mkdir -p "$ENGINE/charts"
  for name in "${CHARTS[@]}"; do cp "$SHARED_CHARTS/$name" "$ENGINE/charts/$name"; done
  echo "stage_engine: $(find "$ENGINE/wheels" -name '*.whl' | wc -l) wheels, $(du -sh "$ENGINE/wheels" | cut -f1)"
}

stage() {  # stage N TAR-ARGS...: one xz'd tar, unpacked at / there; refused above LIMIT_MIB
  local n=$1; shift
  local dir=$OUT/stage-engine-$n
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -cf - "$@" | xz -9 -T2 > "$dir/bin.tar.xz.partial"
  mv "$dir/bin.tar.xz.partial" "$dir/bin.tar.xz"
  local bytes; bytes=$(stat -c %s "$dir/bin.tar.xz")
  printf 'stage-engine-%s: %s bytes (%.1f MiB)\n' "$n" "$bytes" "$(echo "$bytes / 1048576" | bc -l)"
  if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
    echo "stage_engine: stage-engine-$n is over $LIMIT_MIB MiB: split it" >&2
    exit 1
  fi
}

engine_stage() {  # N: build stage N from what it holds
  case "$1" in
    1)  # the CLI's folder as built (pulumi and any language host or analyzer beside it), at its cache path
      [ -x "$PULUMI_BIN/pulumi" ] || { echo "stage_engine: no $PULUMI_BIN/pulumi: run scripts/toolchain.sh pulumi" >&2; exit 1; }
      stage 1 -C / "${PULUMI_BIN#/}" ;;
    2)
      [ -x "$PROVIDER" ] || { echo "stage_engine: no $PROVIDER: run scripts/toolchain.sh provider" >&2; exit 1; }
      stage 2 -C / "${PROVIDER#/}" ;;
    3)
      [ -d "$ENGINE/wheels" ] || wheels
      stage 3 -C "$ENGINE" --transform 's,^,opt/hw-engine/,' wheels charts ;;
  esac
}

case "$part" in
  all) wheels; engine_stage 1; engine_stage 2; engine_stage 3 ;;
  wheels) wheels ;;
  stages) engine_stage 1; engine_stage 2; engine_stage 3 ;;
  1|2|3) engine_stage "$part" ;;
  *) echo "usage: $0 [all|wheels|stages|1|2|3]" >&2; exit 2 ;;
esac
