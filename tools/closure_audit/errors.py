"""The errors a user can cause, and the exit statuses. Each error carries one
line that says what is wrong; the command line prints it and exits with
Exit.USAGE."""

from enum import IntEnum


class Exit(IntEnum):
    """The exit statuses every command documents."""

    OK = 0  # nothing failed
    FAILED = 1  # a finding of severity error, or (why-build) something to build
    USAGE = 2  # bad input or arguments, an unreadable cache: one line on stderr
    INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


class InputError(Exception):
    """Base class: bad input, never a bug."""


class UsageError(InputError):
    """Wrong arguments."""


class TargetError(InputError):
    """A target that cannot be audited."""


class PolicyError(InputError):
    """A policy that cannot be used; the message names the file and the key."""


class ClosureError(InputError):
    """A closure that cannot be read."""


class DerivationError(ClosureError):
    """A target that is not a derivation, or a .drv file that cannot be read."""


class BudgetError(InputError):
    """A budgets file or gate option that cannot be used."""
