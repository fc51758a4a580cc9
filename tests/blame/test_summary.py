"""How a local source reads on the console and in the advisor (msq.blame.summary.source_line)."""

from __future__ import annotations

from typing import Any

from msq.blame.summary import source_line


def _source(**fields: Any) -> dict[str, Any]:
    return {"npu_name": "Functional.linear.0.forward.output.0", "out_seq": 3, "role": "output",
            "input_err": 0.001, "output_err": 0.25, "amplification": 250.0, "floor": 1.3e-06,
            "floor_source": "dtype float32", **fields}


def test_an_output_names_its_input_error_output_error_and_amplification() -> None:
    line = source_line(_source(), rank=2)
    assert line == ("rank 2: Functional.linear.0.forward.output.0 (sheet row 5): input error "
                    "0.001 -> output error 0.25 (x250), floor 1.3e-06 (dtype float32)")


def test_an_external_input_says_what_it_is_instead_of_empty_figures() -> None:
    line = source_line(_source(npu_name="Tensor.__add__.0.forward.input.0", out_seq=0,
                               role="external input", input_err=None, amplification=None,
                               output_err=4.77e-05))
    assert line == ("Tensor.__add__.0.forward.input.0 (sheet row 2): external input with error "
                    "4.77e-05, floor 1.3e-06 (dtype float32)")
    assert "-> output error" not in line and "(x-)" not in line
