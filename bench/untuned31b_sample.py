"""The draw for the second part of bench/results/precision_untuned31.md (prec31, issue 11), fixed before
the lint ran: a test of branch prec31's lint (after its fixes) on packages nobody tuned on.

    python bench/untuned31b_sample.py bench/results/precision_untuned31b.json > bench/results/precision_untuned31b_sample.json

The packages (pytorch_tabular 1.2.0, denoising_diffusion_pytorch 2.3.4, wheels from PyPI) and folders
(pytorch_tabular/models, the whole denoising_diffusion_pytorch package) were chosen before any lint: no rule
was tuned on them and neither is named in docs/, bench/ or the README before this file. All findings when
there are at most 25, else 25 drawn by `random.Random(312).sample` from the findings ordered by (file, line,
column, rule). Rows as bench/untuned30_sample.py's.
"""

import sys

from untuned30_sample import main

if __name__ == "__main__":
    main(sys.argv[1], seed=312, size=25)
