"""Host check: containerd configs (three layouts, drop-ins, broken TOML) and CDI spec files."""

from __future__ import annotations

from pathlib import Path

import pytest

from eks_hybrid_gpu.hostcheck import collect, containerd, hostfs, parse
from tests.unit.test_hostcheck import CONTAINERD_2, CONTAINERD_17, ROOTS, checks_of, host


def facts_of(root: str, version_output: str | None = CONTAINERD_17) -> containerd.ContainerdFacts:
    return collect.read_containerd(host("driver-570.csv", containerd=version_output, root=ROOTS / root))


@pytest.mark.unit
def test_containerd_17_with_nvidia_handler_and_cdi() -> None:
    facts = facts_of("prepared-dra")
    assert facts.files_read == ("/etc/containerd/config.toml",)
    assert (facts.config_version, facts.containerd_version) == (2, "1.7.27")
    assert (facts.runtime_handler, facts.runtime_binary, facts.default_runtime) == (
        True,
        "/usr/bin/nvidia-container-runtime",
        "runc",
    )
    assert (facts.cdi_enabled, facts.cdi_source) == (True, 'enable_cdi in [plugins."io.containerd.grpc.v1.cri"]')
    assert facts.cdi_spec_dirs == ("/etc/cdi", "/var/run/cdi")


@pytest.mark.unit
def test_containerd_17_leaves_cdi_off_by_default() -> None:
    facts = facts_of("prepared-device-plugin")
    assert facts.runtime_handler is True
    assert (facts.cdi_enabled, facts.cdi_source) == (False, "containerd 1.7.27 leaves CDI off unless enable_cdi = true")


@pytest.mark.unit
def test_device_plugin_host_fails_dra_for_cdi_with_the_fix() -> None:
    code, checks = checks_of(host("driver-570.csv", root=ROOTS / "prepared-device-plugin"), "--owner", "dra")
    assert code == 1
    assert checks["cdi-runtime"] == {
        "name": "cdi-runtime",
        "status": "fail",
        "detail": "CDI is disabled (containerd 1.7.27 leaves CDI off unless enable_cdi = true); standalone DRA "
        "driver 0.5.0 needs a CDI-enabled runtime",
        "fix": "install containerd 2.x (CDI on by default) or set enable_cdi = true in the CRI plugin table, e.g. "
        "`sudo nvidia-ctk runtime configure --runtime=containerd --cdi.enabled`, then restart containerd",
    }
    assert checks["runtime-handler"]["status"] == "pass"


@pytest.mark.unit
def test_containerd_2_reads_the_imported_drop_in_and_enables_cdi_by_default() -> None:
    facts = facts_of("containerd2-dropin", CONTAINERD_2)
    assert facts.files_read == ("/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml")
    assert facts.unimported_dropins == ()
    assert (facts.config_version, facts.containerd_version) == (3, "2.1.4")
    assert (facts.runtime_handler, facts.default_runtime) == (True, "runc")
    assert (facts.cdi_enabled, facts.cdi_source) == (True, "containerd 2.1.4 enables CDI by default")


@pytest.mark.unit
def test_version_3_config_implies_cdi_when_the_binary_is_not_found() -> None:
    facts = facts_of("containerd2-dropin", None)
    assert (facts.cdi_enabled, facts.cdi_source) == (
        True,
        "a version 3 config means containerd 2.x, which enables CDI by default",
    )


@pytest.mark.unit
def test_unimported_drop_in_is_named_when_the_handler_is_missing() -> None:
    code, checks = checks_of(host("driver-570.csv", root=ROOTS / "unimported-dropin"), "--owner", "device-plugin")
    assert code == 1
    assert checks["runtime-handler"] == {
        "name": "runtime-handler",
        "status": "fail",
        "detail": "containerd has no nvidia runtime handler (/etc/containerd/config.toml); drop-ins present but not "
        "imported: /etc/containerd/conf.d/99-nvidia.toml; standalone NVIDIA device plugin 0.20.0 needs it",
        "fix": "run `sudo nvidia-ctk runtime configure --runtime=containerd` and restart containerd; the RuntimeClass "
        "named nvidia must use handler nvidia (the class name alone does not configure it)",
    }


@pytest.mark.unit
def test_broken_toml_fails_with_the_parse_error() -> None:
    code, checks = checks_of(host("driver-570.csv", root=ROOTS / "broken-toml"), "--owner", "device-plugin")
    assert code == 1
    assert checks["containerd-config"]["status"] == "fail"
    assert str(checks["containerd-config"]["detail"]).startswith(
        "/etc/containerd/config.toml is not valid TOML (line 2, column 64: expected ']' to close the table header)"
    )
    assert checks["containerd-config"]["fix"] == (
        "make each file valid TOML that this user can read (`containerd config dump` shows what containerd reads), "
        "restart containerd and re-run this check"
    )


@pytest.mark.unit
def test_missing_config_with_known_containerd_17(tmp_path: Path) -> None:
    facts = collect.read_containerd(host("driver-570.csv", root=tmp_path))
    assert (facts.config_found, facts.files_read, facts.config_version) == (False, (), None)
    assert facts.cdi_enabled is False


