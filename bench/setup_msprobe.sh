#!/usr/bin/env bash
# Create bench/.venv-msprobe: the reference msprobe 1.1.0 used as the benchmark baseline.
#   bash bench/setup_msprobe.sh            # create (or complete) the venv
#   bash bench/setup_msprobe.sh --check    # also run a golden compare as a smoke test
# Idempotent; safe to re-run. Never installs an unpinned torch (torch==2.13.0 is a local CPU wheel).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-msprobe"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# Pinned set. service_identity: msprobe's CLI imports twisted-based code that needs it but
# msprobe does not declare it. torch 2.13.0 is the local CPU wheel (see /opt/wheels).
"$VENV/bin/python" -m pip install -q \
    "mindstudio-probe==1.1.0" \
    "torch==2.13.0" \
    "numpy<2" \
    "pandas==2.0.*" \
    "service_identity"

"$VENV/bin/python" - <<'PY'
import msprobe, torch, numpy, pandas
print("msprobe ok; torch", torch.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__)
PY

if [ "${1:-}" = "--check" ]; then
    # Smoke test: re-run a golden case and compare with the recorded msprobe output.
    CASE="${GOLDEN:-/work/shared/golden}/mlp_stat_L1"
    TMP="$(mktemp -d)"
    trap 'rm -rf "$TMP"' EXIT
    cp -r "$CASE" "$TMP/case"
    chmod -R u+w "$TMP/case"
    cd "$TMP/case"
    mkdir -p out
    "$VENV/bin/msprobe" -f pytorch compare -i expected/default/compare.json -o out > out.log 2>&1 \
        || { cat out.log; echo "msprobe check: FAILED (exit $?)"; exit 1; }
    diff out/advisor_*.txt expected/default/advisor_*.txt
    "$VENV/bin/python" - <<'PY'
import glob, pandas as pd
got = pd.read_excel(glob.glob("out/compare_result_*.xlsx")[0])
exp = pd.read_excel(glob.glob("expected/default/compare_result_*.xlsx")[0])
assert got.equals(exp), "workbook differs from the golden one"
print("msprobe check: OK (%d rows, identical to golden mlp_stat_L1/default)" % len(got))
PY
fi
