"""What the MySQL/MariaDB engine does not do yet, said clearly instead of failing obscurely.

The engine is being built role by role (``docs/mysql.md`` lists which work). A method of a role it
does not implement yet raises ``PendingRoleError``: a ``NotImplementedError`` that names the role
and the method, so an app on MariaDB fails at the first call that needs it, saying why.
"""

from __future__ import annotations

from conveyor.errors import ConveyorError


class PendingRoleError(ConveyorError, NotImplementedError):
    """A role of the Engine API the MySQL/MariaDB engine does not implement yet."""

    def __init__(self, role: str, method: str) -> None:
        self.role, self.method = role, method
        super().__init__(
            f"the MySQL/MariaDB engine does not implement {role}.{method} yet "
            "(docs/mysql.md lists what works); use PostgreSQL or SQLite for it meanwhile"
        )


def pending(role: str, method: str) -> PendingRoleError:
    return PendingRoleError(role, method)
