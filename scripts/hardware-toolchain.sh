#!/usr/bin/env bash
# Builds what a real GPU node runs, for the hardware run on a lent GPU machine (scripts/hardware/): the kubelet,
# containerd with ctr and the runc shim, runc, nvidia-ctk and nvidia-cdi-hook, NVIDIA's DRA kubelet plugin
# (`gpu-kubelet-plugin`) and NVIDIA's device plugin with its config-manager, all from the Go module proxy, cached under the toolchain cache like scripts/toolchain.sh's
# binaries (keyed by version; a second run takes seconds). Nothing built is committed.
#
# Versions and why (docs/toolchain.md, "The hardware toolchain"):
# - kubelet: the control plane's KUBE_VERSION (toolchain-versions.env), from the same k8s.io/kubernetes module.
# - containerd v2.4.2 (CDI always on), runc v1.3.3 (cgo for nsenter; static, with seccomp from libseccomp-dev).
# - nvidia-container-toolkit v1.20.2 (cgo): nvidia-ctk, nvidia-cdi-hook and nvidia-container-runtime, the version
#   stamped in, else `--version` says "unknown".
# - gpu-kubelet-plugin v0.5.0, the version of the chart the program pins. Its go.mod asks github.com/NVIDIA/go-nvfm
#   v0.1.0 and k8s.io/kubernetes v1.37.0-rc.0, neither served: go-nvfm is replaced by the served pseudo-version the
#   driver's main branch recorded before the tag, and every -rc.0 Kubernetes requirement moves to the released
#   v0.37.1 / v1.37.1 (the same API with the release fixes).
# - nvidia-device-plugin and config-manager v0.19.0 (github.com/NVIDIA/k8s-device-plugin): the chart's v0.20.0 is not
#   served; v0.19.0 is the newest that is (what it lacks against the 0.20.0 chart: docs/toolchain.md).
#
# - CNI plugins v1.6.2 (bridge, host-local, loopback) and a static pause (scripts/hardware/pause.c): the GPU
#   machine reaches no registry, so the pod sandbox and its network come from here too.
#
# Debian packages it needs (libseccomp-dev for a static runc) are installed with apt-get when missing.
#
# Usage: scripts/hardware-toolchain.sh [kubelet|containerd|runc|ctk|dra|deviceplugin|cni ...] [--print-dir]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/toolchain.sh
source "$HERE/toolchain.sh"

CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.3.3
CTK_VERSION=v1.20.2
CNI_VERSION=v1.6.2
DRA_PLUGIN_VERSION=v0.5.0
DRA_K8S_STAGING=v0.37.1
DRA_K8S_VERSION=v1.37.1
DRA_NVFM_REPLACEMENT=v0.0.0-20260629235037-b587f11880ea
DEVICE_PLUGIN_VERSION=v0.19.0
HW_DIR="$TOOLCHAIN/hardware-$KUBE_VERSION-containerd-$CONTAINERD_VERSION"
# Each owner's binaries in a folder named by its version, so a version bump rebuilds only that owner.
DRA_DIR="$HW_DIR/dra-$DRA_PLUGIN_VERSION"
DEVICE_PLUGIN_DIR="$HW_DIR/device-plugin-$DEVICE_PLUGIN_VERSION"

# Installs Debian packages that are missing (the build machine reaches Debian's mirrors; root or sudo).
ensure_apt() {
  local missing=() p sudo=()
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  log "installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq >&2 || log "apt-get update failed; trying the cached lists"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >&2 \
    || die "could not install ${missing[*]}; install them by hand (apt-get install ${missing[*]})"
}

