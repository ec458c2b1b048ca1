"""Host check, read as the host's consumers read it: the handler's binary, CDI per containerd version, stale CDI
specs, and the driver files where the DRA driver looks for them. Each fault is a recorded host tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu.hostcheck import cdi_versions, collect
from tests.unit.test_hostcheck import CONTAINERD_2, CONTAINERD_17, ROOTS, checks_of, h200_replay, host, ok

pytestmark = pytest.mark.unit

CONTAINERD_242 = "containerd github.com/containerd/containerd/v2 v2.4.2 1c4457e\n"
CONTAINERD_234 = "containerd github.com/containerd/containerd/v2 v2.3.4 2d2bc3e\n"
CONTAINERD_205 = "containerd github.com/containerd/containerd/v2 v2.0.5 fb4c30d\n"


# ----------------------------------------------------------------------------- the nvidia handler's BinaryName


def test_a_handler_whose_binary_does_not_exist_fails_naming_it() -> None:
    code, checks = checks_of(
        host("driver-570.csv", containerd=CONTAINERD_2, root=ROOTS / "handler-binary-missing"),
        "--owner",
        "device-plugin",
    )

    assert code == 1
    assert checks["runtime-handler"]["status"] == "pass"
    assert checks["runtime-binary"] == {
        "name": "runtime-binary",
        "status": "fail",
        "detail": "the nvidia runtime handler's BinaryName /usr/local/nvidia/toolkit/nvidia-container-runtime does "
        "not exist (looked at /usr/local/nvidia/toolkit/nvidia-container-runtime); containerd cannot start a pod with "
        "runtimeClassName nvidia on this host",
        "fix": "install nvidia-container-toolkit (it provides nvidia-container-runtime), or point BinaryName at the "
        "installed binary with `sudo nvidia-ctk runtime configure --runtime=containerd`, then restart containerd",
    }


def test_a_handler_whose_binary_exists_passes() -> None:
    code, checks = checks_of(host("driver-570.csv", root=ROOTS / "prepared-device-plugin"), "--owner", "device-plugin")

    assert code == 0
    assert checks["runtime-binary"]["detail"] == (
        "the nvidia runtime handler's BinaryName /usr/bin/nvidia-container-runtime exists"
    )


def _tree(tmp_path: Path, binary: str, files: dict[str, int]) -> Path:
    """A containerd 1.7 host whose nvidia handler names `binary`; `files` are created with their modes."""
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        f'BinaryName = "{binary}"\n'
    )
    for path, mode in files.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\n")
        target.chmod(mode)
    return tmp_path


def test_a_bare_binary_name_is_found_on_containerds_path(tmp_path: Path) -> None:
    root = _tree(tmp_path, "nvidia-container-runtime", {"/usr/local/bin/nvidia-container-runtime": 0o755})
    _, checks = checks_of(host("driver-570.csv", root=root), "--owner", "device-plugin")

    assert checks["runtime-binary"]["status"] == "pass"
    assert checks["runtime-binary"]["detail"].endswith("/usr/local/bin/nvidia-container-runtime exists")


def test_a_bare_binary_name_off_containerds_path_fails_listing_the_path(tmp_path: Path) -> None:
    root = _tree(tmp_path, "nvidia-container-runtime", {"/opt/nvidia/nvidia-container-runtime": 0o755})
    code, checks = checks_of(host("driver-570.csv", root=root), "--owner", "device-plugin")

    assert code == 1
    assert (
        "(looked at containerd's PATH (/usr/local/sbin/nvidia-container-runtime, " in checks["runtime-binary"]["detail"]
    )


def test_a_binary_that_is_not_executable_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, "/usr/bin/nvidia-container-runtime", {"/usr/bin/nvidia-container-runtime": 0o644})
    code, checks = checks_of(host("driver-570.csv", root=root), "--owner", "device-plugin")

    assert code == 1
    assert checks["runtime-binary"]["detail"] == (
        "the nvidia runtime handler's BinaryName /usr/bin/nvidia-container-runtime is not executable"
    )


# ----------------------------------------------------------------------------- CDI as each containerd version reads it


def test_containerd_242_ignores_enable_cdi_false_as_on_the_lent_h200() -> None:
    code, checks = checks_of(
        host("driver-570.csv", containerd=CONTAINERD_242, root=ROOTS / "containerd24-enable-cdi-false"),
        "--owner",
        "dra",
    )

    assert code == 0
    assert checks["cdi-runtime"] == {
        "name": "cdi-runtime",
        "status": "pass",
        "detail": "CDI is enabled in containerd (containerd 2.4.2 always enables CDI (enable_cdi was removed in 2.4) "
        'and ignores enable_cdi in [plugins."io.containerd.cri.v1.runtime"])',
        "fix": None,
    }


@pytest.mark.parametrize("version", [CONTAINERD_234, CONTAINERD_205])
def test_containerd_20_to_23_honour_enable_cdi_false(version: str) -> None:
    code, checks = checks_of(
        host("driver-570.csv", containerd=version, root=ROOTS / "containerd24-enable-cdi-false"), "--owner", "dra"
    )

    assert code == 1
    assert checks["cdi-runtime"]["status"] == "fail"
    assert checks["cdi-runtime"]["detail"].startswith(
        'CDI is disabled (enable_cdi in [plugins."io.containerd.cri.v1.runtime"]); standalone DRA driver'
    )


def test_containerd_17_does_not_read_the_2x_table() -> None:
    code, checks = checks_of(
        host("driver-570.csv", containerd=CONTAINERD_17, root=ROOTS / "containerd17-v3-table"), "--owner", "dra"
    )

    assert code == 1
    assert checks["cdi-runtime"]["detail"].startswith(
        "CDI is disabled (containerd 1.7.27 leaves CDI off unless enable_cdi = true; it does not read enable_cdi in "
        '[plugins."io.containerd.cri.v1.runtime"]); standalone DRA driver 0.5.0 needs a CDI-enabled runtime'
    )


V2_FALSE: dict[str, Any] = {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": False}}}
V3_OLD_TABLE_FALSE: dict[str, Any] = {"version": 3, "plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": False}}}


@pytest.mark.parametrize(
    ("merged", "version", "enabled"),
    [
        (V2_FALSE, "1.7.27", False),
        (V2_FALSE, "2.1.4", False),  # a version 2 config is migrated into cri.v1.runtime
        (V3_OLD_TABLE_FALSE, "2.1.4", True),  # 2.0-2.2 migrate only configs older than version 3
        (V3_OLD_TABLE_FALSE, "2.3.4", False),  # 2.3 migrates configs older than version 4
        (V2_FALSE, "2.4.2", True),  # removed: always on
        ({"version": 2}, "1.7.27", False),
        ({"version": 3}, "2.0.5", True),
        ({"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"enable_cdi": True}}}, "1.7.27", False),
    ],
)
def test_cdi_follows_what_each_containerd_version_reads(merged: dict[str, Any], version: str, enabled: bool) -> None:
    found, _, _ = cdi_versions.decide(merged, version, merged.get("version"))

    assert found is enabled


def test_spec_dirs_come_from_the_table_that_containerd_reads() -> None:
    merged = {"plugins": {"io.containerd.cri.v1.runtime": {"cdi_spec_dirs": ["/opt/cdi"]}}}

    assert cdi_versions.decide(merged, "2.4.2", 3)[2] == ("/opt/cdi",)
    assert cdi_versions.decide(merged, "1.7.27", 2)[2] == ("/etc/cdi", "/var/run/cdi")


# ----------------------------------------------------------------------------- CDI specs naming GPUs the host lacks


def _h200_host(root: Path) -> collect.Sources:
    """The lent H200's nvidia-smi answers, with containerd 2.4.2 and toolkit 1.20.2 on the tree `root`."""
    replay = h200_replay()
    replay.outputs["containerd --version"] = ok(CONTAINERD_242)
    replay.outputs["nvidia-ctk --version"] = ok("NVIDIA Container Toolkit CLI version 1.20.2\ncommit: 1b3fa3e\n")
    return collect.Sources(runner=replay, root=root, hostname=lambda: "vm")


