"""Blame: where the error enters (local) and where it is only passed on (inherited).

Every compared row gets one comparable error figure (the ``row_error`` view). Blame links each
op's inputs to the earlier outputs that produced them (per side: content hash in tensor mode,
md5 in md5 mode, the exact statistics otherwise), and calls an output row *local* when its error
is beyond the noise floor (its dtype's, or a reference noise run's) by ``FLOOR_FACTOR`` and beyond
``AMP_LIMIT`` times the error its inputs bring; *inherited* when its inputs explain it; *clean*
within the floor. Across ranks, a collective's output is explained by the inputs of every rank.
See docs/blame.md for the method and its limits.

Modules: :mod:`msq.blame.compute` (the compare's blame tables), :mod:`msq.blame.summary` (what
the console, the advisor and the outputs say), :mod:`msq.blame.ranks` (directory compares: every
rank and step together), :mod:`msq.blame.noise` (noise bands of a reference noise run).
"""

from __future__ import annotations

#: ``local`` needs an error beyond this many times the row's floor ...
FLOOR_FACTOR = 4.0
#: ... and beyond this many times the error its inputs bring (what an op may amplify).
AMP_LIMIT = 100.0
