#!/usr/bin/env python3
"""Builds the container images the hardware runs need, as OCI archives that `ctr images import` takes.

The lent GPU machine reaches no registry, so nothing there can be pulled:
- the pod sandbox (`localhost/eks-hybrid-gpu-pause:hardware`): the static pause built from `pause.c`;
- the smoke Job's probe image (`localhost/eks-hybrid-gpu-probe@sha256:…`): this machine's Debian python3 with the
  standard library and the shared libraries it and `_ctypes` link, plus `ldconfig` (the CDI hook that links the
  driver's libraries into the container runs it). The probe itself comes from the program's ConfigMap, as in a
  cluster. Nothing of the NVIDIA driver is in the image: CDI injects it;
- with `--device-plugin DIR`, NVIDIA's device plugin (`localhost/nvidia/k8s-device-plugin:<version>`): the
  `nvidia-device-plugin` and `config-manager` built by scripts/hardware-toolchain.sh at /usr/bin, glibc's runtime
  and ldconfig, and the environment of NVIDIA's own image (deployments/container/Dockerfile of the module:
  NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=compute,utility, NVIDIA_DISABLE_REQUIRE=true), so the
  `nvidia` runtime handler injects NVML into it as into NVIDIA's image. The chart's image (v0.20.0) is not
  built: its module version is not served;
- with `--dra DIR`, NVIDIA's DRA driver (`localhost/nvidia/dra-driver-nvidia-gpu:<version>`): what the chart's
  kubelet-plugin DaemonSet runs of the driver's image (deployments/container/Dockerfile of the module): the
  `gpu-kubelet-plugin` built by scripts/hardware-toolchain.sh, `nvidia-cdi-hook` at /usr/bin (the plugin copies it
  into its plugin folder when the chart names no hook path), `hack/kubelet-plugin-prestart.sh` at /usr/bin (the
  init container's command), bash and the few tools that script and the containers' `bash -c` call, glibc's
  runtime and the image's environment. Not built: the compute-domain binaries and the webhook, which the program's
  values leave off.

Layers are written deterministically (sorted, mtime 0, uid 0), so the same inputs give the same digest. Prints
the probe image's reference, which the hardware stack pins (`smokeJobs.image`).

Usage: python3 scripts/hardware/build_images.py --pause PATH --out DIR [--device-plugin DIR --device-plugin-version V]
       [--dra DIR --dra-version V --cdi-hook PATH --dra-source DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

PYTHON = Path("/usr/bin/python3.11")
STDLIB = Path("/usr/lib/python3.11")
LDCONFIG = Path("/sbin/ldconfig")
SKIPPED = {
    "test",
    "idlelib",
    "tkinter",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "turtledemo",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "unittest",
    "distutils",
    "venv",
}
PROBE_NAME = "localhost/eks-hybrid-gpu-probe"
PAUSE_NAME = "localhost/eks-hybrid-gpu-pause:hardware"
DEVICE_PLUGIN_NAME = "localhost/nvidia/k8s-device-plugin"
"""Named like NVIDIA's image (`nvcr.io/nvidia/k8s-device-plugin`): what recognises the plugin by its image does."""
DEVICE_PLUGIN_ENV = [
    "NVIDIA_DISABLE_REQUIRE=true",
    "NVIDIA_VISIBLE_DEVICES=all",
    "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
]
"""The environment of NVIDIA's device-plugin image (its Dockerfile's ENV lines)."""
DRA_NAME = "localhost/nvidia/dra-driver-nvidia-gpu"
"""Named like the chart's image (`registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu`)."""
DRA_ENV = [
    "NVIDIA_DISABLE_REQUIRE=true",
    "NVIDIA_VISIBLE_DEVICES=all",
    "NVIDIA_DRIVER_CAPABILITIES=utility",
]
"""The environment of the DRA driver's image (its Dockerfile's ENV lines)."""
DRA_TOOLS = ("bash", "basename", "ln", "date", "find", "head", "ls", "env", "sleep", "cp", "sed", "mount", "cat")
"""What the init container's kubelet-plugin-prestart.sh and the containers' `bash -c` run (the driver's image has
them from distroless `cc:debug`'s busybox and bash-static)."""


def _libraries(binaries: list[Path]) -> set[Path]:
    """The shared libraries `ldd` resolves for these binaries, the loader included."""
    found: set[Path] = set()
    for binary in binaries:
        listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
        for match in re.finditer(r"(/\S+\.so[\w.]*)", listing):
            found.add(Path(match.group(1)))
    return found


