"""The traced side: capture models with dynamo, lower to ATen, hold FusionGraphs.

Everything here needs torch; nothing here knows of the planner (`fuselint.fusion`).
The public API, one module per idea:
  entry.load_entry(spec) -> Entry          "path/to/file.py:factory" or "package.module:factory"
  capture.capture(entry, device=, train=) -> Capture(graphs, breaks, links, ...)
  layout.gpu_conv_layout(gm, inference=)  convolutions laid out as Inductor lays them out on a GPU
  layout.kept_layout_copies(gm, static)   the weights' layout copies a compiled graph makes once
  aliasing.storage_root(node), written_storages(nodes)   which storage a node's value lives in
  breaks.break_findings(capture, gains) -> [Finding]   FL150, one per graph break
  breaks.merge_findings(static, traced)         fold FL150 into static FL1xx findings on the same line
  render.write(path, graphs, breaks, groups)    .svg / .html / .dot / .json drawings
  progress.progress(items)                      a bar on a terminal while tracing several entries
Entry problems raise entry.EntryError with a one-line message.
"""
