"""generator.hostlist: Slurm hostlist expand / compress / count.

Tables pin the semantics (Slurm's: padding from the lower bound, order and duplicates kept), the
errors (each with what and where), and the Slurm 22.05 limits compress must respect. Hypothesis
checks the contract: expand(compress(names)) == names for any valid names. Where scontrol is
installed, real Slurm reads compress's output and expand's input too.
"""
from __future__ import annotations

import os
import re
import subprocess

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from generator.spec import hostlist
from generator.spec.hostlist import MAX_HOSTS, HostlistError, compress, count, expand
from tests._consumers import require, tool


def _n(prefix: str, numbers: range, width: int = 0, suffix: str = "") -> list[str]:
    return [f"{prefix}{i:0{width}d}{suffix}" for i in numbers]


EXPAND = [
    # the brief's example; zero padding comes from the lower bound's width
    ("gpu-[001-003],cpu1", ["gpu-001", "gpu-002", "gpu-003", "cpu1"]),
    ("n[001-010]", _n("n", range(1, 11), 3)),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[001-5]", _n("n", range(1, 6), 3)),  # upper bound narrower: still the lower's width
    ("n[1-010]", _n("n", range(1, 11))),  # upper bound wider: its padding means nothing
    ("n[0-2]", ["n0", "n1", "n2"]),
    ("n[00-02]", ["n00", "n01", "n02"]),
    ("n[98-101]", ["n98", "n99", "n100", "n101"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    # several ranges, order and duplicates kept
    ("n[1-3,5,7-8]", ["n1", "n2", "n3", "n5", "n7", "n8"]),
    ("n[5,1-2]", ["n5", "n1", "n2"]),
    ("n[1-2,1-2]", ["n1", "n2", "n1", "n2"]),
    ("n[3,2,1]", ["n3", "n2", "n1"]),
    ("n[01,2,003]", ["n01", "n2", "n003"]),  # each range keeps its own width
    # singletons, in brackets or not
    ("n[7]", ["n7"]),
    ("n[007]", ["n007"]),
    ("gpu005", ["gpu005"]),
    ("login", ["login"]),
    ("a,b,a", ["a", "b", "a"]),
    # prefixes with digits and dashes
    ("a100n-[01-04]", _n("a100n-", range(1, 5), 2)),
    ("a100n[07-08]", ["a100n07", "a100n08"]),
    ("rack1-gpu[1-2]", ["rack1-gpu1", "rack1-gpu2"]),
    ("x-1-2-[3-4]", ["x-1-2-3", "x-1-2-4"]),
    ("[1-3]", ["1", "2", "3"]),  # empty prefix
    # suffixes
    ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),
    ("[1-2]x", ["1x", "2x"]),
    # several bracket groups: a Cartesian product, the first group varying slowest
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("rack[0-1]_blade[0-2]", [f"rack{r}_blade{b}" for r in range(2) for b in range(3)]),
    ("a[1-2]b[3]c[04-05]d", ["a1b3c04d", "a1b3c05d", "a2b3c04d", "a2b3c05d"]),
    ("[1-2][1-2]", ["11", "12", "21", "22"]),
    # mixed pools in one list, in the order given
    ("cpu[1-2],gpu[01-02],cpu0,login", ["cpu1", "cpu2", "gpu01", "gpu02", "cpu0", "login"]),
    ("b2,a[1-2],b1", ["b2", "a1", "a2", "b1"]),
    # characters that mean something to str.format or %-formatting are just text
    ("n%d{0}[1-2]%s", ["n%d{0}1%s", "n%d{0}2%s"]),
]


@pytest.mark.parametrize(("expr", "names"), EXPAND)
def test_expand(expr, names):
    assert expand(expr) == names


@pytest.mark.parametrize(("expr", "names"), EXPAND)
def test_count_agrees_with_expand(expr, names):
    assert count(expr) == len(expand(expr)) == len(names)


COMPRESS = [
    (_n("gpu", range(1, 5), 3) + _n("gpu", range(9, 13), 3), "gpu[001-004,009-012]"),
    (["gpu-001", "gpu-002", "gpu-003", "cpu1"], "gpu-[001-003],cpu1"),
    # a lone number is written plainly; in a group it joins the bracket
    (["gpu005"], "gpu005"),
    (["gpu005", "gpu007"], "gpu[005,007]"),
    (["gpu005", "login", "gpu006"], "gpu005,login,gpu006"),  # only adjacent names merge
    # width changes: 9 -> 10 is a run unpadded and at width 2, not when 10 is written 010
    (["n9", "n10"], "n[9-10]"),
    (["n09", "n10"], "n[09-10]"),
    (["n99", "n100"], "n[99-100]"),
    (["n099", "n100"], "n[099-100]"),
    (["n9", "n010"], "n9,n010"),
    (["n01", "n02", "n03", "n05", "n10"], "n[01-03,05,10]"),  # 10 also renders at width 2
    (["n5", "n007"], "n5,n007"),  # no width renders both
    (["n007", "n5"], "n007,n5"),
    (["n10", "n5"], "n[10,5]"),  # unpadded: any width up to the shortest
    (["n0", "n1"], "n[0-1]"),
    (["n00", "n01"], "n[00-01]"),
    (["0", "1"], "[0-1]"),
    # the number is the LAST run of digits
    (["a100n07", "a100n08"], "a100n[07-08]"),
    (["rack1-gpu1", "rack1-gpu2"], "rack1-gpu[1-2]"),
    (["rack1-gpu1", "rack2-gpu1"], "rack1-gpu1,rack2-gpu1"),
    # order is the caller's: never sorted; duplicates kept
    (["n3", "n2", "n1"], "n[3,2,1]"),
    (["n2", "n1", "n3"], "n[2,1,3]"),
    (["n1", "n1"], "n[1,1]"),
    (["n1", "n2", "n1", "n2"], "n[1-2,1-2]"),
    (["cpu1", "gpu1", "cpu2"], "cpu1,gpu1,cpu2"),
    # names without a trailing number stay as they are; Slurm 22.05 rejects "gpu[1-2]-ib"
    (["login", "head"], "login,head"),
    (["gpu1-ib", "gpu2-ib"], "gpu1-ib,gpu2-ib"),
    (["n1", "n2", "x", "n3"], "n[1-2],x,n3"),
    # past 19 digits Slurm's strtoul may overflow: such numbers stay plain
    ([f"n{10**19 - 2 + i}" for i in range(4)],
     "n[9999999999999999998-9999999999999999999],n10000000000000000000,n10000000000000000001"),
    ([], ""),
]


@pytest.mark.parametrize(("names", "expr"), COMPRESS)
def test_compress(names, expr):
    assert compress(names) == expr
    if names:
        assert expand(expr) == names


def test_compress_takes_any_iterable():
    assert compress(f"n{i}" for i in range(3)) == "n[0-2]"
    assert compress(("a", "b")) == "a,b"


def test_round_trip_12000_nodes():
    names = expand("gpu[00001-12000]")
    assert len(names) == 12_000
    assert names[0] == "gpu00001" and names[-1] == "gpu12000"
    assert compress(names) == "gpu[00001-12000]"


def test_16384_nodes_compress_to_one_bracket():
    names = _n("node", range(1, 16_385), 5)
    assert compress(names) == "node[00001-16384]"
    assert expand(compress(names)) == names


def test_100000_nodes_round_trip_with_slurm_range_limit():
    names = _n("gpu", range(1, 100_001), 6)
    # Slurm 22.05 rejects a single range of more than 65,536 hosts ("Too many hosts in range")
    assert compress(names) == "gpu[000001-065536,065537-100000]"
    assert expand(compress(names)) == names
    assert count("gpu[000001-100000]") == 100_000


def test_mixed_pools_round_trip_keeps_order():
    descending = range(200, 100, -1)
    names = _n("gpu-h100-", range(1, 65), 3) + ["login1"] + _n("cpu", descending) + ["gpu-h100-999"]
    cpus = ",".join(map(str, descending))
    assert compress(names) == f"gpu-h100-[001-064],login1,cpu[{cpus}],gpu-h100-999"
    assert expand(compress(names)) == names


def test_compress_splits_runs_at_slurm_max_range(monkeypatch):
    monkeypatch.setattr(hostlist, "_SLURM_MAX_RANGE", 3)
    names = _n("n", range(1, 8))
    assert compress(names) == "n[1-3,4-6,7]"
    assert expand(compress(names)) == names


def test_compress_splits_brackets_at_slurm_max_ranges(monkeypatch):
    monkeypatch.setattr(hostlist, "_SLURM_MAX_RANGES", 3)
    names = ["n1", "n3", "n5", "n7", "n9"]
    assert compress(names) == "n[1,3,5],n[7,9]"
    assert expand(compress(names)) == names


ERRORS = [
    ("", "empty hostlist expression"),
    ("a,,b", "empty item (two commas in a row) at position 2"),
    ("a,b,,", "comma at the end at position 4"),
    (",a", "comma at the start at position 0"),
    ("a,", "comma at the end at position 1"),
    (",", "comma at the start at position 0"),
    ("n[1-2", "'[' is never closed at position 1"),
    ("n[1-2],m[3", "'[' is never closed at position 8"),
    ("n1-2]", "']' without a matching '[' at position 4"),
    ("n[1-2]]", "']' without a matching '[' at position 6"),
    ("n]1[", "']' without a matching '[' at position 1"),
    ("n[1[2]]", "nested '[' (the '[' at position 1 is still open; Slurm has no nested brackets: 24.11+ would read "
                "names with a '[' in them, 22.05 refuses it) at position 3"),
    ("n[]", "empty range at position 2"),
    ("n[1,]", "empty range at position 4"),
    ("n[,1]", "empty range at position 2"),
    ("n[1,,2]", "empty range at position 4"),
    ("n[5-3]", "reversed range '5-3' (5 > 3) at position 2"),
    ("n[1-2,10-9]", "reversed range '10-9' (10 > 9) at position 6"),
    ("a,n[1-2]x[3-2]", "reversed range '3-2' (3 > 2) at position 10"),
    ("n[a-b]", "invalid range 'a-b'"),
    ("n[1-2-3]", "invalid range '1-2-3'"),
    ("n[-1]", "invalid range '-1'"),
    ("n[1-]", "invalid range '1-'"),
    ("n[+1]", "invalid range '+1'"),
    ("n[0x1F]", "invalid range '0x1F'"),
    ("n[1.5]", "invalid range '1.5'"),
    ("n[1_000]", "invalid range '1_000'"),  # int() would take it
    ("n[\u0661-\u0663]", "invalid range"),  # Arabic-Indic digits: int() would take them too
    ("n[12345678901234567890]", "invalid range '12345678901234567890' (expected N or N-M, 1-19 digits 0-9)"),
    ("n[1-12345678901234567890]", "invalid range"),  # Slurm's strtoul would overflow
    ("n[1-" + "9" * 5000 + "]", "invalid range '1-99999"),  # not int()'s own ValueError
    ("a b", "whitespace at position 1"),
    ("a,\tb", "whitespace at position 2"),
    ("n[1- 2]", "whitespace at position 4"),
    ("a\n", "whitespace at position 1"),
    ("a\u00a0b", "whitespace at position 1"),
    (" a", "whitespace at position 0"),
]

# expand only: count builds nothing, so it has no limit
LIMIT_ERRORS = [
    ("n[0-999999999999]", "more than MAX_HOSTS=1,000,000 names "
     "(0 before this item, which names 1,000,000,000,000) at position 0"),
    ("a,b,n[1-999999]", "more than MAX_HOSTS=1,000,000 names "
     "(2 before this item, which names 999,999) at position 4"),
    ("r[1-1000]n[1-1001]", "which names 1,001,000"),  # a product, counted before it is built
]


@pytest.mark.parametrize(("expr", "message"), ERRORS + LIMIT_ERRORS)
def test_expand_errors(expr, message):
    with pytest.raises(HostlistError) as info:
        expand(expr)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("expr", "message"), ERRORS)