@pytest.mark.unit
def test_operator_without_handler_says_the_toolkit_component_configures_it(tmp_path: Path) -> None:
    code, checks = checks_of(host("driver-570.csv", root=tmp_path), "--owner", "gpu-operator")
    assert code == 0
    assert checks["runtime-handler"]["detail"] == (
        "containerd has no nvidia runtime handler (no containerd config was found); the Operator's toolkit "
        "component configures it while toolkit.enabled=true"
    )


@pytest.mark.unit
def test_relative_imports_resolve_against_the_config_directory() -> None:
    patterns = containerd.import_patterns(
        {"imports": ["conf.d/*.toml", "/opt/extra.toml"]}, "/etc/containerd/config.toml"
    )
    assert patterns == ["/etc/containerd/conf.d/*.toml", "/opt/extra.toml"]


@pytest.mark.unit
def test_deep_merge_keeps_sibling_tables() -> None:
    merged = containerd.deep_merge({"a": {"b": 1, "c": {"d": 2}}}, {"a": {"c": {"e": 3}}, "f": 4})
    assert merged == {"a": {"b": 1, "c": {"d": 2, "e": 3}}, "f": 4}


# ----------------------------------------------------------------------------- CDI specs


@pytest.mark.unit
def test_cdi_yaml_spec_devices() -> None:
    text = (ROOTS / "prepared-dra" / "etc" / "cdi" / "nvidia.yaml").read_text()
    assert parse.cdi_devices(text, "nvidia.yaml") == [
        "nvidia.com/gpu=0",
        "nvidia.com/gpu=GPU-7e3c2a10-4d5b-4c6d-9e8f-0a1b2c3d4e5f",
        "nvidia.com/gpu=all",
    ]


@pytest.mark.unit
def test_cdi_yaml_with_indented_list_and_inline_names() -> None:
    text = "kind: example.com/fpga\ndevices:\n  - name: a\n    containerEdits: {}\n  - name: 'b'\ncdiVersion: 0.6.0\n"
    assert parse.cdi_devices(text, "fpga.yaml") == ["example.com/fpga=a", "example.com/fpga=b"]


@pytest.mark.unit
def test_cdi_json_spec_and_a_broken_one_in_the_same_directory() -> None:
    sources = collect.Sources(runner=lambda argv: None, root=ROOTS / "cdi-json")
    (spec_dir,) = collect.read_cdi_dirs(sources, ("/var/run/cdi",))
    assert spec_dir.files == ("broken.json", "nvidia.json")
    assert spec_dir.devices == ("nvidia.com/gpu=0", "nvidia.com/gpu=1")
    assert spec_dir.errors == ("/var/run/cdi/broken.json is not valid JSON: Expecting value at line 2",)


@pytest.mark.unit
def test_unreadable_cdi_spec_fails_with_regenerate_fix() -> None:
    sources = host("driver-570.csv", root=ROOTS / "cdi-json")
    code, checks = checks_of(sources, "--owner", "gpu-operator", "--cdi-dir", "/var/run/cdi")
    assert code == 1
    assert checks["cdi-specs"] == {
        "name": "cdi-specs",
        "status": "fail",
        "detail": "unreadable CDI spec: /var/run/cdi/broken.json is not valid JSON: Expecting value at line 2",
        "fix": "regenerate it (`sudo nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`) or remove it",
    }


@pytest.mark.unit
def test_yaml_without_kind_is_not_a_cdi_spec() -> None:
    with pytest.raises(parse.ParseError, match=r"^notes\.yaml has no top-level kind: it is not a CDI spec$"):
        parse.cdi_devices("devices:\n- name: x\n", "notes.yaml")


@pytest.mark.unit
def test_containerd_check_names_version_and_config() -> None:
    _, checks = checks_of(host("driver-570.csv", root=ROOTS / "prepared-dra"), "--owner", "dra")
    assert checks["containerd"]["detail"] == "containerd 1.7.27; config: /etc/containerd/config.toml"


@pytest.mark.unit
def test_containerd_config_without_binary_on_path_still_counts() -> None:
    _, checks = checks_of(host("driver-570.csv", containerd=None, root=ROOTS / "containerd2-dropin"), "--owner", "dra")
    assert checks["containerd"] == {
        "name": "containerd",
        "status": "pass",
        "detail": "containerd version unknown (binary not on PATH); config: /etc/containerd/config.toml, "
        "/etc/containerd/conf.d/99-nvidia.toml",
        "fix": None,
    }


@pytest.mark.unit
def test_unreadable_config_is_an_error_not_a_missing_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(path: str, flags: int, mode: int = 0o777) -> int:
        raise PermissionError(13, "Permission denied", path)

    sources = host("driver-570.csv", root=ROOTS / "prepared-dra")
    monkeypatch.setattr(hostfs.os, "open", denied)
    facts = collect.read_containerd(sources)
    assert facts.errors == ("/etc/containerd/config.toml is not readable by this user; run the check as root",)
    assert facts.config_found is False
