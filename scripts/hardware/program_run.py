#!/usr/bin/env python3
"""The program's own owner change on the lent GPU machine: its `pulumi up` installs the device-plugin cohort on a
real kubelet, and `eks-hybrid-gpu migrate` moves the cohort to DRA (`--drain`) and back while a pod holds the GPU.

Runs there as root from the repository root, after `scripts/hardware/render.sh device-plugin` and
`scripts/hardware/stage_engine.sh` here, the unpacking of their stages there and `source
scripts/hardware/engine_env.sh` (the Pulumi CLI, the Kubernetes provider, the program's Python packages):
1. the node's host half as plugin_run.py prepares it (host, driver files, runc, the `nvidia` handler, containerd with
   the pause, probe, device-plugin and DRA driver images), the images built here also named as the program's
   DaemonSets name the charts' images (the kubelet's IfNotPresent then runs them: nothing is pulled);
2. the control plane with what a cluster gives pods (ServiceAccount admission, default ServiceAccounts, the root-CA
   publisher) and the `kubernetes` Service routed (kube-proxy's part): the DRA kubelet plugin reads the API server
   from its pod, and here its DaemonSet is the program's, not one this script could amend;
3. a real kubelet registering the node with the labels the cohort selects (and NFD's PCI label the DRA chart's
   affinity asks);
4. stacks/Pulumi.hardware-program.yaml written from scripts/hardware/Pulumi.hardware-program.yaml (source
   kubeconfig: this run's cluster) and the program's `pulumi up` with the policy pack, as `migrate` runs each phase's
   (`eks_hybrid_gpu.migrate.runner.stack_runner`): the device-plugin cohort, its smoke Job in probe mode;
5. the smoke Job's probe; a pod holding `nvidia.com/gpu`; `python3 -m eks_hybrid_gpu migrate --stack
   hardware-program --cohort plugin --to dra --drain` (with `--yes` when the command has it); the program's DRA smoke
   Job and its probe; `migrate --to device-plugin --drain`; the smoke Job's probe on the plugin again.

plugin_run.py's sampler reads the node's allocator pods and published devices every ~100 ms for the whole run. One
JSON report (each step's result and time, each migrate phase's seconds as migrate printed them, the published
devices, the sampler's maxima, the probes' JSON) is written to `--report`; log tails to `--logs`.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import dra_run as base  # noqa: E402
import plugin_run as plugin  # noqa: E402
from dra_run import LOGS, Run, StepFailed, sh, wait  # noqa: E402

STACK = "hardware-program"
COHORT = "plugin"
TEMPLATE = HERE / f"Pulumi.{STACK}.yaml"
PLACEHOLDERS = ("KUBECONFIG", "KUBERNETES_VERSION", "CHARTS", "PROBE_IMAGE")
PHASE_LINE = re.compile(r"^\[phase (?P<phase>[\w-]+)\] done in (?P<seconds>[0-9.]+) s")
"""How `migrate` reports a phase (eks_hybrid_gpu/migrate/phases.py)."""
KEPT_NAME = "nvidia.com/gpu"
"""The name a keep-name run (`--keep-name`) keeps through DRA: what the device plugin published."""
KEEP_NAME_JOB = "keep-name-probe"
WAIT_TIMEOUT = "150s"
"""migrate's --timeout for each wait: the device call has 600 s for the whole run."""


def program_stack(template: str, values: dict[str, str]) -> str:
    """The run's stack file: every placeholder of the template replaced; refused when one is left or unknown."""
    missing = [name for name in PLACEHOLDERS if name not in values]
    if missing or set(values) - set(PLACEHOLDERS):
        raise ValueError(f"placeholders {PLACEHOLDERS} are filled, not {sorted(values)}")
    return re.sub(r"\b(" + "|".join(PLACEHOLDERS) + r")\b", lambda m: values[m.group(1)], template)


def keeping_the_name(stack_file: str) -> str:
    """The user's edit before a keep-name move (docs/migrating-owners.md): the cohort's owner `dra` and the DRA class
    keeping `nvidia.com/gpu` (`dra.extendedResourceName`); `migrate --to dra` then moves it node by node."""
    owner = "      owner: device-plugin\n"
    section = "  eks-hybrid-gpu:dra:\n"
    if stack_file.count(owner) != 1 or stack_file.count(section) != 1:
        raise ValueError("the stack file has not exactly one device-plugin cohort and one eks-hybrid-gpu:dra section")
    edited = stack_file.replace(owner, "      owner: dra\n")
    return edited.replace(section, f"{section}    extendedResourceName: {KEPT_NAME}\n")


