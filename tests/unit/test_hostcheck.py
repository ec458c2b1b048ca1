"""Host check: captured H200 output replayed, plus synthetic hosts, each with its exact message and exit code."""

from __future__ import annotations

import io
import json
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from eks_hybrid_gpu.hostcheck import cli, collect, parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200"
SMI = FIXTURES / "hostcheck" / "nvidia-smi"
ROOTS = FIXTURES / "hostcheck" / "roots"
QUERY = " ".join(parse.query_argv("nvidia-smi", parse.QUERY_FIELDS))
SEED_QUERY = " ".join(parse.query_argv("nvidia-smi", parse.SEED_FIELDS))
CTK_1_18 = "NVIDIA Container Toolkit CLI version 1.18.0\ncommit: 5bd2e7e\n"
CTK_1_17 = "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80\n"
CONTAINERD_17 = "containerd containerd.io 1.7.27 05044ec\n"
CONTAINERD_2 = "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7\n"
DRIVER_HELP = (
    "Being on premises does not imply that a driver exists: install the NVIDIA data-center driver approved "
    "for this GPU, OS and kernel (it provides nvidia-smi), load it (check `lsmod | grep nvidia` and `dmesg`), "
    "then re-run this check."
)


class Replay:
    """A Runner that answers from recorded output; a command it does not know is not installed."""

    def __init__(self, outputs: dict[str, collect.CommandResult]) -> None:
        self.outputs = outputs
        self.calls: list[str] = []

    def __call__(self, argv: Sequence[str]) -> collect.CommandResult | None:
        key = " ".join(argv)
        self.calls.append(key)
        return self.outputs.get(key)


def ok(stdout: str) -> collect.CommandResult:
    return collect.CommandResult(0, stdout, "")


def h200_replay() -> Replay:
    """The commands exactly as the H200 answered them; 127 (not installed) becomes 'not found'."""
    recorded = json.loads((H200 / "commands.json").read_text())
    recorded.pop("_comment")
    return Replay(
        {
            command: collect.CommandResult(entry["returncode"], entry["stdout"], entry["stderr"])
            for command, entry in recorded.items()
            if entry["returncode"] != 127
        }
    )


def host(
    smi: str | collect.CommandResult | None,
    ctk: str | None = CTK_1_18,
    containerd: str | None = CONTAINERD_17,
    root: Path | None = None,
) -> collect.Sources:
    """Sources for a synthetic host: nvidia-smi output by fixture name or result, tool outputs, file root."""
    outputs: dict[str, collect.CommandResult] = {}
    if isinstance(smi, str):
        outputs[QUERY] = ok((SMI / smi).read_text())
    elif isinstance(smi, collect.CommandResult):
        outputs[QUERY] = smi
    if ctk is not None:
        outputs["nvidia-ctk --version"] = ok(ctk)
    if containerd is not None:
        outputs["containerd --version"] = ok(containerd)
    return collect.Sources(runner=Replay(outputs), root=root or ROOTS / "prepared-dra", hostname=lambda: "gpu-host-01")


