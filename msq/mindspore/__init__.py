"""MindSpore dumps: the NPU side (or both) written by MindSpore's msprobe.

* :mod:`~msq.mindspore.detect` — is a dump MindSpore's; does a compare cross frameworks
* :mod:`~msq.mindspore.name_mapping` — ``-am`` (built-in API table) and ``-cm`` (cells)
* :mod:`~msq.mindspore.api_user` — a user's api YAML (``-am FILE``)
* :mod:`~msq.mindspore.layer_mapping` — ``-lm``: a data mapping derived from a layer YAML
* :mod:`~msq.mindspore.hooks` — the two calls the single-card pipeline makes
* :mod:`~msq.mindspore.kernel` — static-graph (kernel) dumps: a compare of its own

Their SQL views are ``sql/compare/match/mindspore/`` and ``sql/kernel/``; see docs/mindspore.md
and docs/kernel.md. A new framework gets a sibling package with the same two hooks.
"""
