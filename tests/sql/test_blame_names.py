"""Blame's op-name macros (sql/compare/schema/40_blame.sql): ``blame_op_direction`` and
``blame_forward_of`` answer without their regular expression where its answer can only be one;
on every name they give what the regular expression gives (value and type)."""

from __future__ import annotations

from msq import db

#: Names of every shape: the fast paths' (ends in .forward / .backward, no 'ward.'), the regular
#: expression's (.forward.N, .backward.N) and near misses of each, unicode and empty ones
NAMES = ["Functional.conv2d.52.forward", "Torch.matmul.0.backward", "Module.fc.Linear.forward.0",
         "Module.fc.Linear.backward.12", "Cell.net.Dense.forward.3", "Distributed.all_reduce.3.forward",
         ".forward", ".backward", "forward", "backward", "a.forward.", "a.backward.", "a.forward.x",
         "a.backward.1a", "a.forward.1.2", "a.backward.0.forward", "a.forward.0.backward.7",
         "a.forwardx", "a.xforward", "toward.the.end", "a.afterward.1", "a.forward\n",
         "a.backward.1\n", "Module.forward.layer.Linear.forward", "Tensor.__getitem__.3.forward",
         "Module.é.Linéar.backward", "Module.é.Linéar.backward.4", "名前.backward", "名前.forward.1",
         "a.forward.١", "a..forward", "a.backward.backward", "", None]


def _con():
    con = db.connect()
    db.run_schema(con)
    return con


def test_direction_is_the_regular_expressions():
    rows = _con().execute(
        "SELECT n, blame_op_direction(n) AS a, "
        "regexp_extract(n, '\\.(forward|backward)(\\.\\d+)?$', 1)::blame_direction AS b, "
        "typeof(blame_op_direction(n)) FROM (SELECT unnest(?::VARCHAR[]) AS n)", [NAMES]
    ).fetchall()
    assert len(rows) == len(NAMES)
    assert [r for r in rows if r[1] is not r[2] and r[1] != r[2]] == []
    assert {r[3] for r in rows} == {"ENUM('', 'forward', 'backward')"}
    # every answer and every path of the macro is taken
    assert {r[1] for r in rows} == {"", "forward", "backward", None}
    assert any(r[1] == "forward" and not r[0].endswith(".forward") for r in rows if r[0])


def test_forward_of_is_the_regular_expressions():
    rows = _con().execute(
        "SELECT n, blame_forward_of(n) AS a, "
        "regexp_replace(n, '\\.backward(\\.\\d+)?$', '.forward\\1') AS b "
        "FROM (SELECT unnest(?::VARCHAR[]) AS n)", [NAMES]
    ).fetchall()
    assert len(rows) == len(NAMES)
    assert [r for r in rows if r[1] != r[2] or (r[1] is None) != (r[2] is None)] == []
    changed = {r[0]: r[1] for r in rows if r[0] is not None and r[1] != r[0]}
    assert changed["Module.é.Linéar.backward"] == "Module.é.Linéar.forward"
    assert changed["Module.fc.Linear.backward.12"] == "Module.fc.Linear.forward.12"
