"""Proof: run a model's original and fixed source under eager, fuselint and baselines,
check numerics against eager, time each on the device, and compare with the prediction."""
