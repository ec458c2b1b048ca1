"""`python -m bench.house`: the house's shape, as a new maintainer meets it: floors, back-edges, big rooms, walks.

Not a speed benchmark: the figures issue #39 asks for before and after a move of code between rooms.

- floors: each project folder's layer and the imports between layers; a back-edge imports a higher floor.
- big rooms: program modules over 400 lines.
- walks: a `move-host` and a `migrate` run through their unit tests (the recorded API, no cluster) under a profiler;
  rooms are the project modules entered, climbs the distinct functions of another folder that return into a
  command module (each is a helper the command had to leave its folder for), counted by folder: a climb into
  cluster/ is the command using its door to the cluster, one into components/ a command borrowing the program.
- places that parse the ledger and places that send a request: call sites in the program's folders.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLOORS: tuple[tuple[str, int], ...] = (
    ("policy/gpu_allocation/vocab", 0),
    ("cluster", 1),
    ("components", 2),
    ("eks_hybrid_gpu", 3),
    ("bench", 4),
    ("tests", 4),
)
"""Folder -> floor; a module imports its own floor or lower. The pack's rules stand apart (published alone)."""
PROGRAM = ("cluster", "components", "eks_hybrid_gpu")
WALKS = {
    "move-host": "tests/unit/test_movehost.py::test_a_recorded_move_continues_with_the_label_removed",
    "migrate": "tests/unit/test_migrate.py::test_the_phases_run_in_order_and_the_stack_file_gets_the_new_owner",
}


def floor_of(module_path: str) -> tuple[str, int] | None:
    """The folder and floor of a file path or dotted module name."""
    path = module_path.replace(".", "/")
    for folder, floor in FLOORS:
        if path == folder or path.startswith(folder + "/"):
            return folder, floor
    return None


def imports(path: Path) -> list[str]:
    """The absolute modules a file imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def floors() -> tuple[Counter[tuple[str, str]], list[str]]:
    """Import counts between folders, and the back-edges (an import of a higher floor) as `file imports module`."""
    edges: Counter[tuple[str, str]] = Counter()
    back: list[str] = []
    for folder, floor in FLOORS:
        if folder in ("tests",):
            continue
        for path in sorted((ROOT / folder).rglob("*.py")):
            here = floor_of(str(path.relative_to(ROOT)))
            if here is None or here[0] != folder:
                continue
            for module in imports(path):
                there = floor_of(module)
                if there is None or there[0] == folder:
                    continue
                edges[(folder, there[0])] += 1
                if there[1] > floor:
                    back.append(f"{path.relative_to(ROOT)} imports {module}")
    return edges, back


def big_rooms(limit: int = 400) -> list[tuple[str, int]]:
    """Program modules over `limit` lines, largest first."""
    found = []
    for folder in PROGRAM:
        for path in (ROOT / folder).rglob("*.py"):
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found.append((str(path.relative_to(ROOT)), lines))
    return sorted(found, key=lambda item: -item[1])


LEDGER_PARSERS = frozenset({"parse_record", "read_record", "ledger_problems"})
"""The ledger's readers: the pack's `read_record`/`ledger_problems` and the program's `parse_record` over them."""
REQUEST_BUILDERS = frozenset({"send", "call_api", "request"})
"""What puts a request on the wire: kube_http's `send`, the kubernetes client's `call_api`, a client's `request`."""


def call_sites(names: frozenset[str]) -> list[str]:
    """`file:line` of every call, in the program's folders, of a function or method with one of `names`."""
    found = []
    for folder in PROGRAM:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def walk(test_id: str) -> tuple[list[str], list[str]]:
    """Run one test under a profiler: the project modules entered, and the climbs (see the module docstring)."""
    import pytest

    rooms: dict[str, None] = {}
    climbs: dict[str, None] = {}
    root = str(ROOT) + "/"

    def module_of(frame: FrameType) -> str | None:
        name = frame.f_code.co_filename
        if not name.startswith(root):
            return None
        relative = name[len(root) :]
        return relative if floor_of(relative) and not relative.startswith("tests/") else None

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event not in ("call", "return"):
            return
        here = module_of(frame)
        if here is None:
            return
        if event == "call":
            rooms.setdefault(here, None)
            return
        caller = frame.f_back
        there = module_of(caller) if caller is not None else None
        if there is None or not there.startswith("eks_hybrid_gpu/"):
            return
        if floor_of(here) != floor_of(there) and here.split("/")[0] != "policy":
            climbs.setdefault(f"{here}:{frame.f_code.co_name}", None)

    sys.setprofile(profile)
    try:
        pytest.main(["-q", "-p", "no:cacheprovider", "-x", test_id])
    finally:
        sys.setprofile(None)
    return list(rooms), list(climbs)


def main() -> int:
    """Print the house's figures."""
    edges, back = floors()
    print("imports between folders (from -> to: count)")
    for (source, target), count in sorted(edges.items()):
        print(f"  {source} -> {target}: {count}")
    print(f"back-edges (an import of a higher floor): {len(back)}")
    for line in back:
        print(f"  {line}")
    rooms = big_rooms()
    print(f"program modules over 400 lines: {len(rooms)}")
    for path, lines in rooms:
        print(f"  {path}: {lines}")
    for title, names in (
        ("places that parse the ledger", LEDGER_PARSERS),
        ("places that send a request", REQUEST_BUILDERS),
    ):
        sites = call_sites(names)
        print(f"{title}: {len(sites)}")
        for site in sites:
            print(f"  {site}")
    for name, test_id in WALKS.items():
        entered, climbs = walk(test_id)
        folders = Counter(room.split("/")[0] for room in entered)
        by_folder = Counter(climb.split("/")[0] for climb in climbs)
        print(f"walk {name}: {len(entered)} rooms ({dict(folders)}), {len(climbs)} climbs ({dict(by_folder)})")
        for climb in climbs:
            print(f"  climb: {climb}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