def test_count_errors_alike(expr, message):
    with pytest.raises(HostlistError, match=re.escape(message)):
        count(expr)


def test_error_quotes_the_expression_around_the_spot():
    expr = ",".join(_n("node", range(100_000))) + ",,x"
    message = str(pytest.raises(HostlistError, expand, expr).value)
    assert f"position {len(expr) - 2}" in message
    assert "node99999,,x" in message
    assert len(message) < 150  # a window, not a megabyte of hostlist


def test_max_hosts_counts_plain_names_and_brackets(monkeypatch):
    monkeypatch.setattr(hostlist, "MAX_HOSTS", 10)
    assert len(expand("n[1-10]")) == 10
    assert len(expand("n[1-5],a,b,c,d,e")) == 10
    for over in ("n[1-11]", "n[1-5],n[6-10],x", "x,n[1-10]", "a,b,c,d,e,f,g,h,i,j,k", "r[1-2]n[1-6]"):
        with pytest.raises(HostlistError, match="more than MAX_HOSTS=10 names"):
            expand(over)


def test_count_has_no_limit():
    assert count("n[0-999999999999]") == 10**12
    assert count("r[1-1000]n[1-1001],x") == 1_001_001
    assert count("a,b[1-3,5],c[01-02]d[1-3]") == 1 + 4 + 6
    assert MAX_HOSTS == 1_000_000


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([""], "invalid host name '' at index 0"),
        (["ok", "a b"], "invalid host name 'a b' at index 1"),
        (["a,b"], "invalid host name 'a,b' at index 0"),
        (["n1", "n[2]"], "invalid host name 'n[2]' at index 1"),
        (["a]"], "invalid host name 'a]'"),
        (["tab\t"], "invalid host name 'tab\\t'"),
        (["a", "b", "c\n"], "index 2"),
    ],
)
def test_compress_rejects_invalid_names(names, message):
    with pytest.raises(HostlistError) as info:
        compress(names)
    assert message in str(info.value)


