"""The MindSpore->PyTorch API table shipped as package data (msq/data/ms_to_pt_api.yaml).

It is msprobe 1.1.0's msprobe/mindspore/compare/ms_to_pt_api.yaml re-serialised
(regenerate with bench/gen_api_table.py); spec §3.7 lists the renamed entries.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

TABLE = Path(__file__).resolve().parents[2] / "msq" / "data" / "ms_to_pt_api.yaml"

# Entries whose API name changes (spec §3.7), all other entries keep the name.
RENAMED = {
    "Functional.bidense": "Functional.bilinear",
    "Functional.dense": "Functional.linear",
    "Functional.equal": "Torch.eq",
    "Functional.swapaxes": "Torch.transpose",
    "Tensor.asnumpy": "Tensor.numpy",
    "Tensor.cauchy": "Tensor.cauchy_",
    "Tensor.equal": "Tensor.eq",
    "Tensor.fill_diagonal": "Tensor.fill_diagonal_",
    "Tensor.gather_elements": "Tensor.gather",
    "Tensor.swapaxes": "Tensor.transpose",
}


@pytest.fixture(scope="module")
def table() -> dict[str, str]:
    with open(TABLE, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    assert isinstance(data, dict)
    return data


def test_header_names_source_and_licence() -> None:
    head = TABLE.read_text(encoding="utf-8").split("\n", 12)[:12]
    text = "\n".join(head)
    assert "ms_to_pt_api.yaml" in text
    assert "mindstudio-probe 1.1.0" in text
    assert "Apache License 2.0" in text
    assert "gen_api_table.py" in text


def test_entry_count(table: dict[str, str]) -> None:
    assert len(table) == 399


def test_all_str_to_str(table: dict[str, str]) -> None:
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in table.items())


def test_prefix_pairs(table: dict[str, str]) -> None:
    pairs = {(k.split(".", 1)[0], v.split(".", 1)[0]) for k, v in table.items()}
    assert pairs == {("Functional", "Torch"), ("Functional", "Functional"), ("Tensor", "Tensor")}


def test_renamed_entries(table: dict[str, str]) -> None:
    for ms, pt in RENAMED.items():
        assert table[ms] == pt
    renamed = {k: v for k, v in table.items() if k.split(".", 1)[1] != v.split(".", 1)[1]}
    assert renamed == RENAMED


@pytest.mark.parametrize(
    "ms,pt",
    [
        ("Functional.abs", "Torch.abs"),
        ("Functional.add", "Torch.add"),
        ("Functional.adaptive_avg_pool2d", "Functional.adaptive_avg_pool2d"),
    ],
)
def test_plain_entries(table: dict[str, str], ms: str, pt: str) -> None:
    assert table[ms] == pt
