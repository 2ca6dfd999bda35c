"""Dynamo checks behind bench/results/precision_untuned2.md (FL1 precision on monai 1.6.1).

Each check compiles either real monai code (the unzipped wheel on sys.path: monai is pure Python
and imports with torch 2.13 CPU) or, where monai needs packages the venv lacks (scipy, skimage,
nnunet), a tiny copy of the flagged pattern. Break sites come from dynamo's `graph_breaks` log
artifact (reason, gb code, file:line), not from `torch._dynamo.explain`, which misses some breaks.

    PYTHONPATH=$PWD python bench/precision_untuned2_probes.py --monai DIR --smp DIR
"""

from __future__ import annotations

import logging
import sys
import warnings

import torch
from break_probe import compile_row, listen
from torch import nn


def _user(path: str) -> str | None:
    """A break at a user line: monai's (named from `src/` down) or a probe's own, not torch's."""
    if "/torch/" in path:
        return None
    return path.split("/src/")[-1] if "/src/" in path else path.rsplit("/", 1)[-1]


# ---- pattern copies (monai code that cannot run here) -------------------------------------------


class CpuNumpyLoop(nn.Module):
    """dints.py:1036-1037 `for i, a in enumerate(self.code[k].data.cpu().numpy()): if a: ...`."""

    def __init__(self) -> None:
        super().__init__()
        self.code = torch.tensor([[1, 0, 1], [0, 1, 1]])
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        out = x
        for blk in range(2):
            for _i, activation in enumerate(self.code[blk].data.cpu().numpy()):
                if activation:
                    out = self.lin(out)
        return out


def point_inside(logits, point_coords):
    """vista3d.py:246-249 (VISTA3D.connected_components_combine)."""
    inside = []
    for i in range(logits.shape[0]):
        p_coord = point_coords[i].cpu().numpy().round().astype(int)
        inside_p = [logits[i, 0, p[0], p[1], p[2]].item() > 0 for p in p_coord]
        inside.append(int(any(inside_p)))
    return torch.tensor(inside)