def test_a_cdi_spec_from_another_gpu_warns_and_names_it() -> None:
    code, checks = checks_of(_h200_host(ROOTS / "stale-cdi"), "--owner", "dra")

    assert code == 0
    assert checks["cdi-spec-gpus"] == {
        "name": "cdi-spec-gpus",
        "status": "warn",
        "detail": "CDI specs in /etc/cdi name GPUs this host does not have: "
        "nvidia.com/gpu=GPU-a9c9a6dd-eccc-a98e-3017-8522894ca785 (this host's GPUs: "
        "GPU-16b40e3f-db2e-8b21-d4d3-4c77f01d2ab2); a container asking for them through CDI fails or gets another "
        "device",
        "fix": "regenerate the spec for this host's GPUs (`sudo nvidia-ctk cdi generate "
        "--output=/etc/cdi/nvidia.yaml`) and remove specs left by other hardware",
    }


def test_a_cdi_spec_naming_an_index_beyond_the_host_warns(tmp_path: Path) -> None:
    spec = tmp_path / "etc" / "cdi" / "nvidia.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text('kind: nvidia.com/gpu\ndevices:\n- name: "0"\n- name: "1"\n- name: "1:0"\n- name: all\n')
    _, checks = checks_of(_h200_host(tmp_path), "--owner", "dra")

    assert checks["cdi-spec-gpus"]["status"] == "warn"
    assert (
        "name GPUs this host does not have: nvidia.com/gpu=1, nvidia.com/gpu=1:0 (" in checks["cdi-spec-gpus"]["detail"]
    )


