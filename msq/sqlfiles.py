"""The shipped SQL files, read without DuckDB: the compare's schema and views as texts.

:mod:`msq.db` executes them (and re-exports these names); msq/opening.py reads them in the main
thread before duckdb's Python layer is imported, and a thread runs them meanwhile. Layout: see
msq/db.py.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from msq.errors import SqlFileError

#: The view folders of a compare, in load order (sql/compare/schema is DDL, run first).
COMPARE_VIEWS: tuple[str, ...] = ("compare/match", "compare/shape", "compare/rules",
                                  "compare/reports")


def sql_root() -> Traversable:
    """The shipped ``sql/`` folder (live in an editable install, site-packages in a wheel)."""
    return resources.files("msq.sql")


@dataclass(frozen=True)
class SqlFile:
    """One SQL file: its stem (a view's name), its text, and where it came from (for errors)."""

    name: str
    text: str
    origin: str

    @property
    def body(self) -> str:
        """The statement without its trailing semicolon."""
        return self.text.rstrip().rstrip(";")


def _folder(folder: str, root: Traversable | Path | None = None) -> Traversable | Path:
    base = sql_root() if root is None else root
    for part in folder.split("/"):
        base = base / part
    return base


#: The shipped folders read so far, by (the ``sql_root`` in use, folder): shipped files do not
#: change while msq runs, and a pool worker's pairs read the same ~25 a pair (~10 ms of reading
#: and sorting each time). A stand-in ``sql_root`` (a test's) reads and keeps its own.
_SHIPPED: dict[tuple[object, str], tuple[SqlFile, ...]] = {}


def sql_files(folder: str, root: Path | None = None) -> list[SqlFile]:
    """The ``.sql`` files of ``sql/<folder>`` (or of ``root/<folder>``), in file-name order."""
    if root is not None:
        return _read_files(folder, root)
    key = (sql_root, folder)
    found = _SHIPPED.get(key)
    if found is None:
        found = _SHIPPED[key] = tuple(_read_files(folder, None))
    return list(found)


def _read_files(folder: str, root: Path | None) -> list[SqlFile]:
    where = _folder(folder, root)
    if not where.is_dir():
        return []
    prefix = f"sql/{folder}" if root is None else str(Path(root) / folder)
    files = sorted((f for f in where.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [SqlFile(f.name[: -len(".sql")], f.read_text(encoding="utf-8"),
                    f"{prefix}/{f.name}") for f in files]


def sql_file(path: str) -> SqlFile:
    """One shipped file, e.g. ``sql_file("history/record/hist_row_ops.sql")``."""
    folder, _, name = path.rpartition("/")
    found = [f for f in sql_files(folder) if f"{f.name}.sql" == name]
    if not found:
        raise SqlFileError(f"sql/{path}: missing from this msq installation; reinstall msq")
    return found[0]


def view_files(folders: Iterable[str] = COMPARE_VIEWS, user_dirs: Iterable[Path] = (),
               variants: Iterable[str] = (),
               skip: Collection[str] = ()) -> tuple[list[SqlFile], set[str]]:
    """The view files to load, and the names that come from a user's folder.

    ``sql/<folder>/*.sql`` always load; ``sql/<folder>/<variant>/*.sql`` only for the variants in
    use. Two shipped files of one name are an error; a user file replaces the shipped view of
    its name (or adds a view). ``skip``: shipped views left out (a user's file of that name
    still loads).
    """
    variants = list(variants)
    chosen: dict[str, SqlFile] = {}
    for folder in folders:
        for sub in (folder, *(f"{folder}/{v}" for v in variants)):
            for file in sql_files(sub):
                if file.name in chosen:
                    raise SqlFileError(f"{file.origin}: a view named {file.name} is also "
                                       f"defined in {chosen[file.name].origin}; rename one")
                chosen[file.name] = file
    for name in skip:
        chosen.pop(name, None)
    users: set[str] = set()
    for user_dir in user_dirs:
        for folder in folders:
            for sub in (folder, *(f"{folder}/{v}" for v in variants)):
                for file in sql_files(sub, Path(user_dir)):
                    chosen[file.name] = file
                    users.add(file.name)
    return list(chosen.values()), users


def quote_ident(name: str) -> str:
    """``name`` as a SQL identifier: double quotes, inner double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def view_statement(file: SqlFile, *, defer: bool) -> str:
    """``CREATE OR REPLACE VIEW <file.name> AS <file.body>``; ``defer``: ``WITH (DEFER_BINDING)``
    (DuckDB binds the view when a query uses it; see :func:`msq.db.create_view`)."""
    option = " WITH (DEFER_BINDING)" if defer else ""
    return f"CREATE OR REPLACE VIEW {quote_ident(file.name)}{option} AS\n{file.body}"
