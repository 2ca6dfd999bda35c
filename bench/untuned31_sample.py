"""The draw for bench/results/precision_untuned31.md (prec31, issue 11), fixed before the lint ran.

    python bench/untuned31_sample.py bench/results/precision_untuned31.json > bench/results/precision_untuned31_sample.json

The packages (audiocraft 1.3.0 from its sdist, darts 0.48.1 from its wheel) and folders (audiocraft/models,
audiocraft/modules, audiocraft/quantization, audiocraft/losses; darts/models) were chosen before any lint: no
rule was tuned on them and neither is named in docs/, bench/ or the README before this file. Reads `fuselint
check --format json` output and prints the findings to judge: all of them when there are at most 40 (a
census), else 40 drawn by `random.Random(31).sample` from the findings ordered by (file, line, column, rule),
so the draw depends on neither the output order nor the hash seed. Rows as bench/untuned30_sample.py's.
"""

import sys

from untuned30_sample import main

if __name__ == "__main__":
    main(sys.argv[1], seed=31, size=40)
