"""Reading the TOML files users write (policies, budgets): every failure is
one line naming the file, raised as the caller's error class."""

from __future__ import annotations


def read_toml(path: str, what: str, error: type[Exception]) -> dict:
    import tomllib  # only when a file is given: start-up stays lean

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise error(f"{what} file not found: {path}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not valid TOML: not UTF-8 text") from None
    except RecursionError:
        raise error(f"{what} {path} is not valid TOML: nested too deeply") from None
