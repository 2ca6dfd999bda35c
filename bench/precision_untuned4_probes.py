"""Dynamo checks behind bench/results/precision_untuned4.md (FL1 precision and recall on
segment-anything 1.0 and torchdiffeq 0.2.5, torch 2.13 CPU).

Each check compiles real package code (both packages are pure Python): SAM with random weights (no
checkpoint), torchdiffeq's solvers on a small `nn.Module` ODE. Where the flagged line is never reached
on this torch, a tiny copy of the flagged pattern shows what dynamo would do there. Break sites come
from dynamo's `graph_breaks` log (bench/break_probe.py).

segment-anything imports torchvision (`resize`, `to_pil_image`, `batched_nms`). The torchvision wheel
that pairs with torch 2.13.0 is a CUDA build whose `_C` extension cannot load beside the CPU torch, and
its import then stops on `register_fake("torchvision::nms")`. `_torchvision_without_c` declares the
two operator schemas that import needs (`nms`, `qnms`), gives `nms` a plain CPU kernel and reports the
ops as loaded, so the rest of torchvision's Python (and its own fake kernel for `nms`) is the real one.

    PYTHONPATH=$PWD python bench/precision_untuned4_probes.py [--only p|m|s|d]
"""

from __future__ import annotations

import contextlib
import sys
import warnings

import numpy as np
import torch
from break_probe import compile_row, listen, package_site
from torch import nn


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, ("segment_anything", "torchdiffeq"), "precision_untuned4_probes.py")


def _torchvision_without_c() -> None:
    """Let `import torchvision` finish when its compiled ops cannot load (see the module doc)."""
    try:
        import torchvision  # noqa: F401
    except RuntimeError:
        pass
    else:
        return
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    lib = torch.library.Library("torchvision", "DEF")
    _torchvision_without_c.lib = lib  # keep the registration alive
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

    @torch._dynamo.disable  # a stand-in for a C++ kernel: dynamo should not trace into it either
    def nms_cpu(dets, scores, iou_threshold):
        order = scores.argsort(descending=True)
        keep: list[int] = []
        area = (dets[:, 2] - dets[:, 0]) * (dets[:, 3] - dets[:, 1])
        for i in order.tolist():
            ok = True
            for j in keep:
                lo = torch.maximum(dets[i, :2], dets[j, :2])
                hi = torch.minimum(dets[i, 2:], dets[j, 2:])
                inter = (hi - lo).clamp(min=0).prod()
                if inter / (area[i] + area[j] - inter) > iou_threshold:
                    ok = False
                    break
            if ok:
                keep.append(i)
        return torch.tensor(keep, dtype=torch.int64)

    lib.impl("nms", nms_cpu, "CPU")
    import torchvision.extension

    torchvision.extension._has_ops = lambda: True  # `batched_nms` asserts it before calling `nms`


# ---- pattern copies ---------------------------------------------------------------------------


def np_nextafter_copy(x1, x2):
    """torchdiffeq/_impl/misc.py:367-373, the fallback `_nextafter` takes only without torch.nextafter."""
    warnings.warn("fallback", stacklevel=2)
    x1_np = x1.detach().cpu().numpy()
    x2_np = x2.detach().cpu().numpy()
    return torch.tensor(np.nextafter(x1_np, x2_np)).to(x1) * 2


def numpy_nextafter_copy(x1, x2):
    """The same fallback without its warning (misc.py:370-372): does `.cpu().numpy()` break?"""
    x1_np = x1.detach().cpu().numpy()
    x2_np = x2.detach().cpu().numpy()
    return torch.tensor(np.nextafter(x1_np, x2_np)).to(x1) * 2


def onnx_slice_copy(masks, size):
    """segment_anything/utils/onnx.py:84-85 `masks[..., : int(size[0]), : int(size[1])]`."""
    size = torch.floor(size.to(torch.float32) + 0.5).to(torch.int64)
    return masks[..., : int(size[0]), : int(size[1])] * 2


# ---- the in-scope misses of precision_untuned4.md, as minimal modules ------------------------------
# Each marked line breaks under dynamo (the "miss" rows of the runs table); at a81fc67
# `fuselint check --select FL1 bench/precision_untuned4_probes.py` flags none of the lines marked
# "(missed)" and flags each line marked "(flagged)", the control beside it.


