"""Pulumi entry point: everything lives in components.program."""

from pathlib import Path

from components.program import run

run(Path(__file__).resolve().parent)