def run(sources: collect.Sources, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(list(argv), sources=sources, stdout=out)
    return code, out.getvalue()


def checks_of(sources: collect.Sources, *argv: str) -> tuple[int, dict[str, dict[str, str | None]]]:
    code, text = run(sources, "--json", *argv)
    document = json.loads(text)
    return code, {check["name"]: check for check in document["checks"]}


# ----------------------------------------------------------------------------- the captured H200


@pytest.mark.unit
def test_h200_query_output_parses_to_the_gpu_inventory() -> None:
    gpus = parse.parse_gpu_csv((H200 / "nvidia-smi-query.csv").read_text(), parse.QUERY_FIELDS)
    assert gpus == [
        parse.Gpu(
            index=0,
            model="NVIDIA H200",
            uuid="GPU-16b40e3f-db2e-8b21-d4d3-4c77f01d2ab2",
            driver_version="580.159.04",
            memory_mib=143771,
            mig_mode="Disabled",
            mig_mode_pending="Disabled",
            pci_bus_id="00000000:00:06.0",
            compute_capability="9.0",
        )
    ]


@pytest.mark.unit
def test_h200_seed_query_with_units_parses_too() -> None:
    """The guide's query keeps units ("143771 MiB"); the parser accepts it for old nvidia-smi fallbacks."""
    (gpu,) = parse.parse_gpu_csv((H200 / "nvidia-smi-seed.csv").read_text(), parse.SEED_FIELDS)
    assert (gpu.model, gpu.driver_version, gpu.memory_mib, gpu.mig_mode) == ("NVIDIA H200", "580.159.04", 143771, None)


H200_ROOT = ROOTS / "h200-lent"
"""The lent H200's driver files where it keeps them: /usr/local/nvidia/lib64 and /usr/local/nvidia/bin."""
H200_DRIVER_ROOT_DETAIL = (
    "libnvidia-ml.so.1 is not in any folder the DRA driver searches under nvidiaDriverRoot / (/, /usr/lib64, "
    "/usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /lib64, /lib/x86_64-linux-gnu, /lib/aarch64-linux-gnu); "
    "this host keeps it at /usr/local/nvidia/lib64/libnvidia-ml.so.1; nvidia-smi is not in any folder the DRA driver "
    "searches under nvidiaDriverRoot / (/, /opt/bin, /usr/bin, /usr/sbin, /bin, /sbin); this host keeps it at "
    '/usr/local/nvidia/bin/nvidia-smi; the driver stops at start-up ("failed to locate driver libraries" or '
    '"failed to locate nvidia-smi") and publishes no ResourceSlice'
)
H200_DRIVER_ROOT_FIX = (
    "link the driver's files into the folders the DRA driver searches, as on the lent H200: "
    "`sudo ln -s /usr/local/nvidia/lib64/*.so* /usr/lib/x86_64-linux-gnu/; sudo ldconfig` (on arm64 into "
    "/usr/lib/aarch64-linux-gnu) and `sudo ln -s /usr/local/nvidia/bin/nvidia-smi /usr/bin/`, then re-run this check"
)

H200_DEVICE_NODES_DETAIL = (
    "cannot judge the NVIDIA device nodes: the checked root has no /dev folder (a copied tree, or a Pod without the "
    "host's /dev)"
)
H200_DEVICE_NODES_FIX = (
    "run the check on the host itself, or mount the host's / (with /dev) at the root given to --root"
)
"""The recorded tree holds the driver's files only: no /dev, so the device-node check says it cannot judge."""


def _with_driver_root(captured: str) -> str:
    """The capture predates the driver-root and device-node checks: add their rows, their fixes and one more
    failure (driver-root's; device-nodes cannot judge a tree without /dev: a warning), nothing else."""
    lines = captured.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("driver "))
    lines.insert(at + 1, f"driver-root      FAIL    {H200_DRIVER_ROOT_DETAIL}\n")
    lines.insert(at + 2, f"device-nodes     WARN    {H200_DEVICE_NODES_DETAIL}\n")
    at = lines.index("To fix:\n")
    lines.insert(at + 1, f"  driver-root: {H200_DRIVER_ROOT_FIX}\n")
    lines.insert(at + 2, f"  device-nodes: {H200_DEVICE_NODES_FIX}\n")
    text = "".join(lines)
    return text.replace("): 3 check(s) below the floors", "): 4 check(s) below the floors")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("owner", "exit_code"),
    [("dra", 1), ("device-plugin", 1), ("gpu-operator-dra", 1), ("gpu-operator", 1)],
)
def test_h200_replay_reproduces_the_captured_table(owner: str, exit_code: int) -> None:
    """The bare H200 has a driver but no toolkit, containerd or CDI: the table captured there is reproduced.

    For the DRA owners the replay also says what the capture could not yet: the DRA driver would not find the
    driver's files, which that machine keeps in /usr/local/nvidia (the real driver stopped there for that reason).
    """
    sources = collect.Sources(runner=h200_replay(), root=H200_ROOT, hostname=lambda: "vm")
    code, text = run(sources, "--owner", owner)
    captured = (H200 / f"hostcheck-{owner}.txt").read_text()
    assert code == exit_code
    assert text == (_with_driver_root(captured) if owner in {"dra", "gpu-operator-dra"} else captured)


