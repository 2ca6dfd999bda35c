"""The traced side: capture models with dynamo, lower to ATen, hold FusionGraphs.

Everything here needs torch; nothing here knows of the planner (`fuselint.fusion`).
"""