class ClassLoop(nn.Module):
    """vista3d.py:562-566 `for i in class_vector: if i > self.last_supported: ...`."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.rand(4))
        self.b = nn.Parameter(torch.rand(4))

    def forward(self, class_vector):
        emb = []
        for i in class_vector:
            if i > 2:
                emb.append(self.a)
            else:
                emb.append(self.b)
        return torch.stack(emb)


def fg_mask_any(img):
    """hausdorff_loss.py:109-115 `if fg_mask.any() and not fg_mask.all():` per batch item."""
    field = torch.zeros_like(img)
    for b in range(len(img)):
        fg = img[b] > 0.5
        if fg.any() and not fg.all():
            field[b] = fg.float()
    return field


def nan_check(box):
    """retinanet_detector.py:986 `if torch.isnan(x).any() or torch.isinf(x).any():`."""
    if torch.isnan(box).any() or torch.isinf(box).any():
        warnings.warn("NaN or Inf in predicted box regression.", stacklevel=2)
    return box * 2


def nonzero_where(labels):
    """hard_negative_sampler.py:237 `torch.where(labels >= 1)[0]`."""
    return torch.where(labels >= 1)[0] * 2


def amax_item(lengths):
    """navit.py:522 `int(lengths.amax().item())` then `torch.arange(max_len)`."""
    return torch.arange(int(lengths.amax().item())) * 2


def meta_item(affine):
    """nnunet_bundle.py:265 `abs(x.meta["affine"][0][0].item())`."""
    return [abs(affine[0][0].item()), abs(affine[1][1].item())]


def logger_info(x, print_info=True):
    """autoencoderkl_maisi.py:96 and 237 `if self.print_info: logger.info(...)`."""
    x = x * 2
    if print_info:
        logging.getLogger("probe").info(f"size {x.size()}")
    return x + 1


def reshape_by_tensor(x):
    """simplelayers.py:476-485 `oprod = torch.prod(...shape...)`; `x.reshape(oprod, 1, *sshape)`."""
    oprod = torch.prod(torch.tensor(list(x.shape[:2])))
    return x.reshape(oprod, 1, *x.shape[2:]) * 2


def ones_by_tensor():
    """simplelayers.py:436-438 `prod = torch.prod(win_size)`; `torch.ones(prod)`."""
    prod = torch.prod(torch.tensor([3, 3]))
    return torch.diag(torch.ones(prod)).view(prod, 1, 3, 3) * 2


def debug_print(x, debug=True):
    """retinanet_detector.py:795 and 917 `if self.debug: print(f"...{tensor}...")`."""
    x = x * 2
    if debug:
        print(f"max overlap: {torch.max(x, dim=1)[0]}")
    return x + 1


# ---- runner ---------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks) -> None:
    print(compile_row(label, fn, args, breaks, _user, error_width=80), flush=True)


def main() -> None:
    args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
    if "--monai" in args:
        sys.path.insert(0, args["--monai"])
    breaks = listen()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, backend eager, dynamic=False\n")
    print("| call | graphs, ops | break sites (innermost user line) |")
    print("|---|---|---|")
    runs: list[tuple[str, object, tuple]] = [
        ("probe CpuNumpyLoop (dints 1036)", CpuNumpyLoop(), (torch.rand(2, 4),)),
        ("probe point_inside (vista3d 246-248)", point_inside,
         (torch.rand(2, 1, 4, 4, 4) - 0.5, torch.randint(0, 4, (2, 3, 3)))),
        ("probe ClassLoop (vista3d 562-563)", ClassLoop(), (torch.tensor([1, 3, 2]),)),
        ("probe fg_mask_any (hausdorff 115)", fg_mask_any, (torch.rand(2, 1, 4, 4),)),
        ("probe nan_check (retinanet 986)", nan_check, (torch.rand(3, 4),)),
        ("probe nonzero_where (hard_negative_sampler 237)", nonzero_where, (torch.randint(0, 3, (8,)),)),
        ("probe amax_item (navit 522)", amax_item, (torch.tensor([3, 5]),)),
        ("probe meta_item (nnunet_bundle 265)", meta_item, (torch.eye(4),)),
        ("probe logger_info (maisi 96, 237)", logger_info, (torch.rand(2, 3),)),
        ("probe reshape_by_tensor (simplelayers 485)", reshape_by_tensor, (torch.rand(2, 3, 4, 4),)),
        ("probe ones_by_tensor (simplelayers 438)", ones_by_tensor, ()),
        ("probe debug_print (retinanet 795, 917)", debug_print, (torch.rand(2, 3),)),
    ]  # fmt: skip
    if "--monai" in args:
        from monai.apps.reconstruction.networks.nets.coil_sensitivity_model import CoilSensitivityModel
        from monai.losses import DiceLoss, FocalLoss, GeneralizedDiceLoss, MCCLoss, TverskyLoss
        from monai.losses.adversarial_loss import PatchAdversarialLoss
        from monai.losses.sure_loss import sure_loss_function
        from monai.networks.layers import GaussianFilter, median_filter
        from monai.networks.layers.simplelayers import get_binary_kernel
        from monai.utils.type_conversion import convert_to_tensor

        x2 = torch.rand(2, 2, 8, 8)
        y2 = torch.randint(0, 2, (2, 1, 8, 8))
        x1 = torch.rand(2, 1, 8, 8)
        y1 = torch.randint(0, 2, (2, 1, 8, 8)).float()
        coil = CoilSensitivityModel(spatial_dims=2, features=(2, 2, 2, 2, 2, 2))
        mask = torch.zeros(1, 1, 8, 1, dtype=torch.bool)
        mask[..., 3:6, :] = True
        runs += [
            ("DiceLoss(softmax, to_onehot_y), 2 channels (normal)", DiceLoss(softmax=True, to_onehot_y=True),
             (x2, y2)),
            ("DiceLoss(softmax, to_onehot_y), 1 channel (misuse: warns)", DiceLoss(softmax=True, to_onehot_y=True),
             (x1, y1)),
            ("MCCLoss(softmax), 1 channel (misuse: warns)", MCCLoss(softmax=True), (x1, y1)),
            ("TverskyLoss(include_background=False), 1 channel (misuse: warns)",
             TverskyLoss(include_background=False), (x1, y1)),
            ("GeneralizedDiceLoss(softmax, to_onehot_y), 2 channels", GeneralizedDiceLoss(softmax=True, to_onehot_y=True),
             (x2, y2)),
            ("FocalLoss(weight=0.5)", FocalLoss(weight=0.5), (x1, y1)),
            ("FocalLoss(weight=[1, 2], to_onehot_y)", FocalLoss(weight=[1.0, 2.0], to_onehot_y=True), (x2, y2)),
            ("GaussianFilter(approx=scalespace)", GaussianFilter(2, sigma=1.0, approx="scalespace"), (x1,)),
            ("GaussianFilter(approx=scalespace, sigma=2)", GaussianFilter(2, sigma=2.0, approx="scalespace"), (x1,)),
            ("GaussianFilter(approx=erf) (default)", GaussianFilter(2, sigma=1.0), (x1,)),
            ("median_filter(x, 3, spatial_dims=2)", lambda t: median_filter(t, 3, spatial_dims=2), (x1,)),
            ("get_binary_kernel((3, 3))", lambda: get_binary_kernel((3, 3), torch.float32, "cpu"), ()),
            ("sure_loss_function (eps=-1 default)",
             lambda x, y: sure_loss_function(lambda t: t * 2, x, y), (x1, x1 * 2)),
            ("PatchAdversarialLoss(bce), generator step", PatchAdversarialLoss(criterion="bce"),
             (torch.rand(2, 1, 4, 4), True, False)),
            ("PatchAdversarialLoss(hinge), discriminator step, fake", PatchAdversarialLoss(criterion="hinge"),
             (torch.rand(2, 1, 4, 4), False, True)),
            ("convert_to_tensor(t) (maisi MaisiResBlock path)", lambda t: convert_to_tensor(t) * 2, (x1,)),
            ("convert_to_tensor(t, dtype=torch.float16)", lambda t: convert_to_tensor(t, dtype=torch.float16) * 2,
             (x1,)),
            ("CoilSensitivityModel.get_fully_sampled_region", coil.get_fully_sampled_region, (mask,)),
        ]  # fmt: skip
    if "--smp" in args:
        # smp's package __init__ imports timm (absent here): a bare package object stands in, so that
        # only segmentation_models_pytorch.losses and what it imports run
        import types

        pkg = types.ModuleType("segmentation_models_pytorch")
        pkg.__path__ = [f"{args['--smp']}/segmentation_models_pytorch"]
        sys.modules["segmentation_models_pytorch"] = pkg
        from segmentation_models_pytorch.losses import FocalLoss as SmpFocal
        from segmentation_models_pytorch.losses import LovaszLoss

        yp = torch.rand(2, 3, 6, 6)
        yt = torch.randint(0, 3, (2, 6, 6))
        runs += [
            ("smp FocalLoss(multiclass), batch 2", SmpFocal("multiclass"), (yp, yt)),
            ("smp FocalLoss(multiclass), batch 4 (recompile?)", SmpFocal("multiclass"),
             (torch.rand(4, 3, 6, 6), torch.randint(0, 3, (4, 6, 6)))),
            ("smp FocalLoss(multiclass, ignore_index=2)", SmpFocal("multiclass", ignore_index=2), (yp, yt)),
            ("smp FocalLoss(binary, ignore_index=2)", SmpFocal("binary", ignore_index=2),
             (torch.rand(2, 1, 6, 6), torch.randint(0, 3, (2, 1, 6, 6)))),
            ("smp LovaszLoss(multiclass)", LovaszLoss("multiclass"), (yp, yt)),
            ("smp LovaszLoss(binary, ignore_index=2)", LovaszLoss("binary", ignore_index=2),
             (torch.rand(2, 1, 6, 6), torch.randint(0, 3, (2, 1, 6, 6)))),
            ("smp LovaszLoss(multiclass, ignore_index=2)", LovaszLoss("multiclass", ignore_index=2), (yp, yt)),
        ]  # fmt: skip
    for label, fn, fargs in runs:
        compile_run(label, fn, fargs, breaks)


if __name__ == "__main__":
    main()