def _layer(entries: dict[str, Path | bytes], links: dict[str, str]) -> bytes:
    """A tar of `entries` (path in image -> file or bytes) and symlinks, byte-for-byte reproducible.

    Uncompressed (an OCI `tar` layer, which containerd imports as it is): the archives travel inside an xz'd
    stage (scripts/hardware/render.sh), and xz over gzip saves nothing; over the plain tar it saves a third."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = sorted({str(p) for name in [*entries, *links] for p in Path(name).parents if str(p) != "."})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name in sorted(entries):
            source = entries[name]
            data = source if isinstance(source, bytes) else source.read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if isinstance(source, Path) and source.stat().st_mode & 0o111 else 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, target in sorted(links.items()):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return raw.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def write_image(
    out: Path, name: str, layer: bytes, entrypoint: list[str], user: str, env: list[str] | None = None
) -> str:
    """One OCI archive at `out`; returns the manifest digest."""
    blobs: dict[str, bytes] = {}
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": user, "Env": ["PATH=/usr/bin:/bin:/usr/sbin:/sbin", *(env or [])]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    config_ref = _blob(blobs, json.dumps(config, sort_keys=True).encode())
    layer_ref = _blob(blobs, layer)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_ref},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_ref}],
    }
    manifest_ref = _blob(blobs, json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **manifest_ref,
                "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": "hardware"},
            }
        ],
    }
    with tarfile.open(out, "w") as tar:
        files = {
            "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
            "index.json": json.dumps(index).encode(),
        }
        files.update({f"blobs/sha256/{d.removeprefix('sha256:')}": data for d, data in blobs.items()})
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(manifest_ref["digest"])


def _glibc_runtime() -> list[Path]:
    """The shared objects of Debian's libc6 and libgcc-s1 packages (not gconv's charset modules)."""
    listed = subprocess.run(["dpkg", "-L", "libc6", "libgcc-s1"], capture_output=True, text=True, check=True).stdout
    return sorted(
        {
            Path(line)
            for line in listed.splitlines()
            if re.search(r"/lib[^/]*\.so(\.\d+)*$", line) and "gconv" not in line and Path(line).is_file()
        }
    )


def probe_entries() -> tuple[dict[str, Path | bytes], dict[str, str]]:
    """python3 with its standard library, the libraries it loads, and ldconfig."""
    entries: dict[str, Path | bytes] = {"usr/bin/python3.11": PYTHON, "sbin/ldconfig": LDCONFIG}
    extensions: list[Path] = []
    for path in sorted(STDLIB.rglob("*")):
        relative = path.relative_to(STDLIB)
        if any(part in SKIPPED or part.startswith("config-") for part in relative.parts) or not path.is_file():
            continue
        if path.suffix == ".so":
            extensions.append(path)
        entries[f"usr/lib/python3.11/{relative}"] = path
    for library in _libraries([PYTHON, *extensions]):
        entries[str(library.resolve()).lstrip("/")] = library.resolve()
        if library.resolve() != library:
            entries[str(library).lstrip("/")] = library.resolve()
    # The driver's libraries that CDI mounts in link glibc's own (libcuda.so.1 needs libdl.so.2, libpthread.so.0,
    # librt.so.1, libm.so.6): all of libc6's runtime, as a Debian base image has it, not only what python3 links.
    for library in _glibc_runtime():
        entries[str(library.resolve()).lstrip("/")] = library.resolve()
    entries.update(_loader_config())
    entries["etc/passwd"] = b"root:x:0:0::/:/sbin/nologin\nprobe:x:65532:65532::/:/sbin/nologin\n"
    return entries, {"usr/bin/python3": "python3.11"}


def _loader_config() -> dict[str, Path | bytes]:
    """The loader's configuration, which the CDI hook's ldconfig extends with the driver's folder."""
    return {
        "etc/ld.so.conf": b"include /etc/ld.so.conf.d/*.conf\n",
        "etc/ld.so.conf.d/x86_64-linux-gnu.conf": (
            b"/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n"
        ),
    }