class MissAugMask(nn.Module):
    """`x[mask] += v` (prompt_encoder.py:87-90)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.rand(4))

    def forward(self, x, labels):
        x = x * 2
        x[labels == -1] = 0.0  # index_put: no break, not flagged
        x[labels == 0] += self.w  # FL106 (missed)
        y = x[labels == 1]  # FL106 (flagged)
        return x, y


class MissInterpolateSize(nn.Module):
    """`F.interpolate(size=(h, w))` with 0-d tensors (onnx.py:87-89)."""

    def forward(self, masks, orig_im_size):
        size = orig_im_size.to(torch.int64)
        h, w = size[0], size[1]
        return nn.functional.interpolate(masks, size=(h, w), mode="bilinear")  # FL101 (missed)


class MissAsTensorMask(nn.Module):
    """A boolean mask wrapped in `torch.as_tensor` (amg.py:49)."""

    def forward(self, v, scores):
        keep = scores > 0.5
        a = v[torch.as_tensor(keep, device=v.device)]  # FL106 (missed)
        b = v[keep]  # FL106 (flagged)
        return a, b


class MissListByTensor(nn.Module):
    """A list indexed by the elements of an index tensor (amg.py:55)."""

    def forward(self, v, scores):
        keep = scores.argsort()[:2]
        rows = list(v.unbind(0))
        return [rows[i] * 2 for i in keep]  # FL107 (missed)


# ---- runner -------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks, kwargs=None) -> None:
    # A run labelled "... (suppress_errors)" lets dynamo run a frame that hits a hard compile error
    # eagerly and go on, so that the breaks after it are seen (the same run without it shows the error).
    torch._dynamo.config.suppress_errors = label.endswith("(suppress_errors)")
    print(compile_row(label, fn, args, breaks, _user, kwargs, grad_mode(label)), flush=True)


def grad_mode(label: str):
    """Inference runs under no_grad; a run labelled "train ..." keeps autograd on."""
    return contextlib.nullcontext() if label.startswith("train") else torch.no_grad()


def probe_runs() -> list:
    return [
        ("probe np_nextafter_copy (misc 368, 370, 371)", np_nextafter_copy, (torch.rand(3), torch.rand(3))),
        ("probe numpy_nextafter_copy (misc 370, 371, no warn)", numpy_nextafter_copy, (torch.rand(3), torch.rand(3))),
        ("probe onnx_slice_copy (onnx 85)", onnx_slice_copy, (torch.rand(1, 1, 8, 8), torch.tensor([5.0, 6.0]))),
    ]  # fmt: skip


def miss_runs() -> list:
    return [
        ("miss x[mask] += v (prompt_encoder 88-90)", MissAugMask(), (torch.rand(6, 4), torch.tensor([-1, 0, 1, 0, 1, -1]))),
        ("miss interpolate size tensors (onnx 89)", MissInterpolateSize(), (torch.rand(1, 1, 8, 8), torch.tensor([12.0, 10.0]))),
        ("miss as_tensor mask (amg 49)", MissAsTensorMask(), (torch.rand(6, 4), torch.rand(6))),
        ("miss list by tensor (amg 55)", MissListByTensor(), (torch.rand(6, 4), torch.rand(6))),
    ]  # fmt: skip


def small_sam(img_size: int = 256):
    """vit_b's encoder (768 wide, 12 blocks, 12 heads, global attention in 2, 5, 8, 11; window 14)
    built as build_sam._build_sam does, at a smaller input size; random weights."""
    from functools import partial

    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    grid = img_size // 16
    encoder = ImageEncoderViT(
        depth=12, embed_dim=768, img_size=img_size, mlp_ratio=4,
        norm_layer=partial(nn.LayerNorm, eps=1e-6), num_heads=12, patch_size=16, qkv_bias=True,
        use_rel_pos=True, global_attn_indexes=[2, 5, 8, 11], window_size=14, out_chans=256,
    )  # fmt: skip
    decoder = MaskDecoder(
        num_multimask_outputs=3,
        transformer=TwoWayTransformer(depth=2, embedding_dim=256, mlp_dim=2048, num_heads=8),
        transformer_dim=256, iou_head_depth=3, iou_head_hidden_dim=256,
    )  # fmt: skip
    prompt = PromptEncoder(
        embed_dim=256,
        image_embedding_size=(grid, grid),
        input_image_size=(img_size, img_size),
        mask_in_chans=16,
    )
    return Sam(image_encoder=encoder, prompt_encoder=prompt, mask_decoder=decoder).eval()


def s_runs() -> list:
    _torchvision_without_c()
    from segment_anything import SamAutomaticMaskGenerator, SamPredictor, sam_model_registry
    from segment_anything.utils.onnx import SamOnnxModel

    full = sam_model_registry["vit_b"]().eval()  # 1024 x 1024 input, random weights
    sam = small_sam(256)
    emb = torch.rand(1, 256, 16, 16)
    pe = sam.prompt_encoder
    points = (torch.rand(2, 3, 2) * 256, torch.tensor([[1, 0, 1], [1, 1, -1]]))
    boxes = torch.tensor([[10.0, 20.0, 120.0, 200.0], [0.0, 0.0, 64.0, 64.0]])
    masks = torch.rand(2, 1, 64, 64)

    def prompt_and_decode(multimask):
        def run(emb, points, boxes):
            sparse, dense = pe(points=points, boxes=boxes, masks=None)
            return sam.mask_decoder(emb, pe.get_dense_pe(), sparse, dense, multimask_output=multimask)

        return run

    image = torch.randint(0, 255, (3, 256, 192)).float()
    batched = [
        {"image": image, "original_size": (300, 225), "point_coords": points[0], "point_labels": points[1]},
        {"image": image, "original_size": (300, 225), "boxes": boxes, "mask_inputs": masks},
    ]
    boxes_only = [{"image": image, "original_size": (300, 225), "boxes": boxes} for _ in range(2)]
    predictor = SamPredictor(sam)
    np_image = np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)

    def predictor_numpy(img):
        predictor.set_image(img)
        return predictor.predict(point_coords=np.array([[40.0, 50.0]]), point_labels=np.array([1]),
                                 box=np.array([10, 10, 100, 90]), multimask_output=True)  # fmt: skip

    predictor.set_image(np_image)  # for the torch-only call below (not compiled)
    in_points = predictor.transform.apply_coords_torch(torch.rand(4, 1, 2) * 120, (120, 160))

    def predictor_torch(pts, labels):
        return predictor.predict_torch(pts, labels, multimask_output=True, return_logits=True)

    amg = SamAutomaticMaskGenerator(sam, points_per_side=4, points_per_batch=16)
    amg0 = SamAutomaticMaskGenerator(
        sam, points_per_side=4, points_per_batch=16, pred_iou_thresh=0.0, stability_score_thresh=0.0
    )
    amg_crop = SamAutomaticMaskGenerator(
        sam, points_per_side=4, points_per_batch=16, pred_iou_thresh=0.0, stability_score_thresh=0.0,
        crop_n_layers=1, output_mode="uncompressed_rle",
    )  # fmt: skip
    onnx_single = SamOnnxModel(sam, return_single_mask=True)
    onnx_extra = SamOnnxModel(
        sam, return_single_mask=False, use_stability_score=True, return_extra_metrics=True
    )
    onnx_args = (emb, torch.rand(1, 3, 2) * 256, torch.tensor([[1.0, 0.0, -1.0]]), torch.rand(1, 1, 64, 64),
                 torch.tensor([1.0]), torch.tensor([300.0, 225.0]))  # fmt: skip
    return [
        ("SAM vit_b (registry, 1024) image_encoder", full.image_encoder, (torch.rand(1, 3, 1024, 1024),)),
        ("SAM vit_b@256 image_encoder (window padding)", sam.image_encoder, (torch.rand(1, 3, 256, 256),)),
        ("SAM prompt_encoder points+boxes+masks", pe, (), {"points": points, "boxes": boxes, "masks": masks}),
        ("SAM prompt_encoder points only", pe, (), {"points": points, "boxes": None, "masks": None}),
        ("SAM prompt + mask_decoder, multimask", prompt_and_decode(True), (emb, points, boxes)),
        ("SAM prompt + mask_decoder, single mask", prompt_and_decode(False), (emb, None, boxes)),
        ("SAM.forward (2 images: points; boxes + masks)", sam, (batched, True)),
        ("SAM.forward (2 images: boxes only)", sam, (boxes_only, True)),
        ("SamPredictor set_image + predict (numpy)", predictor_numpy, (np_image,)),
        ("SamPredictor.predict_torch", predictor_torch, (in_points, torch.ones(4, 1, dtype=torch.int))),
        ("SamPredictor set_image + predict (numpy) (suppress_errors)", predictor_numpy, (np_image,)),
        ("SamAutomaticMaskGenerator.generate (default thresholds)", amg.generate, (np_image,)),
        (
            "SamAutomaticMaskGenerator.generate (default thresholds) (suppress_errors)",
            amg.generate,
            (np_image,),
        ),
        ("SamAutomaticMaskGenerator.generate (thresholds 0) (suppress_errors)", amg0.generate, (np_image,)),
        (
            "SamAutomaticMaskGenerator.generate (crop_n_layers=1, thresholds 0) (suppress_errors)",
            amg_crop.generate,
            (np_image,),
        ),
        ("SamOnnxModel(return_single_mask=True)", onnx_single, onnx_args),
        ("SamOnnxModel(stability score, extra metrics)", onnx_extra, onnx_args),
    ]


class OdeFunc(nn.Module):
    """A small neural ODE right-hand side, f(t, y)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4))

    def forward(self, t, y):
        return self.net(y) * torch.cos(t)


