"""Each built Kubernetes version's bin directory, from the toolchain's `--print-env` line to the binary started.

The toolchain prints `export EKS_HYBRID_GPU_KUBE_DIRS=<printf %q word>`, and bash's `%q` escapes the commas between
versions; read naively, the first directory ends in a backslash, and a cluster asked for 1.34 silently ran the
default version's binaries from PATH. These tests hold both ends: the word bash prints reads back as what it
quoted, and a version's missing binary is an error, never another version's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from eks_hybrid_gpu import engine, localprocs
from eks_hybrid_gpu.localpaths import KUBE_DIRS_ENV, kube_dirs

pytestmark = pytest.mark.unit


def _bash_quoted(value: str) -> str:
    result = subprocess.run(["bash", "-c", 'printf %q "$1"', "_", value], capture_output=True, text=True, check=True)
    return result.stdout


def test_the_printed_word_reads_back_as_every_version_and_its_directory(tmp_path: Path) -> None:
    value = f"v1.34.4={tmp_path}/kube-v1.34.4/bin,v1.37.2={tmp_path}/a dir/kube-v1.37.2/bin"
    word = _bash_quoted(value)
    assert "\\," in word  # what bash really prints
    read = engine._shell_word(word)
    assert read == value
    assert kube_dirs({KUBE_DIRS_ENV: read}) == {
        "v1.34.4": tmp_path / "kube-v1.34.4" / "bin",
        "v1.37.2": tmp_path / "a dir" / "kube-v1.37.2" / "bin",
    }


def test_a_version_directory_without_its_binary_is_an_error_not_the_path_default(tmp_path: Path) -> None:
    (tmp_path / "kube-apiserver").write_text("")
    assert localprocs.binary("kube-apiserver", tmp_path) == str(tmp_path / "kube-apiserver")
    with pytest.raises(localprocs.LocalClusterError, match=r"kube-scheduler is not in .*asked Kubernetes version"):
        localprocs.binary("kube-scheduler", tmp_path)