@pytest.mark.unit
def test_h200_replay_reproduces_the_captured_inventory() -> None:
    sources = collect.Sources(runner=h200_replay(), root=H200_ROOT, hostname=lambda: "vm")
    code, text = run(sources, "--owner", "dra", "--json")
    expected = json.loads((H200 / "inventory-dra.json").read_text())
    # Captured when the inventory had an apiVersion of its own; it now has every report's (-o json|yaml).
    assert expected["apiVersion"] == "eks-hybrid-gpu.io/v1alpha1"
    expected["apiVersion"] = "eks-hybrid-gpu/v1alpha1"
    expected["checks"].insert(
        1, {"name": "driver-root", "status": "fail", "detail": H200_DRIVER_ROOT_DETAIL, "fix": H200_DRIVER_ROOT_FIX}
    )
    expected["checks"].insert(
        2, {"name": "device-nodes", "status": "warn", "detail": H200_DEVICE_NODES_DETAIL, "fix": H200_DEVICE_NODES_FIX}
    )
    assert code == 1
    inventory = json.loads(text)
    assert inventory.pop("checkedBy") == {
        "tool": "eks-hybrid-gpu hostcheck",
        "version": "0.1.0",
        "source": None,
        "python": platform.python_version(),
    }
    assert inventory == expected


@pytest.mark.unit
def test_h200_reports_exactly_what_the_bare_host_lacks() -> None:
    sources = collect.Sources(runner=h200_replay(), root=H200_ROOT, hostname=lambda: "vm")
    code, checks = checks_of(sources, "--owner", "dra")
    assert code == 1
    assert {name: check["status"] for name, check in checks.items()} == {
        "driver": "pass",
        "driver-root": "fail",
        "device-nodes": "warn",
        "containerd": "fail",
        "toolkit": "fail",
        "runtime-handler": "info",
        "cdi-runtime": "fail",
        "cdi-specs": "info",
        "mig": "pass",
        "models": "pass",
    }
    assert checks["containerd"] == {
        "name": "containerd",
        "status": "fail",
        "detail": "containerd not found: no containerd on PATH and no /etc/containerd/config.toml; the host has not "
        "completed Node Bootstrap",
        "fix": "complete Node Bootstrap first (`nodeadm install` installs containerd for EKS Hybrid Nodes, then "
        "`nodeadm init` joins the node), then re-run this check",
    }
    assert checks["toolkit"]["detail"] == (
        "NVIDIA Container Toolkit not found: no nvidia-ctk on PATH; standalone DRA driver 0.5.0 needs it"
    )
    assert checks["cdi-runtime"]["detail"] == (
        "CDI is not enabled: neither containerd nor /etc/containerd/config.toml was found; "
        "standalone DRA driver 0.5.0 needs a CDI-enabled runtime"
    )


# ----------------------------------------------------------------------------- cannot inspect (exit 2)


@pytest.mark.unit
def test_no_nvidia_smi_cannot_inspect_and_says_a_driver_is_not_implied() -> None:
    code, text = run(host(None), "--owner", "dra")
    assert code == 2
    assert f"CANNOT INSPECT (exit 2): cannot inspect the GPUs: no nvidia-smi on PATH. {DRIVER_HELP}\n" in text


@pytest.mark.unit
def test_driver_not_loaded_cannot_inspect_with_nvidia_smi_message() -> None:
    failed = collect.CommandResult(9, (SMI / "driver-not-loaded.txt").read_text(), "")
    code, text = run(host(failed), "--owner", "device-plugin", "--json")
    document = json.loads(text)
    assert code == 2
    assert document["result"] == "cannot-inspect"
    assert document["error"] == (
        "cannot inspect the GPUs: nvidia-smi exited with status 9: NVIDIA-SMI has failed because it couldn't "
        f"communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running. "
        f"{DRIVER_HELP}"
    )
    assert document["gpus"] == []
    assert document["nodeLabels"] == {}


