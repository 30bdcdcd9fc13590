"""The one error type for mistakes a user can fix (bad argument, existing run dir, unreadable file)."""


class RunError(ValueError):
    """A user error: its message is one line that says what to do. The CLI prints it and exits 2."""
