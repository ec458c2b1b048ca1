#!/usr/bin/env bash
# Prepares everything a hardware run carries to the GPU machine, under out/hw/ (ignored, never committed):
#   out/hw/images/        the pause, probe, device-plugin and DRA driver images (scripts/hardware/build_images.py)
#   out/hw/review/<stack>/head/  the program's rendered objects for each hardware stack (eks-hybrid-gpu review)
#   out/hw/stage-*/       the binaries, xz-compressed, split so that each fits one device call; stage-images holds
#                         images/ and review/ (unpack it with `tar -C out/hw`), the others unpack at /
# Then scripts/hardware/plugin_run.py (device-plugin cohort) or dra_run.py (dra cohort) runs there.
#
# Usage: scripts/hardware/render.sh [device-plugin|dra] [all|stages|review]   (default device-plugin all)
#   stages: the images and the binary stages only; review: the renders and the images stage only (the two can run
#   side by side: xz and the engine each keep a core busy)
#   device-plugin: stacks hardware-device-plugin, hardware-time-slicing and hardware-moved-to-dra; stages 1-3, dra
#   dra:           stack hardware (the dra cohort); stages 1-3 and dra
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-device-plugin}
part=${2:-all}
case "$run" in
  device-plugin) stacks=(hardware-device-plugin hardware-time-slicing hardware-moved-to-dra) ;;
  dra) stacks=(hardware) ;;
  *) echo "usage: $0 [device-plugin|dra]" >&2; exit 2 ;;
esac
# HW=<hardware-toolchain folder> picks a built Kubernetes version other than KUBE_VERSION (the runs so far: v1.34.4);
# the control plane carried is the kubelet's version, one version only (each stage must fit one device call).
HW=${HW:-$(scripts/hardware-toolchain.sh --print-dir | tail -1)}
TOOLCHAIN=$(dirname "$HW")
KV=$(basename "$HW" | sed 's/^hardware-\(v[^-]*\)-.*/\1/')
PLUGIN_DIR=$(ls -d "$HW"/device-plugin-v*/ | tail -1)
OUT=out/hw
mkdir -p "$OUT"
if [ "$part" != review ]; then
DRA_DIR=$(ls -d "$HW"/dra-v*/ | tail -1)
DRA_VERSION=$(basename "$DRA_DIR" | sed 's/^dra-//')
# The DRA image takes the driver's prestart script from the module's source, which the toolchain build downloaded.
DRA_SOURCE=$(go env GOMODCACHE)/sigs.k8s.io/dra-driver-nvidia-gpu@$DRA_VERSION
python3 scripts/hardware/build_images.py --pause "$HW/pause" --out "$OUT/images" \
  --device-plugin "$PLUGIN_DIR" --device-plugin-version "$(basename "$PLUGIN_DIR" | sed 's/^device-plugin-//')" \
  --dra "$DRA_DIR" --dra-version "$DRA_VERSION" --cdi-hook "$HW/nvidia-cdi-hook" --dra-source "$DRA_SOURCE"
rel() { local p; for p in "$@"; do echo "${p#/}"; done; }
stage() {  # stage NAME FILES...: one xz'd tar, unpacked at / there (the same cache paths as here)
  local name=$1; shift
  # Kept when no input is newer (xz -9 of 200 MB takes minutes on two cores).
  if [ -f "$OUT/stage-$name/bin.tar.xz" ] && [ -z "$(find "$@" -newer "$OUT/stage-$name/bin.tar.xz" | head -1)" ]; then
    return
  fi
  rm -rf "$OUT/stage-$name"
  mkdir -p "$OUT/stage-$name"
  # shellcheck disable=SC2046
  tar -C / -cf - $(rel "$@") | xz -9 -T2 > "$OUT/stage-$name/bin.tar.xz.partial"
  mv "$OUT/stage-$name/bin.tar.xz.partial" "$OUT/stage-$name/bin.tar.xz"  # an interrupted stage is redone
}
# One device call carries at most 64 MiB, the working tree included: stage 1, stage 2, then stage 3 with the images
# (the device plugin's binaries travel once, in its image; plugin_run.py takes the host-process copy from there).
stage 1 "$TOOLCHAIN/kube-$KV/bin/kube-apiserver" "$TOOLCHAIN/kube-$KV/bin/kube-controller-manager"
stage 2 "$TOOLCHAIN/kube-$KV/bin/kube-scheduler" "$TOOLCHAIN"/etcd-*/bin/etcd "$HW/kubelet"
stage 3 "$HW/containerd" "$HW/ctr" "$HW/containerd-shim-runc-v2" "$HW/runc" "$HW/nvidia-ctk" "$HW/nvidia-cdi-hook" \
  "$HW/nvidia-container-runtime" "$HW/cni" "$HW/pause"
stage dra "$HW"/dra-v*/gpu-kubelet-plugin
fi
[ "$part" != stages ] || exit 0
image=$(cat "$OUT/images/probe-image.txt")
trap 'for s in "${stacks[@]}"; do rm -f "stacks/Pulumi.$s.yaml"; done' EXIT
rm -rf "$OUT/review"
for s in "${stacks[@]}"; do
  # The stacks declare the version the kubelet runs, so the render is that version's (its gates, its floors).
  sed -e "s#PROBE_IMAGE#$image#" -e "s#kubernetesVersion: \"[0-9.]*\"#kubernetesVersion: \"${KV#v}\"#" \
    "scripts/hardware/Pulumi.$s.yaml" > "stacks/Pulumi.$s.yaml"
  "${PYTHON:-.venv/bin/python}" -m eks_hybrid_gpu review --stack "$s" --base HEAD --out "$OUT/review/$s"
done
rm -rf "$OUT/stage-images"
mkdir -p "$OUT/stage-images"
tar -C "$OUT" -cf - images review | xz -9 -T2 > "$OUT/stage-images/images.tar.xz.partial"
mv "$OUT/stage-images/images.tar.xz.partial" "$OUT/stage-images/images.tar.xz"
ls -la "$OUT"/stage-* "$OUT/images"
