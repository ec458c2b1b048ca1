"""Hostile host trees: every one ends in a finding or one clear line with its exit code, in bounded time, and
nothing outside `--root` is opened (#44). Links (loops, out of the root, absolute inside it), pipes, devices,
encodings, depth and size, one by one and then as hypothesis builds them."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eks_hybrid_gpu.hostcheck import cli, collect, hostfs
from tests.support.recorded_host import FIXTURES, fake_tool
from tests.unit.test_hostcheck import host

CONFIG = "etc/containerd/config.toml"
HANDLER = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
SECONDS = 10


@contextmanager
def bounded(seconds: int = SECONDS) -> Iterator[None]:
    def late(*_: object) -> None:
        message = f"the host check took more than {seconds} s"
        raise TimeoutError(message)

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def opened_inside(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every file the check opens, asserted to lie inside `root` once resolved."""
    seen: list[str] = []
    real_open = os.open

    def recording(path, flags, mode=0o777, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(os.path.realpath(path))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(hostfs.os, "open", recording)
    yield seen
    monkeypatch.undo()
    outside = [path for path in seen if not path.startswith(str(root.resolve()) + os.sep)]
    assert outside == []


def check(root: Path, *argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    with bounded():
        code = cli.main(["--owner", "dra", "--json", *argv], sources=host("driver-570.csv", root=root), stdout=out)
    return code, json.loads(out.getvalue())


def place(root: Path, relative: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def config_errors(document: dict) -> str:
    found = [c for c in document["checks"] if c["name"] == "containerd-config"]
    return found[0]["detail"] if found else ""


@pytest.mark.unit
def test_a_config_that_is_a_link_loop_is_a_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    place(tmp_path, CONFIG).symlink_to("config.toml")
    with opened_inside(tmp_path, monkeypatch):
        code, document = check(tmp_path)
    assert code == 1
    assert config_errors(document) == (
        "/etc/containerd/config.toml is a symbolic link loop (more than 40 links); point the link at a file"
    )


@pytest.mark.unit
def test_a_link_out_of_the_root_reads_the_root_not_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = tmp_path / "host", tmp_path / "pod"
    place(outside, "secret.toml").write_text(HANDLER)
    place(root, CONFIG).symlink_to("../../../../pod/secret.toml")
    place(root, "etc/containerd/other.toml").symlink_to(str(outside / "secret.toml"))
    with opened_inside(root, monkeypatch):
        code, document = check(root)
    assert document["host"]["containerd"]["nvidiaRuntimeHandler"] is False  # the pod's file was not read
    assert document["host"]["containerd"]["configFiles"] == []
    assert code == 1


@pytest.mark.unit
def test_an_absolute_link_inside_the_root_is_resolved_against_it(tmp_path: Path) -> None:
    place(tmp_path, "opt/containerd/config.toml").write_text(HANDLER)
    place(tmp_path, CONFIG).symlink_to("/opt/containerd/config.toml")
    _, document = check(tmp_path)
    assert document["host"]["containerd"]["nvidiaRuntimeHandler"] is True


@pytest.mark.unit
def test_a_named_pipe_is_a_finding_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(place(tmp_path, CONFIG))
    code, document = check(tmp_path)
    assert code == 1
    assert config_errors(document).startswith("/etc/containerd/config.toml is a named pipe, not a file; replace it")


@pytest.mark.unit
def test_a_device_is_a_finding_not_an_endless_read(tmp_path: Path) -> None:
    code, document = check(Path("/"), "--containerd-config", "/dev/zero")
    assert code == 1
    assert config_errors(document).startswith("/dev/zero is a character device, not a file")
    place(tmp_path, CONFIG).symlink_to("/dev/zero")  # inside a tree: the tree's /dev/zero, which it lacks
    assert check(tmp_path)[1]["host"]["containerd"]["configFiles"] == []


@pytest.mark.unit
def test_a_config_that_is_a_directory_stops_containerd(tmp_path: Path) -> None:
    place(tmp_path, CONFIG).mkdir()
    code, document = check(tmp_path)
    assert code == 1
    assert config_errors(document).startswith("/etc/containerd/config.toml is a directory, not a file")


@pytest.mark.unit
def test_an_explicit_import_that_does_not_exist_stops_containerd(tmp_path: Path) -> None:
    place(tmp_path, CONFIG).write_text('version = 2\nimports = ["/etc/containerd/nvidia.toml", "conf.d/*.toml"]\n')
    code, document = check(tmp_path)
    assert code == 1
    assert config_errors(document) == (
        "/etc/containerd/nvidia.toml is imported by /etc/containerd/config.toml but does not exist; containerd will "
        "not start: create it or remove it from imports"
    )


@pytest.mark.unit
def test_bytes_that_are_not_utf8_are_named(tmp_path: Path) -> None:
    place(tmp_path, CONFIG).write_bytes(b"version = 2\n# caf\xe9\n")
    place(tmp_path, "etc/cdi/nvidia.yaml").write_bytes(b"kind: nvidia.com/gpu\n\xff\xfe")
    code, document = check(tmp_path)
    assert code == 1
    assert config_errors(document) == (
        "/etc/containerd/config.toml is not UTF-8 text: byte 0xe9 at offset 17 (invalid continuation byte); "
        "save it as UTF-8"
    )
    cdi = next(c for c in document["checks"] if c["name"] == "cdi-specs")
    assert cdi["status"] == "fail"
    assert "/etc/cdi/nvidia.yaml is not UTF-8 text: byte 0xff at offset 21" in cdi["detail"]


@pytest.mark.unit
@pytest.mark.parametrize("text", ["null", "[]", '"spec"', '{"kind": "nvidia.com/gpu", "devices": [null]}'])
def test_a_json_cdi_spec_that_is_no_object_is_a_finding(tmp_path: Path, text: str) -> None:
    place(tmp_path, CONFIG).write_text("version = 2\n")
    place(tmp_path, "etc/cdi/nvidia.json").write_text(text)
    code, document = check(tmp_path)
    cdi = next(c for c in document["checks"] if c["name"] == "cdi-specs")
    assert cdi["status"] == "fail"
    assert "/etc/cdi/nvidia.json" in cdi["detail"]
    assert "not a CDI spec" in cdi["detail"]
    assert code == 1


@pytest.mark.unit
@pytest.mark.parametrize(
    "text", ["[" + ".".join(["a"] * 5000) + "]\n", "x = " + "[" * 5000 + "]" * 5000 + "\n"], ids=["header", "array"]
)
def test_5000_nested_tables_are_a_finding(tmp_path: Path, text: str) -> None:
    place(tmp_path, CONFIG).write_text(text)
    code, document = check(tmp_path)
    assert code == 1
    assert "nest deeper than 100 levels" in config_errors(document) or "nests deeper" in config_errors(document)


@pytest.mark.unit
def test_a_file_larger_than_the_bound_is_a_finding(tmp_path: Path) -> None:
    place(tmp_path, CONFIG).write_bytes(b"# " + b"x" * hostfs.MAX_BYTES + b"\n")
    code, document = check(tmp_path)
    assert code == 1
    assert "bytes, more than the 4194304 this check reads" in config_errors(document)


@pytest.mark.unit
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_root_that_is_not_a_folder_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "hots"
    if kind == "file":
        root.write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "eks_hybrid_gpu.hostcheck", "--owner", "dra", "--root", str(root)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    what = "does not exist" if kind == "missing" else "is not a directory"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"eks-hybrid-gpu hostcheck: --root {root} {what}: give the folder where the host's / is (/ on the host "
        "itself, e.g. /host in a Pod that mounts it); nothing was checked\n"
    )


@pytest.mark.unit
def test_nvidia_smi_output_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    smi = tmp_path / "smi.bin"
    smi.write_bytes((FIXTURES / "nvidia-smi" / "driver-570.csv").read_bytes().replace(b"NVIDIA", b"NVID\xffIA", 1))
    tool = fake_tool(tmp_path, "nvidia-smi", smi)
    sources = collect.Sources(root=tmp_path, nvidia_smi=str(tool))
    facts = collect.read_gpus(sources)
    assert facts.gpus == ()
    assert facts.error is not None
    assert facts.error.startswith(f"the output of {tool} is not UTF-8 text: byte 0xff at offset ")


# ----------------------------------------------------------------------------- trees hypothesis builds

NAMES = st.sampled_from(
    [CONFIG, "etc/containerd/conf.d/99-nvidia.toml", "etc/cdi/nvidia.yaml", "etc/cdi/x.json", "usr/bin/nvidia-smi",
     "etc/ld.so.conf", "dev/nvidiactl", "usr/lib/udev/rules.d/60-nvidia.rules", "lib", "etc/containerd"]
)  # fmt: skip
TARGETS = st.sampled_from(
    ["/dev/zero", "../../../../outside/secret.toml", "/etc/containerd/config.toml", "config.toml", ".", "..",
     "/", "/lib", "usr/lib", "/etc/containerd/conf.d/99-nvidia.toml", "../../etc"]
)  # fmt: skip
CONTENTS = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([HANDLER.encode(), b'imports = ["/etc/containerd/conf.d/*.toml", "/nope.toml"]\n', b"[[a]]\n"]),
)
ENTRIES = st.lists(
    st.tuples(NAMES, st.one_of(st.tuples(st.just("file"), CONTENTS), st.tuples(st.just("link"), TARGETS),
                               st.tuples(st.just("dir"), st.none()), st.tuples(st.just("fifo"), st.none()))),
    max_size=8,
)  # fmt: skip


def build(root: Path, entries: list) -> None:
    for name, (kind, detail) in entries:
        path = root / name
        if path.exists() or path.is_symlink():
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            continue
        if kind == "file":
            path.write_bytes(detail)
        elif kind == "link":
            path.symlink_to(detail)
        elif kind == "dir":
            path.mkdir()
        else:
            os.mkfifo(path)


@pytest.mark.unit
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ENTRIES)
def test_any_tree_ends_in_a_verdict_in_bounded_time_reading_only_inside(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, entries: list
) -> None:
    base = tmp_path_factory.mktemp("tree")
    root = base / "host"
    root.mkdir()
    place(base, "outside/secret.toml").write_text(HANDLER)
    build(root, entries)
    with opened_inside(root, monkeypatch):
        code, document = check(root)
    assert code in (0, 1)
    assert document["kind"] == "GpuHostInventory"
    failed = [c for c in document["checks"] if c["status"] == "fail"]
    assert all(c["fix"] for c in failed)
