"""Pulumi entry point: everything lives in components.program; the environment is read here, and only here."""

from pathlib import Path

from components.program import run
from eks_hybrid_gpu.localpaths import local_kubeconfig

run(Path(__file__).resolve().parent, local_kubeconfig=local_kubeconfig())
