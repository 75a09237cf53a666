"""Key material that must never sit in a bundle (bundles go into git and CI logs).

A bundle references secrets (a Kubernetes Secret's name, Pulumi secret config, a README step that
says how to make the munge key) and never contains one. This finds what looks like one: PEM blocks,
AWS access keys, `password:` / `StoragePass=` / `AccountingStoragePass=` / `JobCompPass=` / `token:`
with a literal value, and long base64 blobs of the kind a munge key or a JWT key is (>= 32 bytes);
and what spec.load refuses in workload.yaml
(errors.secret_in): the token shapes of Hugging Face, GitHub, GitLab, Slack and AWS, a URL's user and
password, a token in a URL's query string.
"""
from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Iterator

from ..errors import secret_in

PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----")
AWS_KEY = re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[0-9A-Z]{16}\b")
ASSIGNED = re.compile(
    r"(?i)\b(password|passwd|(?:accounting)?storagepass|jobcomppass|secret|token|api[_-]?key|"
    r"secret[_-]?access[_-]?key|jwt[_-]?key)"
    r"\"?\s*(?::|=)[ \t]*(\S.*?)\s*$")
BLOB = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{43,}={0,2}(?![A-Za-z0-9+/=_-])")
# Values that name or point at a secret rather than being one.
PLACEHOLDER = re.compile(r"""(?ix)^(
    ["']{2} | null | ~ | true | false | none | \|-? | >-? | \{\} | \[\]
  | [$<{(] .* | .* (REPLACE|CHANGE[-_ ]?ME|YOUR[-_ ]|EXAMPLE|xxx|\.\.\.) .*
  | [a-z0-9_.-]*(ref|name|file|path|secret)["']?[,}]?
)$""")


# What a line must hold (lower-cased) for a pattern to match in it: PEM, AWS_KEY, ASSIGNED (and errors._ASSIGNED), the URL
# patterns of errors.secret_in, and each token shape of errors.TOKEN_SHAPES (by its name; a shape not
# listed here is searched for as a pattern instead).
_LITERALS = ("-----begin", "akia", "asia", "aroa", "aida", "passw", "pwd", "storagepass", "comppass", "secret", "token", "apikey",
             "api_key", "api-key", "jwtkey", "jwt_key", "jwt-key", "://")
_SHAPE_LITERALS = {
    "a Hugging Face token": ("hf_",),
    "a GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "a GitLab token": ("glpat-",),
    "a Slack token": ("xox",),
    "an AWS access key id": ("akia", "asia"),
}


def _prefilter() -> tuple[tuple[str, ...], tuple[re.Pattern[str], ...]]:
    from .. import errors

    literals = set(_LITERALS)
    patterns = [BLOB, errors._QUERY_TOKEN]  # no literal: searched for, multi-line
    for what, rx in errors._SHAPES:
        if what in _SHAPE_LITERALS:
            literals.update(_SHAPE_LITERALS[what])
        else:
            patterns.append(rx)
    return tuple(sorted(literals)), tuple(re.compile(rx.pattern, rx.flags | re.MULTILINE) for rx in patterns)


_PREFILTER = _prefilter()


def _candidates(lines: list[str]) -> list[int]:
    """The 0-based indexes of the lines a pattern can match in (cProfile, issue 41: searching every line
    with every pattern was 357,465 searches, ~10% of a 16,384-GPU bundle's `validate`). The lines are
    joined with newlines and searched as one text: for the literals a line must hold (ASCII text, where
    lower-casing is what IGNORECASE matches; any other text has every line checked), and for the
    patterns without one, MULTILINE, so `$` is a line's end (no pattern's lookaround or character class
    takes a newline for a line's own character): a match within a line is a match in the joined text at
    the same place or lies inside an earlier match, and every line a match touches is a candidate."""
    joined = "\n".join(lines)
    if not joined.isascii():
        return list(range(len(lines)))
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    hits: set[int] = set()
    literals, patterns = _PREFILTER
    lowered = joined.lower()
    for literal in literals:
        at = lowered.find(literal)
        while at != -1:
            hits.add(bisect.bisect_right(starts, at) - 1)
            at = lowered.find(literal, at + 1)
    for rx in patterns:
        for m in rx.finditer(joined):
            first = bisect.bisect_right(starts, m.start()) - 1
            last = bisect.bisect_right(starts, max(m.end() - 1, m.start())) - 1
            hits.update(range(first, last + 1))
    return sorted(hits)


# An OpenPGP public key, ASCII-armored (RFC 4880 section 6.2): the key that signs a site's apt repository
# (options.slurm.repository, bringup/slurm-repo/orchgen-slurm.asc) is public by design, so its base64 lines are no
# key material; its armor lines are no PEM block. A private key block is still one.
PGP_PUBLIC = ("-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----END PGP PUBLIC KEY BLOCK-----")


def _public_key_lines(lines: list[str]) -> set[int]:
    inside: set[int] = set()
    start = None
    for i, line in enumerate(lines):
        if line.strip() == PGP_PUBLIC[0]:
            start = i
        elif line.strip() == PGP_PUBLIC[1] and start is not None:
            inside.update(range(start, i + 1))
            start = None
    return inside


def scan(text: str) -> Iterator[tuple[int, str]]:
    """(line, what) for everything in `text` that looks like key material."""
    lines = text.splitlines()
    public = _public_key_lines(lines) if PGP_PUBLIC[0] in text else set()
    for index in _candidates(lines):
        for what in line_findings(lines[index]):
            if index in public and (what.startswith("a PEM block") or what.endswith("base64 blob (key-like)")):
                continue
            yield index + 1, what


def line_findings(line: str) -> Iterator[str]:
    """What in one line looks like key material."""
    if PEM.search(line):
        yield "a PEM block (private key or certificate)"
    if AWS_KEY.search(line):
        yield "an AWS access key id"
    elif what := secret_in(line):  # a token shape (errors.TOKEN_SHAPES), a URL's user and password
        yield what
    m = ASSIGNED.search(line)
    if m and not line.lstrip().startswith(("#", "//")) and not PLACEHOLDER.match(m.group(2)) \
            and not _prose(m.group(2)):
        yield f"a literal {m.group(1)} value"
    for blob in BLOB.findall(line):
        if _looks_random(blob):
            yield f"a {len(blob)}-character base64 blob (key-like)"
            break


def _prose(value: str) -> bool:
    """`password: the one you chose` in a README is a sentence, not a password."""
    return len(value.split()) >= 3 or value.startswith("`")


def _looks_random(blob: str) -> bool:
    # Hex digests (image digests) and path-like words are not keys; a key mixes cases and digits.
    if not (re.search(r"[A-Z]", blob) and re.search(r"[a-z]", blob) and re.search(r"[0-9]", blob)):
        return False
    try:
        return len(base64.b64decode(blob + "=" * (-len(blob) % 4), validate=False)) >= 32
    except (binascii.Error, ValueError):
        return False
