"""The static side: find fusion blockers in source with `ast`, fix them with libcst.

Nothing in this room imports torch: `fuselint check` reads files and never runs them.
"""