def migrate_phases(lines: list[str]) -> dict[str, float]:
    """Each phase's seconds as `migrate` printed them (`[phase cordon] done in 0.1 s; ...`), in order."""
    found = (PHASE_LINE.match(line.strip()) for line in lines)
    return {m["phase"]: float(m["seconds"]) for m in found if m}


def accepts_flag(help_text: str, flag: str) -> bool:
    """Whether a command's --help names `flag` as an option (not as part of a longer one)."""
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def images_as_rendered(renders: list[tuple[dict[str, Any], str]]) -> dict[str, str]:
    """Each image a rendered DaemonSet names (the chart's: not reachable from the GPU machine) -> the image built here
    that runs in its place. A container that would pull it anyway (`imagePullPolicy: Always`) is refused."""
    named: dict[str, str] = {}
    for daemonset, built in renders:
        pod = daemonset["spec"]["template"]["spec"]
        for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
            if container.get("imagePullPolicy") == "Always":
                raise StepFailed(f"{container['name']} pulls {container['image']} always: no registry here")
            named[container["image"]] = built
    return named


def name_images(hw: Path, named: dict[str, str], detail: dict[str, Any]) -> None:
    """Tag the built images with the references the program's objects use, in the kubelet's containerd namespace."""
    for rendered, built in named.items():
        sh(*base.ctr_command(hw), "images", "tag", "--force", built, rendered)
    detail["namedAsRendered"] = {rendered: f"{built} (built here)" for rendered, built in named.items()}


def write_stack(run: Run, images: Path, charts: Path, detail: dict[str, Any]) -> Path:
    """stacks/Pulumi.hardware-program.yaml for this run's cluster, and its Pulumi stack in the engine's backend."""
    assert run.cluster is not None
    version = run.api("GET", "/version")[1]["gitVersion"].removeprefix("v")
    values = {
        "KUBECONFIG": str(run.cluster.kubeconfig),
        "KUBERNETES_VERSION": version,
        "CHARTS": str(charts),
        "PROBE_IMAGE": (images / "probe-image.txt").read_text().strip(),
    }
    path = REPO / "stacks" / f"Pulumi.{STACK}.yaml"
    path.write_text(program_stack(TEMPLATE.read_text(), values))
    detail["stackFile"] = str(path.relative_to(REPO))
    detail["values"] = values
    listed = sh("pulumi", "stack", "ls", "--cwd", str(REPO), check=False)
    if STACK in listed:  # an earlier run's, in this lease: its state names objects of a cluster that is gone
        sh("pulumi", "stack", "rm", STACK, "--force", "--yes", "--cwd", str(REPO))
        detail["earlierStackRemoved"] = True
    sh("pulumi", "stack", "init", STACK, "--cwd", str(REPO))
    detail["engine"] = {"pulumi": sh("pulumi", "version").strip(), "python": sys.version.split()[0]}
    return path


def program_up(why: str) -> None:
    """One `pulumi up` of the stack with the policy pack, as each of migrate's phases runs it (in this process)."""
    from eks_hybrid_gpu.migrate.planning import read_stack_file
    from eks_hybrid_gpu.migrate.request import MigrateRequest
    from eks_hybrid_gpu.migrate.runner import stack_runner

    stack = read_stack_file(STACK, REPO)
    request = MigrateRequest(stack=STACK, cohort=COHORT, to="device-plugin", project=REPO)
    # A plain `pulumi up`: no run above it holds the cohort's Leases, so the program takes its own ("" = none).
    stack_runner(stack, request, stack.config.cluster.kubeconfig, holder="")(why)


def cli(argv: list[str], name: str, detail: dict[str, Any]) -> list[str]:
    """`python3 -m eks_hybrid_gpu ARGV` as a user runs it: echoed, its lines kept with the seconds since it started
    (and in LOGS/<name>.log); StepFailed on a non-zero exit."""
    began = time.monotonic()
    command = [sys.executable, "-m", "eks_hybrid_gpu", *argv]
    detail["command"] = " ".join(["eks-hybrid-gpu", *argv])
    lines: list[str] = []
    # No terminal: a question on stdin reads end-of-file instead of waiting out the device call.
    with subprocess.Popen(
        command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"  | {line}", end="", flush=True)
            lines.append(line.rstrip("\n"))
        code = process.wait()
    detail["seconds"] = round(time.monotonic() - began, 2)
    detail["exitCode"] = code
    detail["output"] = lines[-80:]
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"{name}.log").write_text("\n".join(lines) + "\n")
    if code != 0:
        raise StepFailed(f"{detail['command']} exited {code}: {' '.join(lines[-6:])[-500:]}")
    return lines


