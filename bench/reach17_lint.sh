#!/bin/bash
# Lint the packages reach17 measured, default and traced, with the fuselint in CODE, and score recall:
#   bash bench/reach17_lint.sh CODE DATA LABEL
# DATA holds default/ and traced/ (pykeen/), gp/{default,traced}/ (gpytorch/, linear_operator/),
# sb3/{default,traced}/ (stable_baselines3/) and pml/{default,traced}/ (pytorch_metric_learning/),
# each the unzipped wheels beside a pyproject.toml with a bare [tool.fuselint] (default) or the
# traced-functions line of precision_untuned17.md, _16.md, _15.md, _14.md (traced). Writes
# DATA/out/LABEL/{default,traced}/PACKAGE.json.
CODE=$1; D=$2; L=$3; PY=${PY:-python}
lint() { (cd "$1" && PYTHONPATH=$CODE $PY -m fuselint check --no-cache --exit-zero --select FL1 --format json "$2" > "$D/out/$L/$3/$2.json"); }
for m in default traced; do
  mkdir -p "$D/out/$L/$m"
  lint "$D/$m" pykeen $m
  lint "$D/gp/$m" gpytorch $m
  lint "$D/gp/$m" linear_operator $m
  lint "$D/sb3/$m" stable_baselines3 $m
  lint "$D/pml/$m" pytorch_metric_learning $m
done
for s in 17 16 15 14; do
  PYTHONPATH=. $PY bench/rescore_judged.py --recall bench/results/precision_untuned${s}_sites.json \
    --json default="$D/out/$L/default" --json traced="$D/out/$L/traced"
done
