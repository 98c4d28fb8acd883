"""The errors a user can cause. Each carries one line that says what is wrong;
the command line prints it and exits with status 2."""


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


class BudgetError(InputError):
    """A budgets file or gate option that cannot be used."""