def device_plugin_entries(binaries: Path) -> dict[str, Path | bytes]:
    """The device plugin and its config-manager, the libraries they link, glibc's runtime and ldconfig."""
    commands = [binaries / "nvidia-device-plugin", binaries / "config-manager"]
    entries: dict[str, Path | bytes] = {f"usr/bin/{c.name}": c for c in commands}
    entries["sbin/ldconfig"] = LDCONFIG
    for library in {*_libraries(commands), *_glibc_runtime()}:
        entries[str(library.resolve()).lstrip("/")] = library.resolve()
        if library.resolve() != library:
            entries[str(library).lstrip("/")] = library.resolve()
    entries.update(_loader_config())
    entries["tmp/.keep"] = b""
    return entries


def _host_tool(name: str) -> Path:
    """The resolved path of a tool of this machine (Debian's coreutils, findutils, sed, mount, bash)."""
    for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if (Path(folder) / name).is_file():
            return (Path(folder) / name).resolve()
    msg = f"{name} is not installed here; the DRA image needs it"
    raise SystemExit(msg)


def dra_entries(driver: Path, cdi_hook: Path, source: Path) -> dict[str, Path | bytes]:
    """The DRA driver's kubelet plugin, nvidia-cdi-hook, the prestart script, bash and its tools, glibc's runtime."""
    tools = [_host_tool(name) for name in DRA_TOOLS]
    commands = [driver / "gpu-kubelet-plugin", cdi_hook]
    entries: dict[str, Path | bytes] = {f"usr/bin/{c.name}": c for c in commands}
    entries["usr/bin/kubelet-plugin-prestart.sh"] = source / "hack" / "kubelet-plugin-prestart.sh"
    for tool, name in zip(tools, DRA_TOOLS, strict=True):
        entries[f"bin/{name}"] = tool
        entries[f"usr/bin/{name}"] = tool
    entries["sbin/ldconfig"] = LDCONFIG
    for library in {*_libraries([*commands, *tools]), *_glibc_runtime()}:
        entries[str(library.resolve()).lstrip("/")] = library.resolve()
        if library.resolve() != library:
            entries[str(library).lstrip("/")] = library.resolve()
    entries.update(_loader_config())
    entries["etc/passwd"] = b"root:x:0:0::/root:/bin/bash\n"
    entries["etc/group"] = b"root:x:0:\n"
    entries["root/.keep"] = b""
    entries["tmp/.keep"] = b""
    return entries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pause", type=Path, required=True, help="the static pause binary")
    parser.add_argument("--out", type=Path, required=True, help="folder for pause.oci.tar and probe.oci.tar")
    parser.add_argument("--device-plugin", type=Path, help="folder of nvidia-device-plugin and config-manager")
    parser.add_argument("--device-plugin-version", default="v0.19.0", help="the version those were built at")
    parser.add_argument("--dra", type=Path, help="folder of gpu-kubelet-plugin (the hardware toolchain's dra-v*)")
    parser.add_argument("--dra-version", default="v0.5.0", help="the version it was built at")
    parser.add_argument("--cdi-hook", type=Path, help="nvidia-cdi-hook (the hardware toolchain's)")
    parser.add_argument("--dra-source", type=Path, help="the driver module's source (its hack/ prestart script)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_image(args.out / "pause.oci.tar", PAUSE_NAME, _layer({"pause": args.pause}, {}), ["/pause"], "65535")
    entries, links = probe_entries()
    digest = write_image(
        args.out / "probe.oci.tar", f"{PROBE_NAME}:hardware", _layer(entries, links), ["python3"], "65532"
    )
    reference = f"{PROBE_NAME}@{digest}"
    (args.out / "probe-image.txt").write_text(reference + "\n")
    print(reference)
    if args.device_plugin:
        name = f"{DEVICE_PLUGIN_NAME}:{args.device_plugin_version}"
        layer = _layer(device_plugin_entries(args.device_plugin), {})
        write_image(args.out / "device-plugin.oci.tar", name, layer, ["nvidia-device-plugin"], "0", DEVICE_PLUGIN_ENV)
        (args.out / "device-plugin-image.txt").write_text(name + "\n")
        print(name)
    if args.dra:
        if args.cdi_hook is None or args.dra_source is None:
            parser.error("--dra needs --cdi-hook and --dra-source")
        name = f"{DRA_NAME}:{args.dra_version}"
        layer = _layer(dra_entries(args.dra, args.cdi_hook, args.dra_source), {})
        write_image(args.out / "dra.oci.tar", name, layer, ["bash"], "0", DRA_ENV)
        (args.out / "dra-image.txt").write_text(name + "\n")
        print(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
