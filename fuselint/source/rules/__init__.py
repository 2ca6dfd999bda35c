"""Source checks, one module per family of rules; each registers itself with `@check`."""
