#!/usr/bin/env bash
# Makes the engine toolchain available: the Pulumi CLI, the Kubernetes provider plugin, kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd and kwok (the simulated kubelet of the local default's
# GPU nodes), at the versions in toolchain-versions.env.
#
# Order of preference for each tool: already on PATH at the pinned version, then the official download
# (only when the internet answers), then a build from the Go module proxy (the air-gapped path).
# Built binaries are cached outside the repository, keyed by version, so a second run takes seconds.
#
# Usage: scripts/toolchain.sh [--print-env] [pulumi|provider|kube|etcd|kwok ...]
#   --print-env   print the `export PATH=...` line for the toolchain and nothing else on stdout
# Environment:
#   EKS_HYBRID_GPU_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/eks-hybrid-gpu)
#   EKS_HYBRID_GPU_OFFLINE=1  never probe the internet; build from the Go module proxy
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/toolchain-versions.env
source "$HERE/toolchain-versions.env"

CACHE_ROOT="${EKS_HYBRID_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eks-hybrid-gpu}"
TOOLCHAIN="$CACHE_ROOT/toolchain"
WORK="$CACHE_ROOT/go-build-work"
PULUMI_DIR="$TOOLCHAIN/pulumi-$PULUMI_VERSION"
PROVIDER_DIR="$TOOLCHAIN/kubernetes-provider-$K8S_PROVIDER_VERSION"
KUBE_DIR="$TOOLCHAIN/kube-$KUBE_VERSION"
ETCD_DIR="$TOOLCHAIN/etcd-$ETCD_VERSION"
KWOK_DIR="$TOOLCHAIN/kwok-$KWOK_VERSION"

