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


def scan(text: str) -> Iterator[tuple[int, str]]:
    """(line, what) for everything in `text` that looks like key material."""
    for number, line in enumerate(text.splitlines(), 1):
        if PEM.search(line):
            yield number, "a PEM block (private key or certificate)"
        if AWS_KEY.search(line):
            yield number, "an AWS access key id"
        elif what := secret_in(line):  # a token shape (errors.TOKEN_SHAPES), a URL's user and password
            yield number, what
        m = ASSIGNED.search(line)
        if m and not line.lstrip().startswith(("#", "//")) and not PLACEHOLDER.match(m.group(2)) \
                and not _prose(m.group(2)):
            yield number, f"a literal {m.group(1)} value"
        for blob in BLOB.findall(line):
            if _looks_random(blob):
                yield number, f"a {len(blob)}-character base64 blob (key-like)"
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