def test_compress_rejects_non_strings():
    with pytest.raises(TypeError):
        compress(["n1", 2])


# --- properties --------------------------------------------------------------------------------

_PREFIX = st.text(alphabet="ab-_.%{}0123456789", max_size=6)  # digits and dashes included
_SUFFIX = st.sampled_from(["", "", "", "-ib", "x", ".a1b"])
_BARE = st.text(alphabet="abc-_.", min_size=1, max_size=5)  # no digits at all


@st.composite
def _run(draw):
    """A run of names, usually consecutive, in any direction, width and padding."""
    prefix, suffix = draw(_PREFIX), draw(_SUFFIX)
    start = draw(st.one_of(st.integers(0, 120), st.integers(0, 10**6), st.integers(10**19 - 3, 10**19 + 3)))
    step = draw(st.sampled_from([1, 1, 1, 2, -1]))
    width = draw(st.integers(0, 7))
    numbers = range(start, max(-1, start + step * draw(st.integers(1, 25))), step)
    return _n(prefix, numbers, width, suffix)


_RUNS = st.lists(st.one_of(_run(), _BARE.map(lambda name: [name])), min_size=1, max_size=8).map(
    lambda chunks: [name for chunk in chunks for name in chunk])
# Few names, many repeats and every padding trap: duplicates, width changes, lone zeros.
_TRAPS = st.lists(st.sampled_from(["n0", "n00", "n1", "n01", "n001", "n9", "n09", "n10", "n010", "n11",
                                   "n99", "n100", "n0100", "1", "01", "10", "x", "x1-ib", "n"]), min_size=1)
