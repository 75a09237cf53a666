"""The one error type of orchgen's core.

The core never prints and never exits: it raises `OrchgenError` carrying where the problem is
(file, line, field) and what it is. Only `generator.cli` turns it into one line on stderr and an
exit code.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    DIFF = 1  # --check found differences; validate found errors
    ERROR = 2  # bad input or refused operation


@dataclass
class OrchgenError(Exception):
    """An error in the user's input or environment: one line, with its file, line and field where known; exit 2."""

    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{cut(self.field, 4 * MAX_ECHO)}: " if self.field else ""
        # one line, always: a multi-line message would break `file:line: message` tooling
        return printable(mask_urls(" ".join(f"{where}{field}{self.message}".split("\n"))))


# Every message orchgen prints passes through these two (OrchgenError, validate's findings, the CLI's
# own lines): file names, keys and values in a message come from the user, and a CI log is a terminal.
_ESCAPES = {"\r": "\\r", "\t": "\\t", "\n": "\\n", "\x1b": "\\x1b"}


def printable(text: str) -> str:
    """`text` with every character a terminal would act on shown as an escape: control characters
    (ESC sequences that set the title or move the cursor, CR that overwrites the line), format
    characters (bidi overrides such as U+202E, zero-width joiners), line/paragraph separators and
    lone surrogates (a file name that is not UTF-8). Printable text, non-ASCII letters included, stays."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (ch == " "):
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif unicodedata.category(ch) == "Zs":  # a space other than " " (NBSP ...): visible as a gap
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return "".join(out)


def printable_text(text: str) -> str:
    """Multi-line text (a diff of file content) made fit for a terminal: as `printable`, line by
    line, keeping newlines and tabs (a CR, ESC or bidi override in the content is shown escaped)."""
    return "\n".join("\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n"))


# userinfo of any scheme://user:password@ (also a mistyped scheme: `htps://<token>@host`), the
# scp form's `user:token@host`, a token in a query string, and the token shapes the big Git hosts issue
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,31}://)[^/\s@'\"]*@")
_SCP_USERINFO = re.compile(r"(?<![\w.:/-])[\w.-]+:[^/\s@'\"]+@(?=[\w.-])")
_QUERY_TOKEN = re.compile(r"(?i)([?&;](?:access_token|token|private_token|password|passwd|pwd|secret|key|sig|"
                          r"signature|auth|x-amz-signature|x-amz-credential)=)[^&#\s'\"]*")
# The token shapes orchgen knows (issue 40), each with who issues it: refused in any field of
# workload.yaml (spec.load), flagged in any bundle file (validate/secrets_check.py), masked in any
# message. A prefix the issuer documents, then the token's own characters.
TOKEN_SHAPES: dict[str, str] = {
    "a Hugging Face token": r"hf_[A-Za-z0-9]{30,}",
    "a GitHub token": r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",
    "a GitLab token": r"glpat-[A-Za-z0-9_-]{20,}",
    "a Slack token": r"xox[abposr]-[A-Za-z0-9-]{10,}",
    "an AWS access key id": r"(?:AKIA|ASIA)[0-9A-Z]{16}",
}
_TOKENS = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}|glpat-[A-Za-z0-9_-]{8,}"
                     r"|xox[abposr]-[A-Za-z0-9-]{8,}|(?:AKIA|ASIA)[0-9A-Z]{16}|hf_[A-Za-z0-9]{30,})")
_SHAPES = [(what, re.compile(rf"(?<![A-Za-z0-9_-])(?:{rx})(?![A-Za-z0-9])")) for what, rx in TOKEN_SHAPES.items()]
# a URL's userinfo with a password (`scheme://user:password@`), or any userinfo of an http(s) URL
# (a token is often written as the user name); `ssh://git@host/...` names a user, no secret
_URL_PASSWORD = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,31}://[^/\s@'\"?#:]*:[^/\s@'\"?#]*@")
_HTTP_USER = re.compile(r"(?i)\bhttps?://[^/\s@'\"?#]+@")


# a password or token assigned in a value's options (`password=...` first or after `,` or a blank, as a
# Slurm option list or a connection string writes it); a path or a reference (`$VAR`, `<...>`) is none
_ASSIGNED = re.compile(r"(?i)(?:^|[,\s])(?:password|passwd|pwd|secret|token|access_token|private_token)"
                       r"=(?![$<{/]|\s|$)")


def secret_in(text: str) -> str | None:
    """What in `text` looks like a credential (a URL's user and password, a token in a query string,
    one of TOKEN_SHAPES), in words that never repeat it; None when nothing does."""
    if _URL_PASSWORD.search(text) or _HTTP_USER.search(text):
        return "a user or password in a URL"
    if _QUERY_TOKEN.search(text):
        return "a token in a URL's query string"
    if _ASSIGNED.search(text):
        return "a password or token assigned in the value"
    for what, rx in _SHAPES:
        if rx.search(text):
            return what
    return None


MAX_ECHO = 80  # characters of a user's value an error line repeats


def cut(text: str, longest: int = MAX_ECHO) -> str:
    """`text` cut to `longest` characters, saying how many more there were (a 10 MB key in an error line
    is a 10 MB line in a CI log)."""
    return text if len(text) <= longest else f"{text[:longest]}…({len(text) - longest} more)"


def mask_urls(text: str) -> str:
    """`text` with the credentials of every URL in it masked (`https://***@github.com/org/repo`),
    and any token shape GitHub, GitLab, Slack or AWS issues replaced by `***`. The one place a URL
    is made fit to print: errors end up in CI logs that strangers read."""
    text = _URL_USERINFO.sub(r"\1***@", text)
    text = _SCP_USERINFO.sub("***@", text)
    text = _QUERY_TOKEN.sub(r"\1***", text)
    return _TOKENS.sub("***", text)


def fit_to_print(text: str) -> str:
    """Both: what the CLI applies to any line built from user input."""
    return printable(mask_urls(text))
