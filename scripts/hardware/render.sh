#!/usr/bin/env bash
# Prepares everything the hardware run carries to the GPU machine, under .hw/ (ignored, never committed):
#   .hw/images/       the pause and probe images (scripts/hardware/build_images.py)
#   .hw/review/head/  the program's rendered objects for the hardware stack (eks-hybrid-gpu review)
#   .hw/stage-1/ .. .hw/stage-3/  the binaries, xz-compressed, split to fit one device call each
# Then scripts/hardware/dra_run.py runs there. Usage: scripts/hardware/render.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
HW=$(scripts/hardware-toolchain.sh --print-dir | tail -1)
TOOLCHAIN=$(dirname "$HW")
mkdir -p .hw
python3 scripts/hardware/build_images.py --pause "$HW/pause" --out .hw/images
image=$(cat .hw/images/probe-image.txt)
trap 'rm -f stacks/Pulumi.hardware.yaml' EXIT
sed "s#PROBE_IMAGE#$image#" scripts/hardware/Pulumi.hardware.yaml > stacks/Pulumi.hardware.yaml
rm -rf .hw/review
.venv/bin/python -m eks_hybrid_gpu review --stack hardware --base HEAD --out .hw/review
rm -rf .hw/stage-*
rel() { local p; for p in "$@"; do echo "${p#/}"; done; }
stage() {  # stage NAME FILES...: one xz'd tar, unpacked at / there (the same cache paths as here)
  local name=$1; shift
  mkdir -p ".hw/stage-$name"
  # shellcheck disable=SC2046
  tar -C / -cf - $(rel "$@") | xz -9 -T2 > ".hw/stage-$name/bin.tar.xz"
}
# Three stages: one device call carries at most 64 MiB, the working tree included.
stage 1 "$TOOLCHAIN"/kube-v*/bin/kube-apiserver "$TOOLCHAIN"/kube-v*/bin/kube-controller-manager
stage 2 "$TOOLCHAIN"/kube-v*/bin/kube-scheduler "$TOOLCHAIN"/etcd-*/bin/etcd "$HW/gpu-kubelet-plugin" "$HW/kubelet"
stage 3 "$HW/containerd" "$HW/ctr" "$HW/containerd-shim-runc-v2" "$HW/runc" "$HW/nvidia-ctk" "$HW/nvidia-cdi-hook" \
  "$HW/cni" "$HW/pause"
ls -la .hw/stage-* .hw/images
