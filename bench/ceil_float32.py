"""Where `torch.ceil` of a float32 quotient first differs from the exact ceiling (FL102's int twins).

EnCodec's padding computes `n_frames = torch.ceil((length - kernel + padding) / stride + 1) - 1` on
0-d int64 tensors: the quotient is float32 (torch's default dtype), then `+ 1` rounds again. The
int-twin fix computes it as `math.ceil(q + 1) - 1` in float64, which is the exact ceiling for every
numerator below 2**52. This scans every numerator a in [0, 2**24) for each stride and prints the
first one where the float32 form is not the exact ceiling, and the smallest over all strides.

    python bench/ceil_float32.py [--max-stride 1024]
"""

from __future__ import annotations

import argparse
import math


def first_difference(stride: int, limit: int = 1 << 24, chunk: int = 1 << 22) -> int | None:
    """The smallest a in [0, limit) where float32 `ceil(a / stride + 1) - 1` is not ceil(a / stride)."""
    import torch

    for start in range(0, limit, chunk):
        a = torch.arange(start, min(start + chunk, limit), dtype=torch.int64)
        rounded = torch.ceil(a / torch.tensor(stride) + 1).to(torch.int64) - 1
        wrong = (rounded != -((-a) // stride)).nonzero()
        if len(wrong):
            return start + int(wrong[0, 0])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-stride", type=int, default=1024)
    args = parser.parse_args()
    worst: tuple[int, int] | None = None
    for stride in range(1, args.max_stride + 1):
        first = first_difference(stride)
        # the float64 form of the fix is exact here: check it where float32 first fails
        if first is not None:
            assert math.ceil(first / stride + 1) - 1 == -((-first) // stride)
            if worst is None or first < worst[0]:
                worst = (first, stride)
        if stride <= 16 or stride % 128 == 0:
            print(f"stride {stride}: first difference at numerator {first}")
    print(
        f"smallest over strides 1..{args.max_stride}: numerator {worst[0]} (stride {worst[1]})"
        if worst
        else "none"
    )


if __name__ == "__main__":
    main()
