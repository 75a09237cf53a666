"""The signals orchgen traps (issue 40): a Ctrl-C, a CI runner's SIGTERM or a closed terminal's SIGHUP
ends orchgen the one way every other failure does: each cleanup on the way out runs (a staged bundle,
a temporary file), then one line on stderr and exit 2. Used by the entry point (generator/entry.py),
the CLI and the bundle writer (`held` around a swap).

Kept free of imports beyond a few of the standard library's: the entry point uses it before everything."""
from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

_TRAPPED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """Raised where the program is when a trapped signal arrives. A BaseException, as KeyboardInterrupt
    is: no `except Exception` swallows it, and every `finally` and `except BaseException` cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


def _raise(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def trap() -> None:
    """Turn each trapped signal into Stopped, except one the parent ignores (`nohup` ignores SIGHUP, a
    shell's background job SIGINT): that stays ignored. Only the main thread can set handlers."""
    for sig in _TRAPPED:
        try:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, _raise)
        except (ValueError, OSError):
            pass


@contextlib.contextmanager
def held() -> Iterator[None]:
    """The trapped signals held back (delivered when the block ends) around steps that must not be cut
    apart, such as the two renames that swap a bundle where the filesystem has no atomic exchange."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _TRAPPED)
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def quiet() -> None:
    """Ignore the trapped signals from here on (the last line is being said: a second Ctrl-C must not
    interrupt it)."""
    for sig in _TRAPPED:
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):
            pass


def stopped(exc: Stopped) -> None:
    """The one line and exit 2 for a trapped signal (stderr failing is ignored: the exit code tells)."""
    quiet()
    try:
        sys.stderr.write(f"orchgen: stopped by {exc.name}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(2)
