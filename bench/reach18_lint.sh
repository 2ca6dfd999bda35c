#!/bin/bash
# Lint the packages reach18 measured, default and traced, with the fuselint in CODE, and score recall:
#   bash bench/reach18_lint.sh CODE DATA LABEL
# DATA holds what bench/reach17_lint.sh reads (default/, traced/ with pykeen; gp/{default,traced}/
# with gpytorch and linear_operator) and tu/{default,traced}/ (torch_uncertainty/ of the unzipped
# torch-uncertainty 0.13.0 wheel beside a bare [tool.fuselint], or one with
# `traced-functions = ["*.update", "*.compute"]`). Writes DATA/out/LABEL/{default,traced}/PACKAGE.json,
# with gpytorch and linear_operator linted apart (as judge16 and reach17 did), and
# DATA/out/LABEL-onetree/{default,traced}/ with the two linted as ONE tree (a call from gpytorch into
# linear_operator is followed only then), its findings split per package for the recall script.
CODE=$1; D=$2; L=$3; PY=${PY:-python}
lint() { (cd "$1" && PYTHONPATH=$CODE $PY -m fuselint check --no-cache --exit-zero --select FL1 --format json "${@:3}" > "$2"); }
for m in default traced; do
  mkdir -p "$D/out/$L/$m" "$D/out/$L-onetree/$m"
  lint "$D/$m" "$D/out/$L/$m/pykeen.json" pykeen
  lint "$D/gp/$m" "$D/out/$L/$m/gpytorch.json" gpytorch
  lint "$D/gp/$m" "$D/out/$L/$m/linear_operator.json" linear_operator
  lint "$D/tu/$m" "$D/out/$L/$m/torch_uncertainty.json" torch_uncertainty
  lint "$D/gp/$m" "$D/out/$L-onetree/$m/both.json" gpytorch linear_operator
  $PY - "$D/out/$L-onetree/$m" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
found = json.loads((out / "both.json").read_text())
for package in ("gpytorch", "linear_operator"):
    mine = [f for f in found if f["filename"].startswith(package + "/")]
    (out / f"{package}.json").write_text(json.dumps(mine))
(out / "both.json").unlink()
PY
done
for s in 18 17 16; do
  PYTHONPATH=. $PY bench/rescore_judged.py --recall bench/results/precision_untuned${s}_sites.json \
    --json default="$D/out/$L/default" --json traced="$D/out/$L/traced"
done
PYTHONPATH=. $PY bench/rescore_judged.py --recall bench/results/precision_untuned16_sites.json \
  --json default="$D/out/$L-onetree/default" --json traced="$D/out/$L-onetree/traced"
