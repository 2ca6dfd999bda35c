"""The fusion room: partition a FusionGraph into kernels, price the partition, report what it costs.

plan.py   FusionPlan: which ops share a kernel (the partition the backend executes)
cost.py   eager vs planned launches, bytes and time on a device (devices.py)
attention.py  which kernel SDPA runs on a GPU (flash / memory-efficient / math) and what it costs
plan_findings.py  findings read off the plan (FL301 materialized multi-consumer intermediates,
          FL302 attention on SDPA's math kernel under compile)
breaks.py what fixing a graph break saves: the graphs on both sides planned apart and merged
summary.py  the JSON the `graph` command embeds
model_summary.py  ModelSummary, the frozen per-model row (eager vs fused) the reports read
"""