_NAMES = st.one_of(_RUNS, _RUNS.flatmap(st.permutations), _TRAPS)


def _assert_slurm_22_05_parses(expr: str) -> None:
    """The shape Slurm 22.05's _hostlist_create_bracketed takes from compress."""
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", expr):
        m = re.fullmatch(r"([^\[\],]*)(?:\[([0-9,-]+)\])?", item)
        assert m, f"{item!r}: one bracket at most, and nothing after it"
        if m[2]:
            ranges = m[2].split(",")
            assert len(ranges) > 1 or "-" in ranges[0], f"{item!r}: a lone number in brackets"
            assert not re.search(r"[0-9]$", m[1]), f"{item!r}: the prefix swallowed digits of the number"
            for lo, _, hi in (r.partition("-") for r in ranges):
                assert len(lo) <= 19 and len(hi) <= 19, f"{item!r}: beyond strtoul"
                assert not hi or 0 <= int(hi) - int(lo) < 65_536, f"{item!r}: over MAX_RANGE"


@settings(max_examples=400, deadline=None)  # no deadline: CI machines are shared and slow
@given(_NAMES)
@example(["n9", "n10", "n010", "n11"])
@example(["n09", "n10", "n9", "n10"])
@example(["1", "01", "001", "1"])
def test_compress_round_trips(names):
    expr = compress(names)
    assert expand(expr) == names
    assert count(expr) == len(names)
    assert compress(expand(expr)) == expr  # stable: compressing the expansion changes nothing
    _assert_slurm_22_05_parses(expr)