@pytest.mark.unit
def test_library_mismatch_cannot_inspect() -> None:
    failed = collect.CommandResult(18, (SMI / "nvml-mismatch.txt").read_text(), "")
    code, text = run(host(failed), "--owner", "dra")
    assert code == 2
    assert "nvidia-smi exited with status 18: Failed to initialize NVML: Driver/library version mismatch." in text


@pytest.mark.unit
def test_garbage_output_cannot_inspect_and_names_the_line() -> None:
    code, text = run(host("garbage-fields.txt"), "--owner", "dra")
    assert code == 2
    expected = (
        "cannot inspect the GPUs: nvidia-smi output line 1 has 1 fields, expected 9 "
        "(index,name,uuid,driver_version,memory.total,mig.mode.current,mig.mode.pending,pci.bus_id,compute_cap): "
        "'Some unexpected banner text'."
    )
    assert expected in text


@pytest.mark.unit
def test_garbage_values_cannot_inspect() -> None:
    code, text = run(host("garbage-values.txt"), "--owner", "dra")
    assert code == 2
    assert (
        "nvidia-smi output line 1 is not a GPU row (memory.total in MiB, a driver version such as 580.95.05 and "
        "a GPU-... UUID expected)"
    ) in text


@pytest.mark.unit
def test_no_gpus_listed_cannot_inspect() -> None:
    code, text = run(host(collect.CommandResult(6, "No devices were found\n", "")), "--owner", "dra")
    assert code == 2
    assert "cannot inspect the GPUs: nvidia-smi exited with status 6: No devices were found." in text


@pytest.mark.unit
def test_empty_output_cannot_inspect() -> None:
    code, text = run(host(ok("\n")), "--owner", "dra")
    assert code == 2
    assert "cannot inspect the GPUs: nvidia-smi listed no GPUs." in text


@pytest.mark.unit
def test_gpu_operator_cannot_inspect_mentions_operator_managed_driver() -> None:
    code, text = run(host(None), "--owner", "gpu-operator")
    assert code == 2
    assert text.rstrip().endswith(
        "If the GPU Operator is to install the driver (driver.enabled=true), run it after that."
    )


# ----------------------------------------------------------------------------- floors (exit 1) and passes (exit 0)


@pytest.mark.unit
def test_prepared_dra_host_passes() -> None:
    code, text = run(host("driver-570.csv"), "--owner", "dra")
    assert code == 0
    assert "Result: PASS (exit 0): the host meets the floors for dra\n" in text
    assert "These are compatibility floors, not recommendations." in text


@pytest.mark.unit
def test_old_driver_fails_the_dra_floor_with_what_to_install() -> None:
    code, checks = checks_of(host("old-driver.csv"), "--owner", "dra")
    assert code == 1
    assert checks["driver"] == {
        "name": "driver",
        "status": "fail",
        "detail": "driver 550.127.05 is below the 565 floor for standalone DRA driver 0.5.0",
        "fix": "install an NVIDIA driver of branch 565 or newer that NVIDIA's matrix supports for this GPU, OS and "
        "kernel, then reboot",
    }


@pytest.mark.unit
def test_driver_570_meets_standalone_dra_but_not_operator_dra() -> None:
    code, checks = checks_of(host("driver-570.csv"), "--owner", "gpu-operator-dra")
    assert code == 1
    assert checks["driver"]["detail"] == (
        "driver 570.172.08 is below the 580 floor for GPU Operator 26.7 DRA workflow (GPUCluster)"
    )
    code, checks = checks_of(host("driver-570.csv"), "--owner", "dra")
    assert code == 0
    assert checks["driver"]["detail"] == "driver 570.172.08 meets the 565 floor for standalone DRA driver 0.5.0"


