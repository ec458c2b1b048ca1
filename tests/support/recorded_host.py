"""A GPU host's tools as recorded: the host check's command line against fixtures, for runs outside pytest's process.

The zipapp test and the wheel test run `hostcheck` as a separate program (a bare `python3`, an installed venv),
so the host's `nvidia-smi`, `nvidia-ctk` and `containerd` are small executables that print what the real ones did.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hostcheck"


def fake_tool(folder: Path, name: str, stdout_file: Path | None, text: str = "") -> Path:
    """An executable that answers every invocation with one recorded output, as the host's tool would."""
    script = folder / name
    body = f"cat {stdout_file}" if stdout_file else f"printf '%s\\n' '{text}'"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def host_args(tmp_path: Path, smi_fixture: str) -> list[str]:
    """`hostcheck`'s arguments for a prepared DRA host whose `nvidia-smi` printed `smi_fixture`."""
    tools = tmp_path / "tools"
    tools.mkdir()
    return [
        "--owner",
        "dra",
        "--json",
        "--root",
        str(FIXTURES / "roots" / "prepared-dra"),
        "--nvidia-smi",
        str(fake_tool(tools, "nvidia-smi", FIXTURES / "nvidia-smi" / smi_fixture)),
        "--nvidia-ctk",
        str(fake_tool(tools, "nvidia-ctk", None, "NVIDIA Container Toolkit CLI version 1.18.0")),
        "--containerd",
        str(fake_tool(tools, "containerd", None, "containerd containerd.io 1.7.27 05044ec")),
    ]