@settings(deadline=None)
@given(st.text(alphabet="ab01-[], \t", max_size=16))
@example("a[1-2]b[3]")
def test_expand_fails_only_with_hostlist_error(expr):
    try:
        names = expand(expr)
    except HostlistError:
        with pytest.raises(HostlistError):
            count(expr)
        return
    assert count(expr) == len(names) > 0
    if all(re.fullmatch(r"[^\[\],]+", name) for name in names):  # hostlists of valid names
        assert expand(compress(names)) == names


# --- real Slurm: `scontrol show hostnames` runs Slurm's own hostlist parser -----------------------

@pytest.fixture(scope="module")
def slurm_expand(tmp_path_factory):
    """Slurm's expansion of a hostlist, or None where Slurm rejects it (needs only a slurm.conf)."""
    scontrol = tool("scontrol")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}

    def run(expr: str) -> list[str] | None:
        proc = subprocess.run([scontrol, "show", "hostnames", "--", expr],  # "--": expr may start with "-"
                              capture_output=True, text=True, env=env, timeout=60)
        return None if proc.returncode or "Invalid hostlist" in proc.stderr else proc.stdout.split()

    require(run("n[1-2]") == ["n1", "n2"], "scontrol cannot expand a hostlist here")
    return run


def test_slurm_reads_compress_output(slurm_expand):
    lists = [names for names, _ in COMPRESS if names]
    lists += [_n("gpu", range(1, 100_001), 6), _n("node", range(1, 16_385), 5)]  # 65,536-host range limit
    # compressed lists joined by commas are one hostlist: one scontrol run checks them all
    assert slurm_expand(",".join(map(compress, lists))) == [name for names in lists for name in names]


def _slurm_can_name(name: str) -> bool:
    # Slurm keeps a name's trailing number in an unsigned long: past 2**64 - 1 it changes the name
    # however it is written, even plainly ("n21000000000000000000" comes back as n18446744073709551615).
    digits = re.search(r"[0-9]*$", name)[0]
    return not digits or int(digits) < 2**64


@settings(max_examples=40, deadline=None)
@given(st.lists(_NAMES.map(lambda names: [n for n in names if _slurm_can_name(n)]).filter(bool),
                min_size=1, max_size=20))
def test_slurm_reads_compress_output_for_any_names(slurm_expand, lists):
    assert slurm_expand(",".join(map(compress, lists))) == [name for names in lists for name in names]


def _text_after_last_bracket(expr: str) -> bool:
    return re.search(r"\][^,\[\]]+(,|$)", expr) is not None


