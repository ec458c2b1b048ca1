"""Host check: the NVIDIA device nodes a DRA workload needs, and what creates them at boot (dra-driver-nvidia-gpu
#1380, #1458). Each host is a fake tree under tmp_path, read through the check's root with its links resolved
inside that root (an absolute link there names the host's path, not this machine's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eks_hybrid_gpu.hostcheck import devnodes
from eks_hybrid_gpu.hostcheck.hostfs import HostTree
from tests.unit.test_hostcheck import checks_of, host

pytestmark = pytest.mark.unit

NODES = ("dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia-uvm-tools", "dev/nvidia0")
RULE = 'ACTION=="add|bind", KERNEL=="nvidia", RUN+="/usr/bin/nvidia-modprobe"\n'
SERVICE = "[Service]\nType=oneshot\nExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml\n"


def _files(root: Path, *paths: str, text: str = "") -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def _link(root: Path, path: str, target: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, root / path)


def _merged_usr(root: Path) -> None:
    """Debian/Ubuntu's merged /usr: /lib and /bin are relative links into usr/."""
    (root / "usr" / "lib").mkdir(parents=True, exist_ok=True)
    (root / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    _link(root, "lib", "usr/lib")
    _link(root, "bin", "usr/bin")


def _udev(root: Path) -> None:
    """The driver package's rule and nvidia-modprobe, packaged under /usr/lib (reached through /lib too)."""
    _files(root, "usr/lib/udev/rules.d/60-nvidia.rules", text=RULE)
    _files(root, "usr/bin/nvidia-modprobe", text="#!/bin/sh\n")


def _refresh(root: Path, *, enabled: bool = True) -> None:
    """The toolkit's units under /usr/lib, enabled as `systemctl enable` does: absolute links in *.wants/."""
    _files(root, "usr/lib/systemd/system/nvidia-cdi-refresh.service", text=SERVICE)
    _files(root, "usr/lib/systemd/system/nvidia-cdi-refresh.path", text="[Path]\n")
    if enabled:
        for unit in devnodes.REFRESH_UNITS:
            _link(root, f"etc/systemd/system/multi-user.target.wants/{unit}", f"/usr/lib/systemd/system/{unit}")


def _device_nodes(root: Path, owner: str = "dra", smi: str = "driver-570.csv") -> dict[str, str | None] | None:
    _, checks = checks_of(host(smi, root=root), "--owner", owner)
    return checks.get("device-nodes")


def test_a_fresh_host_without_nodes_or_creators_fails_and_names_the_fix(tmp_path: Path) -> None:
    _merged_usr(tmp_path)
    (tmp_path / "dev").mkdir()

    check = _device_nodes(tmp_path)

    assert check == {
        "name": "device-nodes",
        "status": "fail",
        "detail": "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia0 missing (GPU minors from the "
        "GPU count (no /proc/driver/nvidia/gpus under the root)); the DRA driver writes a claim's CDI spec from what "
        "/dev holds and skips missing nodes, so the first GPU workload fails (NVIDIA DRA driver issues #1380, #1458); "
        "on this host no udev rule runs nvidia-modprobe; nvidia-cdi-refresh.service is not installed (NVIDIA Container "
        "Toolkit 1.18 or newer ships it)",
        "fix": "create them now with `sudo nvidia-modprobe -u -c 0`, then restart the DRA kubelet plugin's pod so it "
        "writes its CDI specs again; so they exist after every boot: install NVIDIA Container Toolkit 1.18 or newer "
        "(it ships nvidia-cdi-refresh.service nvidia-cdi-refresh.path) and `sudo systemctl enable --now "
        "nvidia-cdi-refresh.service nvidia-cdi-refresh.path`, or install the driver package's udev rule "
        '(60-nvidia.rules: `ACTION=="add|bind", KERNEL=="nvidia", RUN+="/usr/bin/nvidia-modprobe"`) with '
        "nvidia-modprobe",
    }


def test_the_exit_code_is_a_failure_for_both_dra_owners(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    for owner in ("dra", "gpu-operator-dra"):
        code, checks = checks_of(host("driver-570.csv", root=tmp_path), "--owner", owner)
        assert (code, checks["device-nodes"]["status"]) == (1, "fail")


def test_the_device_plugin_owners_are_not_judged(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    assert _device_nodes(tmp_path, owner="device-plugin") is None


def test_nodes_and_the_udev_rule_pass_through_merged_usr(tmp_path: Path) -> None:
    _merged_usr(tmp_path)
    _udev(tmp_path)
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "pass"
    assert check["detail"] == (
        "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia0 present; the udev rule "
        "/usr/lib/udev/rules.d/60-nvidia.rules runs nvidia-modprobe; nvidia-cdi-refresh.service is not installed "
        "(NVIDIA Container Toolkit 1.18 or newer ships it)"
    )
    # /lib/udev/rules.d is the same folder through the link: one rule, not two
    assert len(devnodes.read_udev(HostTree(tmp_path))) == 1


def test_the_refresh_service_enabled_by_an_absolute_link_passes(tmp_path: Path) -> None:
    _refresh(tmp_path)
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "pass"
    assert check["detail"].endswith("no udev rule runs nvidia-modprobe; nvidia-cdi-refresh.service is enabled")


def test_nodes_present_but_nothing_recreating_them_warns(tmp_path: Path) -> None:
    _refresh(tmp_path, enabled=False)
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "warn"
    assert "after a reboot the first DRA workload fails" in str(check["detail"])
    assert (
        "nvidia-cdi-refresh.service is installed (/usr/lib/systemd/system/nvidia-cdi-refresh.service) but not enabled"
        in str(check["detail"])
    )
    assert check["fix"] is not None
    assert check["fix"].startswith("`sudo systemctl enable --now nvidia-cdi-refresh.service nvidia-cdi-refresh.path`")


def test_a_masked_refresh_service_is_named_and_unmasked(tmp_path: Path) -> None:
    _refresh(tmp_path)
    _link(tmp_path, "etc/systemd/system/nvidia-cdi-refresh.service", "/dev/null")
    (tmp_path / "dev").mkdir()

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "fail"
    assert "nvidia-cdi-refresh.service is masked" in str(check["detail"])
    assert (
        "`sudo systemctl unmask nvidia-cdi-refresh.service nvidia-cdi-refresh.path && sudo systemctl enable --now"
        in str(check["fix"])
    )


def test_a_udev_rule_replaced_in_etc_does_not_count(tmp_path: Path) -> None:
    _udev(tmp_path)
    _link(tmp_path, "etc/udev/rules.d/60-nvidia.rules", "/dev/null")
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "warn"
    assert (
        "the udev rule /usr/lib/udev/rules.d/60-nvidia.rules is replaced by /etc/udev/rules.d/60-nvidia.rules, which "
        "does not run nvidia-modprobe" in str(check["detail"])
    )


def test_a_rule_whose_nvidia_modprobe_is_missing_is_named(tmp_path: Path) -> None:
    _files(tmp_path, "usr/lib/udev/rules.d/60-nvidia.rules", text=RULE)
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "warn"
    assert (
        "the udev rule /usr/lib/udev/rules.d/60-nvidia.rules runs /usr/bin/nvidia-modprobe, which is not installed"
        in str(check["detail"])
    )


def test_a_commented_rule_does_not_count(tmp_path: Path) -> None:
    _files(tmp_path, "usr/lib/udev/rules.d/60-nvidia.rules", text="# " + RULE)
    _files(tmp_path, "usr/bin/nvidia-modprobe")
    assert devnodes.read_udev(HostTree(tmp_path)) == ()


def test_gpu_minors_come_from_the_driver_procfs(tmp_path: Path) -> None:
    """A GPU's minor need not be its nvidia-smi index: the driver's procfs says which /dev/nvidiaN is its own."""
    _files(tmp_path, "proc/driver/nvidia/gpus/0000:19:00.0/information", text="Model: H200\nDevice Minor: 3\n")
    _udev(tmp_path)
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "fail"
    assert str(check["detail"]).startswith("/dev/nvidia3 missing (GPU minors from /proc/driver/nvidia/gpus)")
    assert "`sudo nvidia-modprobe -u -c 3`" in str(check["fix"])


def test_every_gpu_needs_its_own_node(tmp_path: Path) -> None:
    _udev(tmp_path)
    _files(tmp_path, *NODES)

    check = _device_nodes(tmp_path, smi="several-gpus.csv")

    assert check is not None
    assert check["status"] == "fail"
    assert str(check["detail"]).startswith("/dev/nvidia1")


def test_dev_as_an_absolute_link_is_read_inside_the_root(tmp_path: Path) -> None:
    """/dev -> /hostdev names the root's /hostdev, not this machine's."""
    _udev(tmp_path)
    _files(tmp_path, *(node.replace("dev/", "hostdev/") for node in NODES))
    _link(tmp_path, "dev", "/hostdev")

    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "pass"


def test_a_root_that_is_itself_a_link_is_read(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _udev(tree)
    _files(tree, *NODES)
    _link(tmp_path, "host", str(tree))

    check = _device_nodes(tmp_path / "host")

    assert check is not None
    assert check["status"] == "pass"


def test_a_link_loop_reads_as_absent(tmp_path: Path) -> None:
    _link(tmp_path, "dev", "/dev")
    assert HostTree(tmp_path).local("/dev/nvidiactl") is None


def test_dotdot_stops_at_the_root(tmp_path: Path) -> None:
    assert HostTree(tmp_path).local("/../../etc/passwd") == tmp_path / "etc" / "passwd"


def test_a_tree_without_dev_cannot_be_judged(tmp_path: Path) -> None:
    check = _device_nodes(tmp_path)

    assert check is not None
    assert check["status"] == "warn"
    assert str(check["detail"]).startswith("cannot judge the NVIDIA device nodes: the checked root has no /dev folder")
