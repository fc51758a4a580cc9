"""The history's names held as a hash table for a directory compare's driver
(msq/history/_names.c, used by msq.history.run_recorder._Names).

Its lookups are checked against a Python dict of the same names, over Arrow arrays as the driver
gets them (sliced, with NULLs, empty and multi-byte names, names that share their first bytes,
int32 and int64 offsets), across the table's growth and after the newest names are dropped
again (a rolled-back transaction's); and ``_Names`` keys the same pairs alike with it and with
Arrow's lookup alone, a dropped transaction's restore included.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from msq import cext
from msq.history.run_recorder import _Names

_module = cext.load("msq.history._names")
pytestmark = pytest.mark.skipif(_module is None, reason=cext.why_not("msq.history._names"))


def _lookup(index, array: pa.Array) -> list[int]:
    validity, offsets, data = array.buffers()
    large = pa.types.is_large_string(array.type)
    found, valid = index.lookup(validity, offsets, data, array.offset, len(array), large)
    keys = np.frombuffer(found, np.int32).tolist()
    # the validity bitmap: set where a key was found, None when every string was
    bits = (np.unpackbits(np.frombuffer(valid, np.uint8), bitorder="little")[:len(keys)].tolist()
            if valid is not None else [1] * len(keys))
    assert bits == [int(k >= 0) for k in keys]
    return keys


def _add(index, array: pa.Array, ids: list[int]) -> None:
    validity, offsets, data = array.buffers()
    large = pa.types.is_large_string(array.type)
    index.add(validity, offsets, data, array.offset, len(array), large,
              np.array(ids, np.int32))


def _names(count: int, seed: int) -> list[str]:
    """Names of every length around the hash's 8-byte steps, sharing long prefixes."""
    rng = random.Random(seed)
    stems = ["Functional.linear", "Tensor.add", "Distributed.all_reduce", "é", "a", ""]
    out = set()
    while len(out) < count:
        out.add(f"{rng.choice(stems)}.{rng.randrange(10 ** rng.randrange(1, 6))}"
                f"{'.forward.output.0' * rng.randrange(3)}"[: rng.randrange(0, 60)])
    return sorted(out)


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()], ids=["string", "large"])
def test_lookups_give_each_held_names_key_and_minus_one_else(kind):
    held = _names(3000, 1)
    keys = {name: 7 + 3 * i for i, name in enumerate(held)}
    index = _module.NameIndex()
    for start in range(0, len(held), 700):  # added in parts: the table grows several times
        part = held[start:start + 700]
        _add(index, pa.array(part, kind), [keys[n] for n in part])
    assert len(index) == len(held)
    others = [n + "x" for n in held[:500]] + ["", "Functional.linear"]
    probe = held[::-1] + others + [None] * 5
    random.Random(2).shuffle(probe)
    array = pa.array(["pad", *probe, "pad"], kind).slice(1, len(probe))  # an offset, NULLs
    assert _lookup(index, array) == [keys.get(n, -1) if n is not None else -1 for n in probe]


def test_names_added_with_nulls_skip_them_and_an_empty_name_is_a_name():
    index = _module.NameIndex()
    _add(index, pa.array(["a", None, "", "b"]), [1, 0, 2, 3])
    assert len(index) == 3
    assert _lookup(index, pa.array(["", "b", None, "a", "c"])) == [2, 3, -1, 1, -1]
    assert _lookup(index, pa.array([], pa.string())) == []


def test_truncate_drops_the_newest_names_alone():
    index = _module.NameIndex()
    first, later = _names(200, 3), [f"new.{i}" for i in range(300)]
    _add(index, pa.array(first), list(range(1, 201)))
    _add(index, pa.array(later), list(range(201, 501)))
    index.truncate(200)
    assert len(index) == 200
    assert _lookup(index, pa.array(first + later)) == list(range(1, 201)) + [-1] * 300
    _add(index, pa.array(later[::-1]), list(range(201, 501)))  # added again, other keys
    assert _lookup(index, pa.array(later)) == list(range(500, 200, -1))
    with pytest.raises(ValueError):
        index.truncate(501)


def test_buffers_shorter_than_the_array_are_refused():
    index = _module.NameIndex()
    array = pa.array(["a", "b"])
    validity, offsets, data = array.buffers()
    with pytest.raises(ValueError, match="shorter"):
        index.lookup(validity, offsets, data, 0, 5, False)


def _pair(rows: list[tuple[str | None, ...]]) -> pa.Table:
    return pa.table({"out_seq": pa.array(range(len(rows)), pa.int64()),
                     **{c: pa.array([r[i] for r in rows], pa.string())
                        for i, c in enumerate(_Names.COLUMNS)}})


