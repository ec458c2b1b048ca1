"""The one way the host check reads the host's files: inside `--root`, regular files only, bounded, decoded.

The check runs on a host (`--root /`) or in a Pod with the host mounted (`--root /host`), so every path it reads
is a host path resolved as the host's kernel would resolve it with the root as `/`: a symbolic link with an
absolute target restarts at the root, `..` stops at the root (as at `/`), at most `MAX_LINKS` links are followed.
Nothing outside the root is ever opened, so a Pod judges the host's files and never its own.

A file is read only when it is a regular file (a named pipe would block, a device such as /dev/zero never ends,
a directory is no config), and only up to `MAX_BYTES`; its bytes must be UTF-8. Each refusal is an `Unreadable`
naming the host path, what it is, and the fix, which the checks turn into a finding.
"""

import errno
import fnmatch
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    from typing import Final

MAX_LINKS: "Final" = 40
"""Links followed in one lookup, as the kernel's ELOOP limit."""
MAX_BYTES: "Final" = 4 * 1024 * 1024
"""Largest file read: containerd configs and CDI specs are kilobytes; a larger one is not what it claims to be."""
MAX_ENTRIES: "Final" = 10000
"""Most directory entries listed in one folder (a CDI or drop-in folder holds a handful)."""


class Unreadable(Exception):
    """A host file the check could not read: `path` (the host's), `problem` and `fix` in words."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{path} {problem}; {fix}")
        self.path = path
        self.problem = problem
        self.fix = fix


def _kind(mode: int) -> str:
    """A file type in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def undecodable(data: bytes, what: str) -> Optional[str]:
    """Why `data` is not UTF-8 (`what` names it), or None when it is."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start : error.start + 1]
        return f"{what} is not UTF-8 text: byte 0x{bad.hex()} at offset {error.start} ({error.reason})"
    return None


class HostTree:
    """The host's file tree under a root; every lookup stays inside it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def local(self, path: str) -> Optional[Path]:
        """`path` of the host as a path of this process, every link resolved inside the root; None for a loop.

        The last component may be absent.
        """
        parts = [p for p in PurePosixPath(path).parts if p != "/"]
        done: List[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            local = self.root.joinpath(*done, part)
            try:
                target = os.readlink(str(local))
            except OSError:
                done.append(part)  # not a link, or absent: the kernel's lookup would stop or go on the same way
                continue
            hops += 1
            if hops > MAX_LINKS:
                return None
            if target.startswith("/"):
                done = []
            parts = [p for p in PurePosixPath(target).parts if p != "/"] + parts
        return self.root.joinpath(*done)

    def _stat(self, path: str) -> Optional[os.stat_result]:
        local = self.local(path)
        if local is None:
            return None
        try:
            return os.stat(str(local))
        except (OSError, ValueError):
            return None

    def exists(self, path: str) -> bool:
        """Whether the host has something at `path` (links followed inside the root)."""
        return self._stat(path) is not None

    def is_file(self, path: str) -> bool:
        """A regular file (links followed inside the root)."""
        found = self._stat(path)
        return found is not None and stat.S_ISREG(found.st_mode)

    def is_dir(self, path: str) -> bool:
        """A directory (links followed inside the root)."""
        found = self._stat(path)
        return found is not None and stat.S_ISDIR(found.st_mode)

    def is_executable(self, path: str) -> bool:
        """A regular file with an execute bit (what the runc shim needs to run it)."""
        found = self._stat(path)
        return found is not None and stat.S_ISREG(found.st_mode) and bool(found.st_mode & 0o111)

    def is_link_to(self, path: str, target: str) -> bool:
        """`path` itself is a symbolic link whose text is `target` (a mask: a link to /dev/null)."""
        parent = self.local(str(PurePosixPath(path).parent))
        if parent is None:
            return False
        try:
            return os.readlink(str(parent / PurePosixPath(path).name)) == target
        except (OSError, ValueError):
            return False

    def names(self, folder: str, pattern: str = "*") -> List[str]:
        """Sorted names in a host folder matching a shell pattern; empty when it is not a readable folder."""
        local = self.local(folder)
        if local is None or not self.is_dir(folder):
            return []
        try:
            with os.scandir(str(local)) as entries:
                found: List[str] = []
                for entry in entries:
                    if len(found) >= MAX_ENTRIES:
                        break
                    if fnmatch.fnmatchcase(entry.name, pattern):
                        found.append(entry.name)
        except OSError:
            return []
        return sorted(found)

    def glob(self, pattern: str) -> List[str]:
        """Host paths matching an absolute pattern, as Go's filepath.Glob matches them (sorted), inside the root."""
        matches = ["/"]
        for part in [p for p in PurePosixPath(pattern).parts if p != "/"]:
            following: List[str] = []
            for base in matches:
                if not any(c in part for c in "*?["):
                    candidate = str(PurePosixPath(base) / part)
                    if self.exists(candidate):
                        following.append(candidate)
                else:
                    following += [str(PurePosixPath(base) / name) for name in self.names(base, part)]
            matches = following[:MAX_ENTRIES]
        return sorted(matches)

    def read_bytes(self, path: str, limit: int = MAX_BYTES) -> Optional[bytes]:
        """The file's bytes; None when nothing is at `path`; `Unreadable` for anything that is not a small file."""
        local = self.local(path)
        if local is None:
            raise Unreadable(path, f"is a symbolic link loop (more than {MAX_LINKS} links)", "point the link at a file")
        try:
            found = os.stat(str(local))
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        except PermissionError:
            raise Unreadable(path, "is not readable by this user", "run the check as root") from None
        except (OSError, ValueError) as error:
            raise Unreadable(path, f"cannot be read ({_reason(error)})", "check the file") from None
        if not stat.S_ISREG(found.st_mode):
            raise Unreadable(path, f"is {_kind(found.st_mode)}, not a file", "replace it with a regular file")
        if found.st_size > limit:
            raise Unreadable(
                path, f"is {found.st_size} bytes, more than the {limit} this check reads", "check the file"
            )
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        try:
            descriptor = os.open(str(local), flags)
        except PermissionError:
            raise Unreadable(path, "is not readable by this user", "run the check as root") from None
        except OSError as error:
            raise Unreadable(path, f"cannot be opened ({_reason(error)})", "check the file") from None
        try:
            opened = os.fstat(descriptor)
            if not stat.S_ISREG(opened.st_mode):  # replaced between the look and the open
                raise Unreadable(path, f"is {_kind(opened.st_mode)}, not a file", "replace it with a file")
            with os.fdopen(descriptor, "rb", closefd=False) as stream:
                data = stream.read(limit + 1)
        except OSError as error:
            raise Unreadable(path, f"cannot be read ({_reason(error)})", "check the file") from None
        finally:
            os.close(descriptor)
        if len(data) > limit:
            raise Unreadable(path, f"is more than the {limit} bytes this check reads", "check the file")
        return data

    def read_text(self, path: str, limit: int = MAX_BYTES) -> Optional[str]:
        """The file as UTF-8 text; None when nothing is at `path`; `Unreadable` otherwise (bytes named)."""
        data = self.read_bytes(path, limit)
        if data is None:
            return None
        problem = undecodable(data, "it")
        if problem is not None:
            raise Unreadable(path, problem.replace("it is", "is", 1), "save it as UTF-8")
        return data.decode("utf-8")


def _reason(error: BaseException) -> str:
    """An OSError in words without the raw errno tuple."""
    number = getattr(error, "errno", None)
    if isinstance(number, int) and number in errno.errorcode:
        return os.strerror(number).lower()
    return type(error).__name__
