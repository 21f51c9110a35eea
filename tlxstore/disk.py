"""A full disk, told apart from other failures wherever tlxdb writes (the run log, the store, the
output folder): ENOSPC, a quota (EDQUOT), or a file-size limit (EFBIG, RLIMIT_FSIZE), and DuckDB's
messages for the same. A run that meets one stops as interrupted, resumable once there is room."""

from __future__ import annotations

import errno

from tlxstore.errors import DiskFullError

_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# how DuckDB words the same errors (it reports the OS's strerror inside its own message)
_SIGNS = ("No space left on device", "Disk quota exceeded", "File too large")


def disk_full(exc: BaseException, where: str = "") -> DiskFullError | None:
    """A DiskFullError (one line naming `where` and the cause) when `exc` is a full disk, else
    None. An exception already a DiskFullError is returned as it is."""
    if isinstance(exc, DiskFullError):
        return exc
    if isinstance(exc, OSError) and exc.errno in _ERRNOS:
        cause = exc.strerror or str(exc)
    else:
        cause = next((sign for sign in _SIGNS if sign in str(exc)), "")
        if not cause:
            return None
    place = f" writing {where}" if where else ""
    return DiskFullError(f"the disk is full{place} ({cause})")