def test_names_key_pairs_alike_with_the_table_and_with_arrow_a_restore_included():
    """A run's pairs keyed by _Names with the hash table and with Arrow's lookup alone: the same
    keys and new names, also after a dropped transaction's names are restored away (the table
    drops its newest names) and the next pair brings names of its own."""
    known = _names(400, 4)
    pairs = [[(n, n + ".out", None if i % 3 else n) for i, n in enumerate(known[:300])],
             [(n, "fresh." + n, n) for n in known[200:]],
             [("dropped", None, "again." + n) for n in known[:50]],
             [(n, "other." + n, None) for n in known[100:160]]]
    got = []
    for index in (True, False):
        names = _Names.of(pa.array(known[:100]), pa.array(range(1, 101), pa.int32()), 100,
                          index=index)
        keyed = []
        for i, rows in enumerate(pairs):
            saved = names.state()
            rows_keyed, new = names.key(_pair(rows))
            keyed.append((rows_keyed.to_pylist(), None if new is None else new.to_pylist()))
            if i == 2:  # this pair's transaction is rolled back
                names.restore(saved)
        if index:
            assert names.index is not None
            assert len(names.index) == sum(len(part) for part in names.names)
        got.append(keyed)
    assert got[0] == got[1]
    assert got[0][3][1] is not None and got[0][3][1][0]["name_id"] == got[0][2][1][0]["name_id"]


def test_terms_and_class_texts_key_pairs_alike_with_the_table_and_with_arrow():
    """_Terms and _Classes probe their texts' places in the same hash table (by place): the
    same keys and new terms and classes as with Arrow's lookup alone, also after a dropped
    transaction's are restored away (the table drops its newest texts) and the next pair
    brings texts of its own."""
    from msq.history.run_recorder import _Classes, _place_index, _Terms

    columns = ("kind", "verdict")
    pairs = [[("matched", "pass"), ("matched", "pass"), ("npu_only", None)],
             [("matched", "fail"), ("mapped", "fail"), (None, "pass")],
             [("dropped", "gone"), ("matched", "gone")],
             [("matched", "warning"), ("npu_only", "warning"), ("matched", "pass")]]
    got = []
    for index in (True, False):
        terms = _Terms.__new__(_Terms)
        terms.terms = pa.array(["pass"])
        terms.index = _place_index(terms.terms) if index else None
        classes = _Classes.__new__(_Classes)
        classes.table, classes.columns = "classes", columns
        classes.keys, classes.texts = {}, pa.array(["matched"])
        classes.group = None  # the texts' lookups (the grouping pass: test_group_rows_*)
        classes.index = _place_index(classes.texts) if index else None
        made = []
        for i, rows in enumerate(pairs):
            table = pa.table({"out_seq": pa.array(range(len(rows)), pa.int64()),
                              **{c: pa.array([r[k] for r in rows], pa.string())
                                 for k, c in enumerate(columns)}})
            saved = terms.state(), classes.state()
            keyed, new_terms = terms.key(table, columns)
            data, new_classes = classes.key(table)
            made.append([t.to_pylist() if t is not None else None
                         for t in (keyed, new_terms, data, new_classes)])
            if i == 2:  # this pair's transaction is rolled back
                terms.restore(saved[0])
                classes.restore(saved[1])
                if index:
                    assert len(terms.index) == len(terms.terms)
                    assert len(classes.index) == len(classes.texts)
        got.append(made)
    assert got[0] == got[1]
    assert got[0][3][1] is not None and got[0][3][3] is not None


def _grouped(table: pa.Table, columns: tuple[str, ...]) -> tuple[list[int], list[int]]:
    """group_rows over ``table``'s batches as _Classes._key_grouped gives them."""
    from msq.history.run_recorder import _group_spec

    batches = [(b.num_rows, tuple(_group_spec(b.column(c), c) for c in columns))
               for b in table.select(list(columns)).to_batches() if b.num_rows]
    which, heads = _module.group_rows(batches)
    return np.frombuffer(which, np.int32).tolist(), np.frombuffer(heads, np.int64).tolist()


def _reference(rows: list[tuple]) -> tuple[list[int], list[int]]:
    """Each row's combination numbered in the order of its first row, and each one's first."""
    seen: dict[tuple, int] = {}
    heads = []
    for i, row in enumerate(rows):
        if row not in seen:
            seen[row] = len(seen)
            heads.append(i)
    return [seen[row] for row in rows], heads


