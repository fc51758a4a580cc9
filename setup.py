"""Build hook for the optional C kernel; all other metadata lives in pyproject.toml.

``msq.tensors._fused`` computes every real-data metric of a tensor pair in one pass over memory
(see msq/tensors/_fused.c). It is optional: where it cannot be compiled (no C compiler), the
install still succeeds and msq uses its numpy kernel, which gives the same cells, only slower.
"""

import sys

from setuptools import Extension, setup

# -ffp-contract=off: no fused multiply-add contraction, so the portable and the AVX2 loops (and
# any CPU) sum the dot products with identical roundings.
ARGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off", "-fno-fast-math"]

setup(
    ext_modules=[
        Extension(
            "msq.tensors._fused",
            ["msq/tensors/_fused.c"],
            extra_compile_args=ARGS,
            optional=True,
        )
    ]
)