log() { printf '[toolchain %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

internet_answers() {
  [ "${EKS_HYBRID_GPU_OFFLINE:-0}" = "1" ] && return 1
  if [ -z "${_INTERNET:-}" ]; then
    if curl -fsS --max-time 5 -o /dev/null https://get.pulumi.com/ 2>/dev/null; then _INTERNET=yes; else _INTERNET=no; fi
    log "internet reachable: $_INTERNET"
  fi
  [ "$_INTERNET" = yes ]
}

# A wrapper module per binary: `go install pkg@version` refuses modules with replace directives.
fresh_module() {
  rm -rf "${WORK:?}/$1"; mkdir -p "$WORK/$1"; cd "$WORK/$1"
  go mod init "local.build/$1" >/dev/null 2>&1
  go mod edit -go=1.26
}

# Print "-replace=old=new@ver" for every non-local replace of a go.mod; map local
# "./staging/src/k8s.io/X" replaces to "k8s.io/X@$2" when $2 is given.
replaces_of() {
  go mod edit -json "$1" | python3 -c '
import json, sys
staging = sys.argv[1] if len(sys.argv) > 1 else ""
for r in json.load(sys.stdin).get("Replace") or []:
    old, new = r["Old"], r["New"]
    lhs = old["Path"] + ("@" + old["Version"] if old.get("Version") else "")
    if new.get("Version"):
        print("-replace=%s=%s@%s" % (lhs, new["Path"], new["Version"]))
    elif staging and new["Path"].startswith("./staging/src/"):
        print("-replace=%s=%s@%s" % (lhs, old["Path"], staging))
' ${2:+"$2"}
}

go_build_env() {
  command -v go >/dev/null || die "Go is required to build the toolchain offline; install Go 1.26 (apt-get install golang or go.dev)"
  export CGO_ENABLED=0
  export GOFLAGS="-trimpath -buildvcs=false"
}

have_all() { local f; for f in "$@"; do [ -x "$f" ] || return 1; done; }

# ---------------------------------------------------------------- pulumi CLI
ensure_pulumi() {
  local want="${PULUMI_VERSION#v}"
  if have_all "$PULUMI_DIR/bin/pulumi"; then log "pulumi $PULUMI_VERSION: cached"; return; fi
  mkdir -p "$PULUMI_DIR/bin"
  if command -v pulumi >/dev/null && [ "$(pulumi version 2>/dev/null)" = "v$want" ]; then
    log "pulumi $PULUMI_VERSION: found on PATH at $(command -v pulumi)"
    ln -sf "$(command -v pulumi)" "$PULUMI_DIR/bin/pulumi"
  elif internet_answers; then
    log "pulumi $PULUMI_VERSION: official installer"
    curl -fsSL https://get.pulumi.com | sh -s -- --version "$want" --install-root "$PULUMI_DIR/official" --no-edit-path
    ln -sf "$PULUMI_DIR/official/bin/"* "$PULUMI_DIR/bin/"
  else
    log "pulumi $PULUMI_VERSION: building from the Go module proxy (about 10-20 min on 2 cores)"
    go_build_env
    fresh_module pulumi-cli
    local info gomod
    info=$(go mod download -json "github.com/pulumi/pulumi/pkg/v3@${PULUMI_VERSION}")
    gomod=$(printf '%s' "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    # shellcheck disable=SC2046
    go mod edit $(replaces_of "$gomod")
    go get -tool "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@${PULUMI_VERSION}" \
      "github.com/pulumi/pulumi/sdk/v3@${PULUMI_VERSION}"
    go mod tidy
    log "pulumi: compiling"
    go build -tags osusergo,grpcnotrace \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=${PULUMI_VERSION}" \
      -o "$PULUMI_DIR/bin/pulumi.partial" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
    mv "$PULUMI_DIR/bin/pulumi.partial" "$PULUMI_DIR/bin/pulumi"
  fi
  log "pulumi: $("$PULUMI_DIR/bin/pulumi" version)"
}

# ---------------------------------------------------------------- Kubernetes provider plugin
ensure_provider() {
  local bin="$PROVIDER_DIR/pulumi-resource-kubernetes"
  if have_all "$bin"; then log "kubernetes provider $K8S_PROVIDER_VERSION: cached"; return; fi
  mkdir -p "$PROVIDER_DIR"
  if internet_answers && command -v pulumi >/dev/null; then
    log "kubernetes provider $K8S_PROVIDER_VERSION: pulumi plugin install"
    local tmp_home; tmp_home=$(mktemp -d)
    PULUMI_HOME="$tmp_home" pulumi plugin install resource kubernetes "$K8S_PROVIDER_VERSION"
    cp "$tmp_home/plugins/resource-kubernetes-v$K8S_PROVIDER_VERSION/pulumi-resource-kubernetes" "$bin.partial"
    rm -rf "$tmp_home"
  else
    log "kubernetes provider $K8S_PROVIDER_VERSION: building from the Go module proxy (about 10-15 min on 2 cores)"
    go_build_env
    fresh_module kubernetes-provider
    go mod edit -replace="github.com/pulumi/pulumi-kubernetes/sdk/v4=github.com/pulumi/pulumi-kubernetes/sdk/v4@${K8S_SDK_PIN}"
    go get "github.com/pulumi/pulumi-kubernetes/provider/v4@${K8S_PROVIDER_PSEUDO}"
    local src; src=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)
    mkdir -p cmd/pulumi-resource-kubernetes
    # The module zip lacks the generated embed files (they are .gitignored upstream): make them here.
    cp "$src"/cmd/pulumi-resource-kubernetes/{main.go,schema.json,terraform-mapping.json} cmd/pulumi-resource-kubernetes/
    chmod -R u+w cmd
    (cd cmd/pulumi-resource-kubernetes && python3 - "$K8S_PROVIDER_VERSION" <<'PY'
import json, sys
schema = json.load(open("schema.json"))
schema["version"] = sys.argv[1]
json.dump(schema, open("schema-embed.json", "w"), separators=(",", ":"))
json.dump(json.load(open("terraform-mapping.json")), open("terraform-mapping-embed.json", "w"), separators=(",", ":"))
PY
    )
    go mod tidy
    log "kubernetes provider: compiling"
    go build -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${K8S_PROVIDER_VERSION}" \
      -o "$bin.partial" ./cmd/pulumi-resource-kubernetes
  fi
  mv "$bin.partial" "$bin"
  log "kubernetes provider: built $bin"
}

# A wrapper module for commands of k8s.io/kubernetes at KUBE_VERSION: its staging replaces mapped to the released
# k8s.io/* modules, each command added as a tool. Used here and by scripts/hardware-toolchain.sh (the kubelet).
kube_module() {
  local name=$1; shift
  fresh_module "$name"
  go mod edit -godebug=default=go1.24
  local info gomod staging="v0${KUBE_VERSION#v1}" cmd tools=()   # v1.34.4 -> v0.34.4
  info=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}")
  gomod=$(printf '%s' "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # shellcheck disable=SC2046
  go mod edit $(replaces_of "$gomod" "$staging")
  for cmd in "$@"; do tools+=("k8s.io/kubernetes/cmd/$cmd@${KUBE_VERSION}"); done
  go get -tool "${tools[@]}"
  go mod tidy
}

# The -ldflags of a Kubernetes binary: without the version stamps the API server reports v0.0.0 and the Pulumi
# provider refuses the cluster (and a kubelet would register as v0.0.0).
kube_ldflags() {
  local minor ld="-s -w" p now
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
    ld="$ld -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean -X $p.buildDate=$now"
  done
  echo "$ld"
}

# ---------------------------------------------------------------- kube-apiserver, controller-manager, scheduler
# Every version of KUBE_VERSIONS, each in its own kube-<version> folder (the helpers above read KUBE_VERSION).
ensure_kube() {
  local version
  for version in ${KUBE_VERSIONS//,/ }; do
    (KUBE_VERSION=$version; KUBE_DIR="$TOOLCHAIN/kube-$version"; ensure_kube_version)
  done
}

ensure_kube_version() {
  local bins=("$KUBE_DIR/bin/kube-apiserver" "$KUBE_DIR/bin/kube-controller-manager" "$KUBE_DIR/bin/kube-scheduler")
  if have_all "${bins[@]}"; then log "kubernetes $KUBE_VERSION: cached"; return; fi
  mkdir -p "$KUBE_DIR/bin"
  if internet_answers; then
    log "kubernetes $KUBE_VERSION: official release binaries"
    local b
    for b in kube-apiserver kube-controller-manager kube-scheduler; do
      curl -fsSL -o "$KUBE_DIR/bin/$b.partial" "https://dl.k8s.io/release/$KUBE_VERSION/bin/linux/amd64/$b"
      chmod +x "$KUBE_DIR/bin/$b.partial"; mv "$KUBE_DIR/bin/$b.partial" "$KUBE_DIR/bin/$b"
    done
  else
    log "kubernetes $KUBE_VERSION: building from the Go module proxy (about 15-25 min on 2 cores)"
    go_build_env
    kube_module "kube-bins-$KUBE_VERSION" kube-apiserver kube-controller-manager kube-scheduler
    local ld
    ld=$(kube_ldflags)
    local cmd
    for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
      log "kubernetes: compiling $cmd"
      go build -ldflags "$ld" -o "$KUBE_DIR/bin/$cmd.partial" "k8s.io/kubernetes/cmd/$cmd"
      mv "$KUBE_DIR/bin/$cmd.partial" "$KUBE_DIR/bin/$cmd"
    done
  fi
  log "kubernetes $KUBE_VERSION: $("$KUBE_DIR/bin/kube-apiserver" --version)"
}

# ---------------------------------------------------------------- etcd
ensure_etcd() {
  if have_all "$ETCD_DIR/bin/etcd"; then log "etcd $ETCD_VERSION: cached"; return; fi
  mkdir -p "$ETCD_DIR/bin"
  if command -v etcd >/dev/null && etcd --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}"; then
    log "etcd $ETCD_VERSION: found on PATH"; ln -sf "$(command -v etcd)" "$ETCD_DIR/bin/etcd"; return
  fi
  if internet_answers; then
    log "etcd $ETCD_VERSION: official release archive"
    curl -fsSL "https://github.com/etcd-io/etcd/releases/download/$ETCD_VERSION/etcd-$ETCD_VERSION-linux-amd64.tar.gz" \
      | tar -xz -C "$ETCD_DIR/bin" --strip-components=1 "etcd-$ETCD_VERSION-linux-amd64/etcd"
  else
    log "etcd $ETCD_VERSION: building from the Go module proxy (about 2-4 min on 2 cores)"
    go_build_env
    fresh_module etcd-bin
    go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
    go mod tidy
    go build -ldflags "-s -w" -o "$ETCD_DIR/bin/etcd.partial" go.etcd.io/etcd/server/v3
    mv "$ETCD_DIR/bin/etcd.partial" "$ETCD_DIR/bin/etcd"
  fi
  log "etcd: $("$ETCD_DIR/bin/etcd" --version | head -1)"
}

# ---------------------------------------------------------------- kwok
# Out-of-cluster kwok plays the kubelet of the simulated nodes (status, heartbeats, pod phases). No
# official binary download: releases live on GitHub, which the air-gapped path cannot assume; the Go
# module proxy serves the module, and the build is small.
ensure_kwok() {
  if have_all "$KWOK_DIR/bin/kwok" && [ -d "$KWOK_DIR/stages/pod" ]; then log "kwok $KWOK_VERSION: cached"; return; fi
  mkdir -p "$KWOK_DIR/bin"
  go_build_env
  if command -v kwok >/dev/null && kwok --version 2>/dev/null | grep -q "${KWOK_VERSION#v}"; then
    log "kwok $KWOK_VERSION: found on PATH"; ln -sf "$(command -v kwok)" "$KWOK_DIR/bin/kwok"
  else
    log "kwok $KWOK_VERSION: building from the Go module proxy (about 3-6 min on 2 cores)"
    fresh_module kwok-bin
    go get -tool "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
    go mod tidy
    go build -ldflags "-s -w" -o "$KWOK_DIR/bin/kwok.partial" sigs.k8s.io/kwok/cmd/kwok
    mv "$KWOK_DIR/bin/kwok.partial" "$KWOK_DIR/bin/kwok"
  fi
  # kwok's own default stages (node Ready + heartbeat, pod Ready, Job pod Succeeded, delete), exactly the
  # pinned version's, for `local up`'s kwok config.
  local src
  src=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$KWOK_DIR/stages.partial"; mkdir -p "$KWOK_DIR/stages.partial"
  cp -r "$src/kustomize/stage/node" "$src/kustomize/stage/pod" "$KWOK_DIR/stages.partial/"
  chmod -R u+w "$KWOK_DIR/stages.partial"
  rm -rf "$KWOK_DIR/stages"; mv "$KWOK_DIR/stages.partial" "$KWOK_DIR/stages"
  log "kwok: $("$KWOK_DIR/bin/kwok" --version 2>&1 | head -1)"
}

print_env() {
  # The provider is not put on PATH: it is registered into PULUMI_HOME with `pulumi plugin install --file`.
  printf 'export PATH=%q:%q:%q:%q:"$PATH"\n' "$PULUMI_DIR/bin" "$KUBE_DIR/bin" "$ETCD_DIR/bin" "$KWOK_DIR/bin"
  printf 'export EKS_HYBRID_GPU_PROVIDER_BIN=%q\n' "$PROVIDER_DIR/pulumi-resource-kubernetes"
  # Every built Kubernetes version, for a local cluster of another version than the default on PATH.
  local dirs="" version
  for version in ${KUBE_VERSIONS//,/ }; do dirs+="${dirs:+,}$version=$TOOLCHAIN/kube-$version/bin"; done
  printf 'export EKS_HYBRID_GPU_KUBE_DIRS=%q\n' "$dirs"
}

main() {
  local print=0 steps=()
  for a in "$@"; do
    case "$a" in
      --print-env) print=1 ;;
      pulumi|provider|kube|etcd|kwok) steps+=("$a") ;;
      -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
      *) die "unknown argument '$a'; use --print-env and/or any of: pulumi provider kube etcd" ;;
    esac
  done
  [ ${#steps[@]} -gt 0 ] || steps=(etcd kube pulumi provider kwok)
  # One build at a time per cache: a second run waits here instead of wiping the first one's work dirs.
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/toolchain.lock"
  if ! flock -n 9; then
    log "another toolchain run holds $CACHE_ROOT/toolchain.lock; waiting for it"
    flock 9
  fi
  local started=$SECONDS s
  for s in "${steps[@]}"; do (cd / && "ensure_$s"); done
  log "toolchain ready in $((SECONDS - started)) s under $TOOLCHAIN"
  if [ $print = 1 ]; then print_env; fi
}

# Sourced (scripts/hardware-toolchain.sh reuses the helpers and the cache layout), it defines and runs nothing.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then main "$@"; fi
