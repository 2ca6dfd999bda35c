#!/bin/bash
# Lint reach22's two packages, default and traced, with the fuselint in CODE, and score recall:
#   bash bench/reach22_lint.sh CODE DATA LABEL
# DATA holds snn/{default,traced}/ (snntorch/ of the unzipped snntorch 1.0.0 wheel) and
# ani/{default,traced}/ (torchani/ of the unzipped torchani 2.9.0 wheel), each beside a bare
# `[tool.fuselint]` (default) or the traced config of bench/results/precision_untuned22.md.
# Writes DATA/out/LABEL/{default,traced}/{snntorch,torchani}.json.
CODE=$1; D=$2; L=$3; PY=${PY:-python}
lint() { (cd "$1" && PYTHONPATH=$CODE $PY -m fuselint check --no-cache --exit-zero --select FL1 --format json "$3" > "$2"); }
for m in default traced; do
  mkdir -p "$D/out/$L/$m"
  lint "$D/snn/$m" "$D/out/$L/$m/snntorch.json" snntorch
  lint "$D/ani/$m" "$D/out/$L/$m/torchani.json" torchani
done
PYTHONPATH=. $PY bench/rescore_judged.py --recall bench/results/precision_untuned22_sites.json \
  --json default="$D/out/$L/default" --json traced="$D/out/$L/traced"
