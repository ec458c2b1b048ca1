"""The wheel's layout: one importable top-level name, `eks_hybrid_gpu`, with the Pulumi project inside it.

The repository keeps the Pulumi project at its root (`Pulumi.yaml`, `__main__.py`, `cluster/`, `components/`,
`payloads/`, `policy/`, `stacks/`), and the program and the pack import them by those names, as a Pulumi program
and a policy pack import from their own directory. The wheel ships that project as `eks_hybrid_gpu/_project/`
(the root mapped there with `package_dir`), so site-packages gains no `cluster`, `components` or `policy` of its own;
`eks_hybrid_gpu.projectdir` puts the chosen project on `sys.path` at run time. Why: docs/packaging.md.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

PROJECT = "eks_hybrid_gpu._project"
PROGRAM = find_packages(
    include=["cluster", "cluster.*", "components", "components.*", "payloads", "payloads.*", "policy", "policy.*"]
)


class BuildPy(build_py):
    """build_py that leaves this file out: the repository root is the folder of `eks_hybrid_gpu._project`."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        """The package's modules, without `setup` in the project package."""
        found: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        return [entry for entry in found if (entry[0], entry[1]) != (PROJECT, "setup")]


setup(
    cmdclass={"build_py": BuildPy},
    packages=[
        *find_packages(include=["eks_hybrid_gpu", "eks_hybrid_gpu.*"]),
        PROJECT,
        *(f"{PROJECT}.{package}" for package in PROGRAM),
    ],
    package_dir={PROJECT: "."},
    package_data={
        # Python 3.6's missing dataclasses, which the host check's artifact carries (a folder, not a package).
        "eks_hybrid_gpu.hostcheck": ["py36/*.py"],
        # Pulumi.yaml, the example stacks and the offline toolchain's script and versions (review and local up).
        PROJECT: ["Pulumi.yaml", "stacks/*.yaml", "scripts/toolchain.sh", "scripts/toolchain-versions.env"],
        # The pack's manifest, its executable entry point for the offline engine, and its own requirements.
        f"{PROJECT}.policy": ["PulumiPolicy.yaml", "analyzer", "requirements.txt", "README.md"],
    },
    include_package_data=False,
)