@pytest.mark.parametrize(("expr", "names"), EXPAND)
def test_expand_agrees_with_slurm(slurm_expand, expr, names):
    if _text_after_last_bracket(expr):
        assert slurm_expand(expr) is None  # Slurm 22.05 rejects "gpu[1-2]-ib"; expand is more liberal
    else:
        assert slurm_expand(expr) == names


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab01-[],", min_size=1, max_size=14))
def test_expand_agrees_with_slurm_where_both_accept(slurm_expand, expr):
    try:
        names = expand(expr)
    except HostlistError:
        return  # stricter than Slurm on purpose (empty items, stray commas, ...)
    assert slurm_expand(expr) == (None if _text_after_last_bracket(expr) else names)


# --- every node-list form, in every Slurm the tests run (issue 37) ---------------------------------
# (expression, what 22.05 reads, what 24.11 and 26.05 read): None where that Slurm refuses it. Measured with
# `scontrol show hostnames` on Debian's 22.05.8, trixie's 24.11.5 and forky's 26.05.5.
FORMS = [
    ("gpu[01-03,7],cpu1", ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"], "same"),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"], "same"),
    # three and four brackets: the last fastest, then the first, the second ..., the one before the last slowest
    ("a[1-2]b[1-2]c[1-2]", ["a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"], "same"),
    ("a[1-3]b[1-2]c[1-2]", ["a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a3b1c1", "a3b1c2",
                            "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2", "a3b2c1", "a3b2c2"], "same"),
    ("a[1-2]b[1-2]c[1-2]d[1-2]", [f"a{a}b{b}c{c}d{d}" for c in (1, 2) for b in (1, 2) for a in (1, 2)
                                  for d in (1, 2)], "same"),
    ("n[1-2]-[3-4]", ["n1-3", "n1-4", "n2-3", "n2-4"], "same"),
    # text after the last bracket: 22.05 refuses it, 24.11+ read it (orchgen reads it as 24.11 does)
    ("n[1-3]-ib", None, ["n1-ib", "n2-ib", "n3-ib"]),
    ("x[1-2]y[1-2]z", None, ["x1y1z", "x1y2z", "x2y1z", "x2y2z"]),
]
# nested brackets: 22.05 refuses them, 24.11+ expand the inner bracket into names that keep the outer one
NESTED = [("n[1-2,[3-4]]", ["n[1-2,3]", "n[1-2,4]"]), ("n[[1-2]]", ["n[1]", "n[2]"])]


def _scontrol_in(suite: str, tmp_path):
    """`scontrol show hostnames` of `suite`'s Slurm: the host's (bookworm) or its cached chroot's."""
    from tests.slurmharness import require_slurm
    from tests.slurmharness.chroot import ensure_chroot

    require_slurm(suite)
    conf = "ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
    if suite == "bookworm":
        (tmp_path / "slurm.conf").write_text(conf)
        prefix, path = [], str(tmp_path / "slurm.conf")
    else:
        root = ensure_chroot(suite)  # built here when no other test has yet (a fresh machine: CI)
        folder = root / "tmp" / f"hostlist-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "slurm.conf").write_text(conf)
        prefix, path = ["chroot", str(root)], f"/tmp/{folder.name}/slurm.conf"

    def run(expr: str) -> list[str] | None:
        proc = subprocess.run([*prefix, "env", f"SLURM_CONF={path}", "scontrol", "show", "hostnames", "--", expr],
                              capture_output=True, text=True, timeout=60)
        return None if proc.returncode or "Invalid hostlist" in proc.stderr else proc.stdout.split()
    return run


@pytest.mark.parametrize("suite", ["bookworm", "trixie", "forky"])
def test_every_node_list_form_reads_as_in_each_slurm(suite, tmp_path):
    run = _scontrol_in(suite, tmp_path)
    for expr, old, new in FORMS:
        slurm = old if suite == "bookworm" else (old if new == "same" else new)
        assert run(expr) == slurm, expr
        assert expand(expr) == (old if new == "same" else new), expr  # orchgen reads what 24.11+ read
    for expr, names in NESTED:
        assert run(expr) == (None if suite == "bookworm" else names), expr
        with pytest.raises(HostlistError, match="no nested brackets"):
            expand(expr)