def test_group_rows_numbers_each_combination_in_the_order_of_its_first_row():
    """group_rows (the classes' one pass in C) against a Python dict of the rows' tuples: texts
    with NULLs, empty and multi-byte ones (plain, large, sliced, dictionary-encoded with a
    dictionary of its own in each batch, unused and repeated entries, uint8 and int32 indices),
    booleans and integers of 1, 2 and 4 bytes with NULLs and negatives; in one batch and in
    several (an empty one among them). A NULL is equal to a NULL alone, a text by its bytes."""
    rng = random.Random(7)
    texts = [None, "", "a", "ab", "abc", "abcd", "torch.float32", "torch.float16", "é", "ü",
             "Need double check api accuracy.", "x" * 40]
    n = 3000
    # runs of equal rows, as a pair's rows come, and rows that alternate
    rows = []
    while len(rows) < n:
        row = (rng.choice(texts), rng.choice(texts[:4]), rng.choice([None, False, True]),
               rng.choice([None, 0, 2, -3, 2 ** 14]), rng.choice([None, -1, 5]),
               rng.choice(texts), rng.choice(texts[:3]))
        rows += [row] * rng.choice([1, 1, 2, 7])
    rows = rows[:n]
    cols = list(zip(*rows, strict=True))
    columns = ("kind", "npu_dtype", "failing", "severity", "small", "err_message", "mark")
    table = pa.table({"kind": pa.array(cols[0], pa.string()),
                      "npu_dtype": pa.array(cols[1], pa.large_string()),
                      "failing": pa.array(cols[2], pa.bool_()),
                      "severity": pa.array(cols[3], pa.int32()),
                      "small": pa.array(cols[4], pa.int8()),
                      "err_message": pa.array(cols[5], pa.string()),
                      "mark": pa.array(cols[6], pa.string()).dictionary_encode()})
    want = _reference(rows)
    import msq.history.run_recorder as rr

    # "small" (an int8) read as an integer column: as _INTEGERS' are
    saved = rr._INTEGERS
    rr._INTEGERS = (*saved, "small")
    try:
        assert _grouped(table, columns) == want
        # in batches: an empty one, a sliced one, each dictionary its own (another order, an
        # unused entry, an entry twice)
        cut = [table.slice(0, 700), table.slice(700, 0), table.slice(700, 1), table.slice(701)]
        parts = []
        for part in cut:
            mark = part.column("mark").combine_chunks().dictionary_decode()
            values = pa.array(["unused", "a", "", "a", None])
            index = {"a": 1, "": 2}
            indices = pa.array([None if v is None else index[v] for v in mark.to_pylist()],
                               pa.int32())
            part = part.set_column(part.schema.get_field_index("mark"), "mark",
                                   pa.DictionaryArray.from_arrays(indices, values))
            parts.append(part)
        chunked = pa.concat_tables(parts)
        assert len(chunked.to_batches()) >= 3
        assert _grouped(chunked, columns) == want
    finally:
        rr._INTEGERS = saved


def test_group_rows_with_more_values_than_a_key_holds_compare_codes():
    """Columns whose codes take more than 64 bits together (ten of 300 values each) are grouped
    by comparing each row's codes with the row before's: the same numbers."""
    rng = random.Random(3)
    values = [f"v{i}" for i in range(300)]
    rows = [tuple(rng.choice(values) for _ in range(10)) for _ in range(500)]
    rows += rows[:200] + [rows[5]] * 10
    columns = tuple(f"c{k}" for k in range(10))
    table = pa.table({c: pa.array([r[k] for r in rows]) for k, c in enumerate(columns)})
    assert _grouped(table, columns) == _reference(rows)


def test_group_rows_refuses_buffers_that_do_not_hold_the_rows():
    """Offsets outside the data, a dictionary index outside its dictionary, and buffers shorter
    than the batch are refused (ValueError), not read."""
    good = pa.array(["ab", "cd"])
    _, offsets, data = good.buffers()
    bad_offsets = pa.py_buffer(np.array([0, 2, 9], np.int32).tobytes())
    with pytest.raises(ValueError):
        _module.group_rows([(2, ((None, bad_offsets, data, 0, 2, False),))])
    dictionary = (None, offsets, data, 0, 2, False)
    indices = pa.py_buffer(np.array([0, 5], np.int32).tobytes())
    with pytest.raises(ValueError):
        _module.group_rows([(2, ((*dictionary, None, indices, 0, 4),))])
    with pytest.raises(ValueError):
        _module.group_rows([(3, ((None, offsets, data, 0, 2, False),))])
    flags = pa.py_buffer(b"\x01")
    with pytest.raises(ValueError):
        _module.group_rows([(9, ((None, flags, 0, 0),))])
    assert _module.group_rows([]) == (b"", b"")


def test_classes_of_a_column_group_rows_does_not_read_are_keyed_without_it():
    """A class column of a type group_rows does not read (an int64 severity) is keyed by the
    numpy path: the same keys and new classes as without the C pass."""
    from msq.history.run_recorder import _Classes, _group_rows

    columns = ("kind", "severity")
    table = pa.table({"out_seq": pa.array([0, 1, 2, 3], pa.int64()),
                      "kind": pa.array(["a", "a", None, "a"]),
                      "severity": pa.array([5, 5, None, 0], pa.int64())})
    made = []
    for group in (_group_rows(), None):
        classes = _Classes.__new__(_Classes)
        classes.table, classes.columns = "classes", columns
        classes.keys, classes.texts, classes.index = {}, pa.array([], pa.string()), None
        classes.group = group
        keyed, new = classes.key(table)
        made.append((keyed.to_pylist(), new.to_pylist() if new is not None else None))
    assert made[0] == made[1]
    assert [r["class_id"] for r in made[0][0]] == [1, 1, 2, 3]
