"""The host check's TOML reader gives tomllib's answers: the same value, or an error for the same documents."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eks_hybrid_gpu.hostcheck import tomlread

ROOTS = Path(__file__).resolve().parents[1] / "fixtures" / "hostcheck" / "roots"
FIXTURE_FILES = sorted(ROOTS.rglob("*.toml"))
DOCUMENTS = [
    'a = "x\\u00e9"', "a='lit'", 'a="""\nml\\\n   x"""', "a='''\nx'''''", 'a="""x"""""', "a = [1,2,\n# c\n3,]",
    "a = {b=1, c.d=2}", "a={}", "[a]\n[a]", "[a.b]\n[a]", "[a]\nb.c=1\n[a.b]", "[a]\nb.c=1\n[a.b.d]",
    "[a.b]\nc=1\n[a]\nb.d=2", "[[a]]\nx=1\n[[a]]\nx=2", "[[a]]\n[a.b]\n[[a]]\n[a.b]", "[a]\n[[a]]", "[[a]]\n[a]",
    "a=[1]\n[[a]]", "a={b=1}\n[a.c]", "a.b=1\na.c=2", "a.b=1\na=2", "a=1\na.b=2", "x=1979-05-27T07:32:00Z",
    "x=1979-05-27 07:32:00.999999999-07:00", "x=1979-05-27", "x=07:32:00", "x=1979-02-30", "x=0x_1", "x=0xdead_beef",
    "x=0o777", "x=0b1010", "x=+1", "x=-0", "x=01", "x=1_000", "x=1__0", "x=1.5e-3", "x=1.", "x=.5", "x=inf",
    "x=-nan", "x=+inf", "x=1e5", "x=3.14_15", "x=true", "x=truex", 'x = "a\tb"', 'x="a\x01"', "# c\x01",
    "x=1 # comment", "x=1 x=2", '"a b".c = 1', "'a'.\"b\" = 1", "a . b = 1", "[ a . b ]", "[a]]", "x=", "=1",
    'x="\\q"', 'x="\\U0001F600"', 'x="\\uD800"', "x=[{a=1},{a=2}]", "[a]\nb={c=1}\n[a.b.d]", "x={a=1,}",
    "x={a=1\n}", 'x="""\\   \n  y"""', 'x = """a\\ b"""', "a\r\n=1\r\n", "a=1\r", 'x="\x7f"', "x='a\tb'",
    "x=[1,2", "x=[[1],[2]]", 'x=[1, "a"]', "[a.b.c]\n[a.b]\n", "[a]\nx.y=1\n[b]\n[a.x.z]", "x=1979-05-27T07:32",
    "\ufeffa=1", 'a="\\e"', "x=0_0", "x=1e1_0", "x={a.b=1, a.c=2}", "x={a.b=1, a={}}", "x={a={b=1}, a.c=2}",
    "[[a.b]]\n[a]\nc=1", "[a]\n[[a.b]]\n[[a.b]]\n", "a=[]\n[[a]]", "[[a]]\nb.c=1\n[[a]]\nb.c=2",
    "[[a]]\n[a.b]\nc=1\n[a.b]", "x.y.z=1\n[x.y]", "[x]\ny.z=1\ny.w=2",
]  # fmt: skip


def answer(loads: Any, error: type[Exception], text: str) -> tuple[str, Any]:
    try:
        return "value", loads(text)
    except error:
        return "error", None


def same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def assert_agrees(text: str) -> None:
    ours = answer(tomlread.loads, tomlread.TomlError, text)
    theirs = answer(tomllib.loads, tomllib.TOMLDecodeError, text)
    assert ours[0] == theirs[0], f"{text!r}: tomlread {ours}, tomllib {theirs}"
    assert same(ours[1], theirs[1]), f"{text!r}: tomlread {ours}, tomllib {theirs}"


@pytest.mark.unit
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(ROOTS)))
def test_the_recorded_configs_read_as_tomllib_reads_them(path: Path) -> None:
    assert_agrees(path.read_text(encoding="utf-8"))


@pytest.mark.unit
@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_spec_corners_read_as_tomllib_reads_them(text: str) -> None:
    assert_agrees(text)


KEYS = st.sampled_from(["a", "b", "plugins", '"io.containerd.grpc.v1.cri"', "'x.y'", "c-d", "1"])
SCALARS = st.sampled_from(
    ['"s"', "'lit'", "1", "-2", "0x1f", "1.5", "true", "false", "[]", "[1, 2]", '["a", "b",]', "{}", "{k = 1}"]
)
LINES = st.one_of(
    st.builds(lambda k, v: f"{k} = {v}", st.lists(KEYS, min_size=1, max_size=3).map(".".join), SCALARS),
    st.builds(lambda k: f"[{k}]", st.lists(KEYS, min_size=1, max_size=3).map(".".join)),
    st.builds(lambda k: f"[[{k}]]", st.lists(KEYS, min_size=1, max_size=3).map(".".join)),
    st.sampled_from(["", "# comment", "version = 2", "imports = ['/etc/containerd/conf.d/*.toml']"]),
)


@pytest.mark.unit
@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=12))
def test_generated_documents_read_as_tomllib_reads_them(lines: list[str]) -> None:
    assert_agrees("\n".join(lines))


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab=.[]{}\"'#,\n \t01xe+-_:\\u")), max_size=40))
def test_arbitrary_text_reads_as_tomllib_reads_it(text: str) -> None:
    assert_agrees(text)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    ["[" + ".".join(["a"] * 5000) + "]", "x = " + "[" * 5000 + "]" * 5000, "x = " + "{a=" * 5000 + "1" + "}" * 5000],
    ids=["5000-table-header", "5000-arrays", "5000-inline-tables"],
)
def test_nesting_beyond_the_bound_is_an_error_not_a_recursion(text: str) -> None:
    with pytest.raises(tomlread.TomlError, match=r"nests? deeper than 100 levels"):
        tomlread.loads(text)