def migrate(to: str, detail: dict[str, Any]) -> None:
    """`eks-hybrid-gpu migrate` of the cohort to `to` with --drain; the phases' seconds as it printed them."""
    argv = ["migrate", "--project", str(REPO), "--stack", STACK, "--cohort", COHORT, "--to", to, "--drain"]
    argv += ["--timeout", WAIT_TIMEOUT]
    helped = subprocess.run(
        [sys.executable, "-m", "eks_hybrid_gpu", "migrate", "--help"], cwd=REPO, capture_output=True, text=True
    )
    if accepts_flag(helped.stdout, "--yes"):
        argv.append("--yes")
    lines = cli(argv, f"migrate-to-{to}", detail)
    detail["phases"] = migrate_phases(lines)


def live_job(run: Run, rendered: dict[str, Any], other_than: str | None) -> dict[str, Any]:
    """The program's smoke Job as the cluster has it: one whose uid is not `other_than` (the previous owner's Job,
    which the remove phase deleted), waiting until `pulumi up` has created it."""
    namespace, name = rendered["metadata"]["namespace"], rendered["metadata"]["name"]

    def created() -> Any:
        code, job = run.api("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        if code == 200 and job["metadata"]["uid"] != other_than:
            return job
        return f"Job {namespace}/{name}: {code}"

    job: dict[str, Any] = wait(f"the program's smoke Job {namespace}/{name}", created, 60)
    return job


def probe_of_program_job(
    run: Run, rendered: dict[str, Any], other_than: str | None, detail: dict[str, Any], key: str
) -> str:
    """Wait for the program's smoke Job (created by `pulumi up`, left to it) and its probe; returns the Job's uid."""
    began = time.monotonic()
    job = live_job(run, rendered, other_than)
    plugin.finish_job(run, job, detail, key, began, delete=False)
    uid: str = job["metadata"]["uid"]
    return uid


def plain_request_job(rendered: dict[str, Any]) -> dict[str, Any]:
    """The device-plugin render's smoke Job (probe mode, a plain `nvidia.com/gpu: 1`) under another name, unsuspended:
    after a keep-name move the same request, unedited, must be served through DRA (KEP-5004)."""
    job = copy.deepcopy(rendered)
    container = job["spec"]["template"]["spec"]["containers"][0]
    limits = (container.get("resources") or {}).get("limits") or {}
    if limits.get(KEPT_NAME) != "1" and limits.get(KEPT_NAME) != 1:
        raise StepFailed(f"the device-plugin render's smoke Job asks {limits}, not {KEPT_NAME}: 1")
    if job["spec"]["template"]["spec"].get("resourceClaims"):
        raise StepFailed("the device-plugin render's smoke Job asks a ResourceClaim, not the plain name")
    job["metadata"] = {"name": KEEP_NAME_JOB, "namespace": rendered["metadata"]["namespace"]}
    job["spec"]["suspend"] = False
    job["spec"].pop("selector", None)
    job["spec"]["template"].setdefault("metadata", {})["labels"] = {"app.kubernetes.io/name": KEEP_NAME_JOB}
    return job


def probe_through_the_kept_name(run: Run, rendered: dict[str, Any], detail: dict[str, Any]) -> None:
    """Create the plain-request Job; its probe must pass on a GPU the node publishes only through DRA now, and its pod
    must carry the claim the scheduler made for the name (`status.extendedResourceClaimStatus`)."""
    began = time.monotonic()
    job = plain_request_job(rendered)
    namespace = job["metadata"]["namespace"]
    code, created = run.api("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    if code not in (200, 201):
        raise StepFailed(f"create Job {namespace}/{KEEP_NAME_JOB}: {code} {str(created)[:300]}")
    try:
        plugin.finish_job(run, created, detail, "keepName", began, delete=False)
    finally:
        pods = plugin.pods_of(run, namespace, f"app.kubernetes.io%2Fname%3D{KEEP_NAME_JOB}")
        status = (pods[0].get("status") or {}) if pods else {}
        detail["extendedResourceClaimStatus"] = status.get("extendedResourceClaimStatus")
        _, claims = run.api("GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")
        detail["claims"] = [
            {
                "name": c["metadata"]["name"],
                "owner": [o.get("name") for o in c["metadata"].get("ownerReferences") or []],
                "devices": [
                    r.get("device")
                    for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
                ],
            }
            for c in (claims or {}).get("items", [])
        ]
        run.api(
            "DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{KEEP_NAME_JOB}", {"propagationPolicy": "Background"}
        )
    if not detail["extendedResourceClaimStatus"]:
        raise StepFailed("the probe passed, but its pod has no extendedResourceClaimStatus: not served through DRA")


def main() -> int:
    parser = plugin.run_arguments(__doc__.splitlines()[0])
    parser.add_argument("--moved", type=Path, required=True, help="the moved-to-dra stack's review folder")
    parser.add_argument("--charts", type=Path, default=Path("/opt/hw-engine/charts"), help="the engine stage's charts")
    parser.add_argument(
        "--keep-name", action="store_true", help=f"move keeping {KEPT_NAME} through DRA (dra.extendedResourceName)"
    )
    args = parser.parse_args()
    run = Run(args.report)
    run.report["run"] = "program migrate keeping nvidia.com/gpu" if args.keep_name else "program migrate"
    objects, moved = base.rendered(args.review), base.rendered(args.moved)
    daemonset, kubelet_plugin = plugin.daemonset_of(objects), plugin.kubelet_plugin_of(moved)
    rendered_job = next(o for o in objects if o["kind"] == "Job")
    built = {
        "plugin": (args.images / "device-plugin-image.txt").read_text().strip(),
        "dra": (args.images / "dra-image.txt").read_text().strip(),
    }
    sampler: plugin.Sampler | None = None
    code = 0
    try:
        node_name = plugin.prepare_node(run, args.hw, args.images, dra=True)
        with run.step("the built images named as the program's DaemonSets name the charts' images") as d:
            name_images(args.hw, images_as_rendered([(daemonset, built["plugin"]), (kubelet_plugin, built["dra"])]), d)
        with run.step("etcd, kube-apiserver (ServiceAccount admission), kube-controller-manager, kube-scheduler") as d:
            base.control_plane(run, args.toolchain, d, pod_service_accounts=True)
        sampler = plugin.Sampler(run, node_name)
        sampler.start()
        with run.step("kubelet registers the node with the labels the cohort's DaemonSets select") as d:
            base.kubelet(run, args.hw, d, node_name=node_name, labels=plugin.node_labels(daemonset))
            plugin.label_for_affinity(run, node_name, kubelet_plugin, d)
            plugin.root_mount_shared(d)
            # The DRA DaemonSet's prestart script and plugin look for the driver under /driver-root (the host's /):
            # on the lent layout its links must be relative and nvidia-smi a file in /usr/bin (docs/host-validation.md).
            plugin.driver_files_inside_the_container(d)
        with run.step("pods reach the API server: the kubernetes Service routed") as d:
            plugin.route_kubernetes_service(run, d)
        with run.step("the program's stack for this cluster (source kubeconfig) and its Pulumi stack") as d:
            stack_path = write_stack(run, args.images, args.charts, d)
        with run.step("pulumi up: the program installs the device-plugin cohort") as d:
            program_up("the device-plugin cohort on the GPU machine's node")
            plugin.published_detail(run, node_name, d, sampler)
        with run.step("the program's smoke Job gets nvidia.com/gpu; the probe runs") as d:
            uid = probe_of_program_job(run, rendered_job, None, d, "default")
        with run.step("a pod holds the GPU through the device plugin") as d:
            job = live_job(run, rendered_job, None)
            plugin.holder_pod(run, node_name, job, "nvidia.com/gpu", d)
        with run.step(
            "eks-hybrid-gpu migrate --to dra --drain" + (f", keeping {KEPT_NAME}" if args.keep_name else "")
        ) as d:
            if args.keep_name:
                stack_path.write_text(keeping_the_name(stack_path.read_text()))
                d["stackEdit"] = f"cohort {COHORT} owner dra, dra.extendedResourceName {KEPT_NAME}"
            migrate("dra", d)
            plugin.published_detail(run, node_name, d, sampler)
        with run.step("the program's DRA smoke Job: its claim allocated, the probe runs") as d:
            uid = probe_of_program_job(run, rendered_job, uid, d, "dra")
        if args.keep_name:
            with run.step(f"a plain {KEPT_NAME} request, unedited, served through DRA: the probe runs") as d:
                probe_through_the_kept_name(run, rendered_job, d)
            return code  # the keep-name run ends on DRA (the finally clause writes the report)
        with run.step("eks-hybrid-gpu migrate --to device-plugin --drain") as d:
            migrate("device-plugin", d)
            plugin.published_detail(run, node_name, d, sampler)
        with run.step("back on the plugin: the program's smoke Job gets nvidia.com/gpu; the probe runs") as d:
            probe_of_program_job(run, rendered_job, uid, d, "back")
    except BaseException:  # a step's failure, or the call's time limit (`timeout -s INT`): the report says fail
        code = 1
    finally:
        plugin.wind_down(run, sampler, code, args.logs)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