@pytest.mark.unit
def test_old_driver_is_fine_for_the_device_plugin() -> None:
    code, checks = checks_of(host("old-driver.csv", root=ROOTS / "prepared-device-plugin"), "--owner", "device-plugin")
    assert code == 0
    assert checks["driver"]["detail"] == (
        "driver 550.127.05 present (standalone NVIDIA device plugin 0.20.0 names no driver floor)"
    )


@pytest.mark.unit
def test_no_toolkit_fails_the_device_plugin() -> None:
    code, checks = checks_of(host("driver-570.csv", ctk=None), "--owner", "device-plugin")
    assert code == 1
    assert checks["toolkit"] == {
        "name": "toolkit",
        "status": "fail",
        "detail": "NVIDIA Container Toolkit not found: no nvidia-ctk on PATH; standalone NVIDIA device plugin "
        "0.20.0 needs it",
        "fix": "install nvidia-container-toolkit from NVIDIA's repository (it provides nvidia-ctk and "
        "nvidia-container-runtime)",
    }


@pytest.mark.unit
def test_toolkit_below_1_18_fails_dra() -> None:
    code, checks = checks_of(host("driver-570.csv", ctk=CTK_1_17), "--owner", "dra")
    assert code == 1
    assert checks["toolkit"] == {
        "name": "toolkit",
        "status": "fail",
        "detail": "NVIDIA Container Toolkit 1.17.8 is below the 1.18 floor for standalone DRA driver 0.5.0",
        "fix": "upgrade nvidia-container-toolkit to 1.18 or newer",
    }


@pytest.mark.unit
def test_toolkit_1_17_is_enough_for_the_device_plugin() -> None:
    code, checks = checks_of(
        host("driver-570.csv", ctk=CTK_1_17, root=ROOTS / "prepared-device-plugin"), "--owner", "device-plugin"
    )
    assert code == 0
    assert checks["toolkit"]["detail"] == "NVIDIA Container Toolkit 1.17.8 is installed"


@pytest.mark.unit
def test_missing_toolkit_only_warns_for_cluster_policy() -> None:
    code, checks = checks_of(host("driver-570.csv", ctk=None), "--owner", "gpu-operator")
    assert code == 0
    assert checks["toolkit"]["status"] == "warn"
    assert checks["toolkit"]["fix"] == (
        "keep the Operator's toolkit component enabled (toolkit.enabled=true), or install nvidia-container-toolkit "
        "from NVIDIA's repository (it provides nvidia-ctk and nvidia-container-runtime)"
    )


@pytest.mark.unit
def test_mig_enabled_fails_a_full_gpu_cohort() -> None:
    code, text = run(host("mig-enabled.csv"), "--owner", "dra", "--json")
    document = json.loads(text)
    mig = [check for check in document["checks"] if check["name"] == "mig"]
    assert code == 1
    assert mig == [
        {
            "name": "mig",
            "status": "fail",
            "detail": "GPU 0 (GPU-0b6d7c3e-1f2a-4b5c-8d9e-a1b2c3d4e5f6) has MIG mode Enabled but the cohort "
            "allocates full GPUs",
            "fix": "disable MIG (`sudo nvidia-smi -i 0 -mig 0`, then reset the GPU) or run the check with "
            "--mig enabled for a MIG cohort",
        }
    ]
    assert [gpu["migMode"] for gpu in document["gpus"]] == ["Enabled", "Disabled"]


@pytest.mark.unit
def test_mig_cohort_needs_mig_on_every_gpu() -> None:
    code, text = run(host("mig-enabled.csv"), "--owner", "dra", "--mig", "enabled", "--json")
    mig = [check for check in json.loads(text)["checks"] if check["name"] == "mig"]
    assert code == 1
    assert [check["detail"] for check in mig] == [
        "GPU 1 (GPU-0b6d7c3e-1f2a-4b5c-8d9e-a1b2c3d4e5f7) has MIG mode Disabled but the cohort expects MIG"
    ]