def d_runs() -> list:
    from torchdiffeq import odeint, odeint_adjoint, odeint_event

    torch.manual_seed(0)
    func = OdeFunc()
    y0 = torch.rand(2, 4)
    t = torch.linspace(0.0, 1.0, 5)

    def solve(method, adjoint=False, **kw):
        solver = odeint_adjoint if adjoint else odeint

        def run(y0, t):
            return solver(func, y0, t, method=method, **kw)

        return run

    def event_run(y0, t0):
        return odeint_event(func, y0, t0, event_fn=lambda t, y: t - 0.5 + 0 * y[0, 0], method="dopri5",
                            odeint_interface=odeint)  # fmt: skip

    def adjoint_train(y0, t):
        out = odeint_adjoint(func, y0, t, method="dopri5", rtol=1e-4, atol=1e-5)
        out.sum().backward()
        return out

    fixed = {"step_size": 0.25}
    return [
        ("odeint dopri5", solve("dopri5", rtol=1e-4, atol=1e-5), (y0, t)),
        ("odeint dopri8", solve("dopri8", rtol=1e-4, atol=1e-5), (y0, t)),
        ("odeint bosh3", solve("bosh3", rtol=1e-4, atol=1e-5), (y0, t)),
        ("odeint adaptive_heun", solve("adaptive_heun", rtol=1e-4, atol=1e-5), (y0, t)),
        ("odeint rk4, step_size 0.25", solve("rk4", options=fixed), (y0, t)),
        ("odeint euler, step_size 0.25", solve("euler", options=fixed), (y0, t)),
        ("odeint midpoint (grid = t)", solve("midpoint"), (y0, t)),
        ("odeint implicit_adams, step_size 0.25", solve("implicit_adams", options=fixed), (y0, t)),
        ("odeint explicit_adams, step_size 0.25", solve("explicit_adams", options=fixed), (y0, t)),
        ("odeint dopri5, jump_t", solve("dopri5", rtol=1e-4, atol=1e-5, options={"jump_t": torch.tensor([0.5])}),
         (y0, t)),
        ("odeint rk4, perturb=True", solve("rk4", options={"step_size": 0.25, "perturb": True}), (y0, t)),
        ("odeint_adjoint dopri5 (forward)", solve("dopri5", adjoint=True, rtol=1e-4, atol=1e-5), (y0, t)),
        ("train odeint_adjoint dopri5, backward", adjoint_train, (y0, t)),
        ("odeint_event dopri5", event_run, (y0, torch.tensor(0.0))),
    ]  # fmt: skip


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else "pmsd"
    breaks = listen()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, backend eager, dynamic=False, eval + no_grad unless 'train'\n")
    print("| call | graphs, ops | break sites (innermost package line) |")
    print("|---|---|---|")
    runs: list = []
    if "p" in only:
        runs += probe_runs()
    if "m" in only:
        runs += miss_runs()
    if "d" in only:
        runs += d_runs()
    if "s" in only:
        runs += s_runs()
    if "d" in only:
        from torchdiffeq._impl import misc

        fallback = misc.np_nextafter
        calls = []
        misc.np_nextafter = lambda *a: calls.append(1) or fallback(*a)
    for label, fn, *rest in runs:
        compile_run(label, fn, rest[0], breaks, rest[1] if len(rest) > 1 else None)
    if "d" in only:
        print(
            f"\ntorch.nextafter present: {hasattr(torch, 'nextafter')}; "
            f"calls of torchdiffeq's np_nextafter fallback in the odeint runs: {len(calls)}"
        )


if __name__ == "__main__":
    main()