def test_a_cdi_spec_of_this_hosts_gpus_passes() -> None:
    code, checks = checks_of(host("driver-570.csv"), "--owner", "dra")

    assert code == 0
    assert checks["cdi-spec-gpus"]["status"] == "pass"


# ----------------------------------------------------------------------------- the driver root of the DRA owners


def test_libraries_under_usr_local_nvidia_fail_the_dra_owners_with_the_link_fix() -> None:
    code, checks = checks_of(_h200_host(ROOTS / "h200-lent"), "--owner", "dra")

    assert code == 1
    assert checks["driver-root"]["status"] == "fail"
    assert "this host keeps it at /usr/local/nvidia/lib64/libnvidia-ml.so.1" in checks["driver-root"]["detail"]
    assert (
        "`sudo ln -s /usr/local/nvidia/lib64/*.so* /usr/lib/x86_64-linux-gnu/; sudo ldconfig`"
        in (checks["driver-root"]["fix"])
    )


def test_the_device_plugin_owner_does_not_judge_the_dra_driver_root() -> None:
    _, checks = checks_of(_h200_host(ROOTS / "h200-lent"), "--owner", "device-plugin")

    assert "driver-root" not in checks


def test_a_driver_root_whose_lib64_holds_them_passes() -> None:
    # The driver searches <root>/lib64 and <root>/bin: nvidiaDriverRoot /usr/local/nvidia finds the lent H200's files.
    _, checks = checks_of(
        _h200_host(ROOTS / "h200-lent"), "--owner", "dra", "--nvidia-driver-root", "/usr/local/nvidia"
    )

    assert checks["driver-root"] == {
        "name": "driver-root",
        "status": "pass",
        "detail": "the DRA driver finds /usr/local/nvidia/lib64/libnvidia-ml.so.1 and /usr/local/nvidia/bin/nvidia-smi "
        "under nvidiaDriverRoot /usr/local/nvidia",
        "fix": None,
    }


def test_no_driver_libraries_anywhere_says_to_install_them(tmp_path: Path) -> None:
    _, checks = checks_of(_h200_host(tmp_path), "--owner", "gpu-operator-dra")

    assert checks["driver-root"]["fix"].startswith(
        "install the NVIDIA driver's user-space libraries and nvidia-smi into the standard folders"
    )


def test_a_relative_driver_root_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        checks_of(_h200_host(ROOTS / "h200-lent"), "--owner", "dra", "--nvidia-driver-root", "usr/../nvidia")

    assert exited.value.code == 2
    assert "'usr/../nvidia' is not an absolute folder" in capsys.readouterr().err