@pytest.mark.unit
def test_pending_mig_change_fails_until_reset() -> None:
    code, checks = checks_of(host("mig-pending.csv"), "--owner", "dra")
    assert code == 1
    assert checks["mig"]["detail"] == (
        "GPU 0 (GPU-7e3c2a10-4d5b-4c6d-9e8f-0a1b2c3d4e5f) has a MIG mode change pending (Disabled -> Enabled)"
    )
    assert checks["mig"]["fix"] == "reset the GPU (`sudo nvidia-smi -i 0 -r`) or reboot to apply it"


@pytest.mark.unit
def test_gpu_without_mig_passes_a_full_gpu_cohort() -> None:
    code, checks = checks_of(host("not-mig-capable.csv"), "--owner", "dra")
    assert code == 0
    assert checks["mig"]["detail"] == "MIG mode not supported matches --mig disabled"


@pytest.mark.unit
def test_several_gpus_give_one_row_each_and_gfd_style_labels() -> None:
    code, text = run(host("several-gpus.csv"), "--owner", "dra", "--json")
    document = json.loads(text)
    assert code == 0
    assert [gpu["index"] for gpu in document["gpus"]] == list(range(8))
    assert document["nodeLabels"] == {
        "eks.amazonaws.com/compute-type": "hybrid",
        "workload.example.com/gpu-allocation": "dra",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.count": "8",
    }
    assert document["kubeletNodeLabelsFlag"] == (
        "--node-labels=workload.example.com/gpu-allocation=dra,nvidia.com/gpu.present=true,"
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3,nvidia.com/gpu.memory=81559,nvidia.com/gpu.count=8"
    )
    code, table = run(host("several-gpus.csv"), "--owner", "dra")
    assert (
        "7    NVIDIA H100 80GB HBM3  81559       580.95.05  Disabled  GPU-5f1a0c64-8a1e-4c43-9a4e-0d7c3e4a0007" in table
    )


@pytest.mark.unit
def test_mixed_models_warn_without_failing() -> None:
    code, checks = checks_of(host("mixed-models.csv"), "--owner", "dra")
    assert code == 0
    assert checks["models"] == {
        "name": "models",
        "status": "warn",
        "detail": "GPU models differ on this host: NVIDIA H100 80GB HBM3, NVIDIA H200; the product label names only "
        "GPU 0",
        "fix": "put hosts with one GPU model in a cohort, or select devices by DRA attributes instead",
    }


@pytest.mark.unit
def test_old_nvidia_smi_falls_back_to_the_seed_query() -> None:
    rejected = collect.CommandResult(2, (SMI / "invalid-field.txt").read_text(), "")
    sources = host(rejected, root=ROOTS / "prepared-device-plugin")
    assert isinstance(sources.runner, Replay)
    sources.runner.outputs[SEED_QUERY] = ok((SMI / "seed-old-nvidia-smi.csv").read_text())
    code, checks = checks_of(sources, "--owner", "device-plugin")
    assert code == 0
    assert sources.runner.calls[:2] == [QUERY, SEED_QUERY]
    assert checks["mig"] == {
        "name": "mig",
        "status": "warn",
        "detail": "MIG mode not read: this nvidia-smi rejected the MIG query fields",
        "fix": None,
    }


@pytest.mark.unit
def test_cohort_label_can_be_overridden() -> None:
    code, text = run(
        host("driver-570.csv"), "--owner", "dra", "--json", "--cohort-label-key", "acme.io/gpu", "--cohort-label-value",
        "dra-h200",
    )  # fmt: skip
    labels = json.loads(text)["nodeLabels"]
    assert code == 0
    assert labels["acme.io/gpu"] == "dra-h200"
    assert "workload.example.com/gpu-allocation" not in labels


@pytest.mark.unit
def test_both_operator_modes_use_the_gpu_operator_cohort_value() -> None:
    _, text = run(host("driver-570.csv"), "--owner", "gpu-operator-dra", "--json")
    assert json.loads(text)["nodeLabels"]["workload.example.com/gpu-allocation"] == "gpu-operator"


