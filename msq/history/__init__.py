"""The history database: every compare kept in a DuckDB file, for ``msq sql`` and ``msq runs``.

* :mod:`msq.history.store` — where the file is, waiting for its lock, the check before a compare
* :mod:`msq.history.schema` — schema version, creation, migrations
* :mod:`msq.history.recorder` — recording one compare (:class:`Recorder`, a thread)
* :mod:`msq.history.query` — reading it back: :func:`query`, :func:`export`

The tables and views are documented in docs/schema.md; rendering a result as text is the CLI's
job (msq/console.py).
"""

from msq.history.query import (
    Table,
    check_output,
    connect_read,
    export,
    export_text,
    query,
    runs_sql,
    write_text,
)
from msq.history.recorder import (
    ALIAS,
    RecordContext,
    Recorder,
    compare_row,
    parse_rank_step,
    start_recording,
)
from msq.history.schema import SCHEMA_VERSION
from msq.history.store import DB_FILE, check_target, resolve_db_path

__all__ = [
    "ALIAS",
    "DB_FILE",
    "SCHEMA_VERSION",
    "RecordContext",
    "Recorder",
    "Table",
    "check_output",
    "check_target",
    "compare_row",
    "connect_read",
    "export",
    "export_text",
    "parse_rank_step",
    "query",
    "resolve_db_path",
    "runs_sql",
    "start_recording",
    "write_text",
]
