"""Does rebinding a buffer in forward break dynamo? By how the buffer was made (fixes17).

    PYTHONPATH=. python bench/buffer_rebind_probe.py

prints, for a buffer made with `nn.Buffer` (persistent or not) or `register_buffer`, and for three
`.to` forms of `self.pos = self.pos.to(...)` in forward, dynamo's graph and break counts on a float32
input (the cast changes nothing); then, for an `nn.Buffer` buffer, other rebinding values and a
float64 input (a cast that changes the dtype).
"""

from __future__ import annotations


def module(made: str, to: str):
    import torch
    from torch import nn

    class Rebinds(nn.Module):
        def __init__(self):
            super().__init__()
            data = torch.randn(8, 4)
            if made == "register_buffer":
                self.register_buffer("pos", data, persistent=False)
            else:
                self.pos = nn.Buffer(data, persistent=made == "nn.Buffer persistent")

        def forward(self, x):
            if to == "device and dtype":
                self.pos = self.pos.to(device=x.device, dtype=x.dtype)
            elif to == "device":
                self.pos = self.pos.to(device=x.device)
            else:
                self.pos = self.pos.to(dtype=x.dtype)
            return x + self.pos[: x.shape[0]]

    return Rebinds()


def other_values(form: str):
    import torch
    from torch import nn

    class Rebinds(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Buffer(torch.randn(8, 4), persistent=False)

        def keep(self, pe):
            return pe

        def forward(self, x):
            if form == "a helper's value":
                self.pos = self.keep(self.pos)
            elif form == "times 1":
                self.pos = self.pos * 1
            elif form == "fresh":
                self.pos = torch.ones(8, 4)
            else:
                self.pos = self.pos.to(dtype=x.dtype)
            return x + self.pos

    return Rebinds()


def main() -> None:
    import torch

    for made in ("nn.Buffer", "nn.Buffer persistent", "register_buffer"):
        for to in ("device and dtype", "device", "dtype"):
            torch._dynamo.reset()
            explained = torch._dynamo.explain(module(made, to))(torch.randn(8, 4))
            print(f"{made:22} {to:17} graphs {explained.graph_count} breaks {explained.graph_break_count}")
    for form in ("to(dtype)", "a helper's value", "times 1", "fresh"):
        for dtype in (torch.float32, torch.float64):
            torch._dynamo.reset()
            explained = torch._dynamo.explain(other_values(form))(torch.randn(8, 4, dtype=dtype))
            print(
                f"nn.Buffer {form:17} {str(dtype):14} graphs {explained.graph_count} "
                f"breaks {explained.graph_break_count}"
            )


if __name__ == "__main__":
    main()