@pytest.mark.unit
def test_every_failure_says_what_to_install_or_change() -> None:
    sources = host("mig-pending.csv", ctk=CTK_1_17, root=ROOTS / "unimported-dropin")
    code, text = run(sources, "--owner", "dra", "--json")
    failed = [check for check in json.loads(text)["checks"] if check["status"] == "fail"]
    assert code == 1
    assert {check["name"] for check in failed} == {"toolkit", "cdi-runtime", "mig", "driver-root"}
    assert all(check["fix"] for check in failed)


@pytest.mark.unit
def test_inventory_document_shape() -> None:
    code, text = run(host("driver-570.csv"), "--owner", "dra", "--json")
    document = json.loads(text)
    assert code == 0
    assert list(document) == [
        "apiVersion",
        "kind",
        "checkedBy",
        "hostname",
        "owner",
        "migExpectation",
        "result",
        "exitCode",
        "error",
        "gpus",
        "host",
        "floors",
        "checks",
        "nodeLabels",
        "kubeletNodeLabelsFlag",
        "note",
    ]
    assert (document["apiVersion"], document["kind"], document["hostname"]) == (
        "eks-hybrid-gpu/v1alpha1",
        "GpuHostInventory",
        "gpu-host-01",
    )
    assert document["floors"] == {
        "title": "standalone DRA driver 0.5.0",
        "driverMajor": 565,
        "containerToolkit": "1.18",
        "containerToolkitRequired": True,
        "nvidiaRuntimeHandlerRequired": False,
        "cdiRuntimeRequired": True,
        "source": "DRA 0.5.0 prerequisites: driver 565+, Container Toolkit 1.18+, CDI-enabled runtime",
        "note": "These are compatibility floors, not recommendations.",
    }
    assert document["host"]["containerToolkitVersion"] == "1.18.0"
    assert document["host"]["cdi"]["devices"] == [
        "nvidia.com/gpu=0",
        "nvidia.com/gpu=GPU-7e3c2a10-4d5b-4c6d-9e8f-0a1b2c3d4e5f",
        "nvidia.com/gpu=all",
    ]


# ----------------------------------------------------------------------------- command line and real commands


@pytest.mark.unit
def test_unknown_owner_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(["--owner", "karpenter"])
    assert raised.value.code == 2


@pytest.mark.unit
def test_run_command_reports_a_missing_executable_as_none() -> None:
    assert collect.run_command(["/nonexistent/nvidia-smi", "-L"]) is None


@pytest.mark.unit
def test_run_command_captures_output_and_status() -> None:
    result = collect.run_command([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    assert result == collect.CommandResult(3, "out\n", "")


@pytest.mark.unit
def test_module_entry_point_exits_2_without_nvidia_smi(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "eks_hybrid_gpu.hostcheck", "--owner", "dra", "--nvidia-smi", "/nonexistent/nvidia-smi",
         "--root", str(tmp_path)],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert completed.returncode == 2
    assert "cannot inspect the GPUs: no executable at /nonexistent/nvidia-smi. Being on premises" in completed.stdout


@pytest.mark.unit
def test_a_cohort_that_kept_the_name_through_dra_gets_its_allocator_label_at_registration() -> None:
    code, text = run(
        host("driver-570.csv"), "--owner", "dra", "--json", "--cohort-label-value", "device-plugin", "--allocator",
        "dra",
    )  # fmt: skip
    document = json.loads(text)
    assert code == 0
    assert document["nodeLabels"]["workload.example.com/gpu-allocation"] == "device-plugin"  # the cohort label kept
    assert document["nodeLabels"]["eks-hybrid-gpu.io/allocator"] == "dra"
    assert "eks-hybrid-gpu.io/allocator=dra" in document["kubeletNodeLabelsFlag"]
    _, plain = run(host("driver-570.csv"), "--owner", "dra", "--json")
    assert "eks-hybrid-gpu.io/allocator" not in json.loads(plain)["nodeLabels"]  # only where the cohort selects it
