"""Where `torch.ceil` of a float32 quotient first differs from the exact ceiling (FL102's int twins).

EnCodec's padding computes `n_frames = torch.ceil((length - kernel + padding) / stride + 1) - 1` on
0-d int64 tensors: the quotient is float32 (torch's default dtype), then `+ 1` rounds again. The
int-twin fix computes it as `math.ceil(a / s + 1) - 1` in float64, the exact ceiling for every
numerator below 2**52. The float32 form is exact while a + s <= 2**23 (EnCodec: a + s is the length):
a wrong ceiling needs the two roundings to move a / s + 1 = n + 1 + f (f >= 1/s) down to n + 1,
so f <= ulp(n + 1) <= (n + 1) * 2**-23, hence (n + 1) * s >= 2**23 and a + s > 2**23. This scans
every numerator below 2**24 for the strides given and checks that bound against the first failure.

    python bench/ceil_float32.py [--strides 1-16,20,32,64,160,320,480,512,640,960,1024]
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


def _strides(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strides", default="1-16,20,32,64,160,320,480,512,640,960,1024")
    args = parser.parse_args()
    worst: tuple[int, int] | None = None
    for stride in _strides(args.strides):
        first = first_difference(stride)
        print(f"stride {stride}: first difference at numerator {first}")
        if first is None:
            continue
        assert first + stride > 2**23, "the bound is wrong"
        assert math.ceil(first / stride + 1) - 1 == -((-first) // stride)  # float64 is exact there
        if worst is None or first + stride < sum(worst):
            worst = (first, stride)
    if worst:
        print(
            f"smallest numerator + stride that fails: {sum(worst)} (stride {worst[1]}); bound 2**23 = {2**23}"
        )


if __name__ == "__main__":
    main()