# The module's own folder, writable, to build in (go install refuses modules with replace directives).
module_copy() {
  local module=$1 version=$2 name=$3 dir
  dir=$(go mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "${WORK:?}/$name"; mkdir -p "$WORK"; cp -r "$dir" "$WORK/$name"; chmod -R u+w "$WORK/$name"
  cd "$WORK/$name"
  rm -rf vendor  # a module zip keeps vendor/modules.txt but not the vendored code: resolve from the proxy
}

ensure_kubelet() {
  if have_all "$HW_DIR/kubelet"; then log "kubelet $KUBE_VERSION: cached"; return; fi
  log "kubelet $KUBE_VERSION: building from the Go module proxy"
  go_build_env
  kube_module kubelet-bin kubelet
  local ld
  ld=$(kube_ldflags)
  mkdir -p "$HW_DIR"
  go build -ldflags "$ld" -o "$HW_DIR/kubelet.partial" k8s.io/kubernetes/cmd/kubelet
  mv "$HW_DIR/kubelet.partial" "$HW_DIR/kubelet"
}

ensure_containerd() {
  if have_all "$HW_DIR/containerd" "$HW_DIR/ctr" "$HW_DIR/containerd-shim-runc-v2"; then
    log "containerd $CONTAINERD_VERSION: cached"; return
  fi
  log "containerd $CONTAINERD_VERSION: building from the Go module proxy"
  go_build_env
  module_copy github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" containerd
  local ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" cmd
  mkdir -p "$HW_DIR"
  for cmd in containerd ctr containerd-shim-runc-v2; do
    go build -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ld" -o "$HW_DIR/$cmd.partial" "./cmd/$cmd"
    mv "$HW_DIR/$cmd.partial" "$HW_DIR/$cmd"
  done
}

ensure_runc() {
  if have_all "$HW_DIR/runc"; then log "runc $RUNC_VERSION: cached"; return; fi
  log "runc $RUNC_VERSION: building from the Go module proxy (cgo)"
  go_build_env
  export CGO_ENABLED=1
  module_copy github.com/opencontainers/runc "$RUNC_VERSION" runc
  # Its replace of opencontainers/selinux points into a nested module, which a module zip leaves out: take the
  # released module it forks instead.
  local dropped
  for dropped in $(go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if not r["New"].get("Version"):
        print(r["Old"]["Path"] + ("@" + r["Old"]["Version"] if r["Old"].get("Version") else ""))
'); do go mod edit -dropreplace="$dropped"; done
  go mod tidy
  mkdir -p "$HW_DIR"
  # Static, with seccomp: the kubelet asks RuntimeDefault profiles, which a runc without seccomp refuses.
  ensure_apt libseccomp-dev pkg-config
  [ -f /usr/lib/x86_64-linux-gnu/libseccomp.a ] || die "runc needs libseccomp's static library: apt-get install libseccomp-dev"
  go build -tags "seccomp netgo osusergo" \
    -ldflags "-s -w -extldflags -static -X main.version=${RUNC_VERSION#v}" -o "$HW_DIR/runc.partial" .
  mv "$HW_DIR/runc.partial" "$HW_DIR/runc"
}

ensure_ctk() {
  if have_all "$HW_DIR/nvidia-ctk" "$HW_DIR/nvidia-cdi-hook" "$HW_DIR/nvidia-container-runtime"; then
    log "nvidia-ctk $CTK_VERSION: cached"; return
  fi
  log "nvidia-container-toolkit $CTK_VERSION: building from the Go module proxy (cgo)"
  go_build_env
  export CGO_ENABLED=1
  module_copy github.com/NVIDIA/nvidia-container-toolkit "$CTK_VERSION" ctk
  local ld="-s -w -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=${CTK_VERSION#v}" cmd
  mkdir -p "$HW_DIR"
  # nvidia-container-runtime: the `nvidia` runtime handler the device plugin's RuntimeClass names (in CDI mode it
  # needs no libnvidia-container, which is C and not in the module proxy).
  for cmd in nvidia-ctk nvidia-cdi-hook nvidia-container-runtime; do
    go build -ldflags "$ld" -o "$HW_DIR/$cmd.partial" "./cmd/$cmd"
    mv "$HW_DIR/$cmd.partial" "$HW_DIR/$cmd"
  done
}

ensure_dra() {
  if have_all "$DRA_DIR/gpu-kubelet-plugin"; then log "gpu-kubelet-plugin $DRA_PLUGIN_VERSION: cached"; return; fi
  log "gpu-kubelet-plugin $DRA_PLUGIN_VERSION: building from the Go module proxy (cgo, NVML)"
  go_build_env
  export CGO_ENABLED=1
  module_copy sigs.k8s.io/dra-driver-nvidia-gpu "$DRA_PLUGIN_VERSION" dra-plugin
  # go-nvfm v0.1.0 is not served: the pseudo-version the driver's main branch recorded before the tag is.
  go mod edit -replace "github.com/NVIDIA/go-nvfm=github.com/NVIDIA/go-nvfm@$DRA_NVFM_REPLACEMENT"
  # The -rc.0 Kubernetes requirements are not all served: move them to the released patch versions.
  local edits=() path
  while read -r path; do
    if [ "$path" = k8s.io/kubernetes ]; then edits+=("-require=$path@$DRA_K8S_VERSION")
    else edits+=("-require=$path@$DRA_K8S_STAGING"); fi
  done < <(go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Require") or []:
    if r["Path"].startswith("k8s.io/") and "-rc." in r["Version"]:
        print(r["Path"])
')
  [ ${#edits[@]} -eq 0 ] || go mod edit "${edits[@]}"
  go mod tidy
  mkdir -p "$DRA_DIR"
  # The version stamps of the driver's Makefile, else `--version` says "unknown".
  local ld="-s -w -X sigs.k8s.io/dra-driver-nvidia-gpu/internal/info.version=$DRA_PLUGIN_VERSION"
  go build -ldflags "$ld" -o "$DRA_DIR/gpu-kubelet-plugin.partial" ./cmd/gpu-kubelet-plugin
  mv "$DRA_DIR/gpu-kubelet-plugin.partial" "$DRA_DIR/gpu-kubelet-plugin"
}

# NVIDIA's device plugin and the config-manager the chart runs beside it (one module, no replace directives).
ensure_deviceplugin() {
  local bins=("$DEVICE_PLUGIN_DIR/nvidia-device-plugin" "$DEVICE_PLUGIN_DIR/config-manager")
  if have_all "${bins[@]}"; then log "nvidia-device-plugin $DEVICE_PLUGIN_VERSION: cached"; return; fi
  log "nvidia-device-plugin $DEVICE_PLUGIN_VERSION and config-manager: building from the Go module proxy (cgo, NVML)"
  go_build_env
  export CGO_ENABLED=1
  module_copy github.com/NVIDIA/k8s-device-plugin "$DEVICE_PLUGIN_VERSION" device-plugin
  mkdir -p "$DEVICE_PLUGIN_DIR"
  # The module's Makefile flags: NVML is opened at run time (dlopen), so unresolved symbols are left to then.
  local ld="-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'" cmd
  ld="$ld -X github.com/NVIDIA/k8s-device-plugin/internal/info.version=$DEVICE_PLUGIN_VERSION"
  for cmd in nvidia-device-plugin config-manager; do
    go build -ldflags "$ld" -o "$DEVICE_PLUGIN_DIR/$cmd.partial" "./cmd/$cmd"
    mv "$DEVICE_PLUGIN_DIR/$cmd.partial" "$DEVICE_PLUGIN_DIR/$cmd"
  done
}

ensure_cni() {
  if have_all "$HW_DIR/cni/bridge" "$HW_DIR/cni/host-local" "$HW_DIR/cni/loopback" "$HW_DIR/pause"; then
    log "CNI plugins $CNI_VERSION and pause: cached"; return
  fi
  log "CNI plugins $CNI_VERSION (bridge, host-local, loopback) and a static pause: building"
  go_build_env
  module_copy github.com/containernetworking/plugins "$CNI_VERSION" cni-plugins
  mkdir -p "$HW_DIR/cni"
  local plugin
  for plugin in main/bridge ipam/host-local main/loopback; do
    go build -ldflags "-s -w" -o "$HW_DIR/cni/${plugin#*/}" "./plugins/$plugin"
  done
  gcc -static -Os -s -o "$HW_DIR/pause" "$HERE/hardware/pause.c"
}

hardware_main() {
  local steps=() print=0 a
  for a in "$@"; do
    case "$a" in
      kubelet|containerd|runc|ctk|dra|deviceplugin|cni) steps+=("$a") ;;
      --print-dir) print=1 ;;
      -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
      *) die "unknown argument '$a'; use any of: kubelet containerd runc ctk dra deviceplugin cni, and --print-dir" ;;
    esac
  done
  [ ${#steps[@]} -gt 0 ] || steps=(kubelet containerd runc ctk dra deviceplugin cni)
  # Its own lock: a long hardware build must not hold up the engine toolchain's users (tests, review, local).
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/hardware-toolchain.lock"
  flock 9
  local started=$SECONDS s
  for s in "${steps[@]}"; do (cd / && "ensure_$s"); done
  log "hardware toolchain ready in $((SECONDS - started)) s under $HW_DIR"
  if [ $print = 1 ]; then echo "$HW_DIR"; fi
}

hardware_main "$@"
