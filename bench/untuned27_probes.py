"""Dynamo checks behind the verdicts of bench/results/precision_untuned27.md (ho27, issue 11): the 33
FL1xx findings on vit-pytorch 1.26.11 and open_clip 3.3.0, two packages no rule was tuned on. Each probe
builds a small config of the real class the finding sits in and compiles one call (torch 2.13 CPU,
backend eager, dynamic=False); a row prints the graphs, their op count and the package lines where
dynamo logged a break. A label starting "train" runs in train mode with a backward.

    cd bench && PYTHONPATH=$PWD/..:$PWD:SITE:STUB python untuned27_probes.py
    cd bench && PYTHONPATH=$PWD/..:$PWD:SITE:STUB python untuned27_probes.py --zoo --json SITES.json

SITE holds the unzipped vit_pytorch, open_clip and einops 0.8.2; STUB a `torchvision` package whose
`transforms` is an empty namespace (no torchvision wheel matches torch 2.13+cpu; vit_pytorch's
`__init__` imports it). The DINO/LeJEPA probes fill that namespace with identity modules (the
augmentations are not what is judged); open_clip's package `__init__` needs `torchvision.ops`, so
`open_clip.hf_model` is loaded under a bare package entry. Needs transformers (open_clip's HF tower).
"""

from __future__ import annotations

import importlib.util
import random
import sys
import types

import torch
from break_probe import probe_main
from torch import nn

SCRIPT = "untuned27_probes.py"
PACKAGES = ("vit_pytorch", "open_clip")


class Same(nn.Module):
    """An augmentation stand-in: any constructor arguments, returns its input."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, x):
        return x


def fill_transforms() -> None:
    """Identity modules for the torchvision transforms that DINO/LeJEPA build in `__init__`; seeds
    Python's `random` too (their `RandomApply` draws from it, as `random_apply` below)."""
    random.seed(0)
    import torchvision

    for name in ("ColorJitter", "RandomGrayscale", "RandomHorizontalFlip", "GaussianBlur", "Normalize",
                 "RandomResizedCrop"):  # fmt: skip
        setattr(torchvision.transforms, name, Same)


def hf_model_module():
    """`open_clip.hf_model` without running `open_clip/__init__.py` (it imports torchvision.ops)."""
    spec = importlib.util.find_spec("vit_pytorch")
    site = spec.submodule_search_locations[0].rsplit("/", 1)[0]
    if "open_clip" not in sys.modules:
        package = types.ModuleType("open_clip")
        package.__path__ = [f"{site}/open_clip"]
        sys.modules["open_clip"] = package
    import open_clip.hf_model

    return open_clip.hf_model


def hf_text(pooler: str):
    from transformers import BertConfig

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, pad_token_id=0)  # fmt: skip
    encoder = hf_model_module().HFTextEncoder  # output_dim 16 < width 32: a linear projection
    return encoder("bert", output_dim=16, config=config, pooler_type=pooler, proj_type="linear")


def vit_small(**extra):
    from vit_pytorch import ViT

    return ViT(image_size=32, patch_size=8, num_classes=4, dim=32, depth=1, heads=2, mlp_dim=32, **extra)


def dino(reset: bool):
    fill_transforms()
    from vit_pytorch.dino import Dino

    learner = Dino(vit_small(), image_size=32, hidden_layer="to_latent", projection_hidden_size=16,
                   projection_layers=2, num_classes_K=16)  # fmt: skip
    if reset:
        learner.reset_moving_average()  # the teacher is rebuilt on the next forward
    return learner


def lejepa():
    fill_transforms()
    from vit_pytorch.lejepa import LeJEPA

    return LeJEPA(vit_small(), image_size=32, hidden_layer="to_latent", projection_hidden_size=16,
                  projection_layers=2, num_classes_K=16, use_ema=True, use_sigreg=False)  # fmt: skip


def seeded(model):
    """`model` after seeding Python's `random` (JetViT's `random.choice` picks the attention kind)."""
    random.seed(0)
    return model


def random_apply(module_name: str):
    module = importlib.import_module(f"vit_pytorch.{module_name}")
    random.seed(0)  # the draw picks whether `fn` runs: fixed, so the row's graphs and ops repeat
    return module.RandomApply(nn.ReLU(), p=0.3)


def key_pad_lengths(sequences):
    """na_vit.py:329-330 and :371 (NaViT.forward) as written, on a list of per-image sequences:
    NaViT's own call breaks earlier at :318 inside its loop, so its log never reaches these lines."""
    lengths = torch.tensor([seq.shape[-2] for seq in sequences], dtype=torch.long)
    seq_arange = torch.arange(lengths.amax().item())
    num_images = torch.tensor([len(sequences)], dtype=torch.long)
    max_queries = num_images.amax().item()
    return seq_arange.sum() + max_queries


def cases() -> list:
    from vit_pytorch.ats_vit import ViT as AtsViT
    from vit_pytorch.cait import CaiT
    from vit_pytorch.deepvit import DeepViT
    from vit_pytorch.jet_vit import JetViT
    from vit_pytorch.looped_vit import LoopedViT
    from vit_pytorch.mpp import MPP
    from vit_pytorch.na_vit import NaViT
    from vit_pytorch.na_vit_nested_tensor import NaViT as NaViTNested
    from vit_pytorch.na_vit_nested_tensor_3d import NaViT as NaViTNested3d
    from vit_pytorch.wwt import WWT, AutoencodingHead
    from vit_pytorch.xcit import XCiT

    torch.manual_seed(0)
    img = torch.randn(2, 3, 32, 32)
    ids = torch.randint(1, 50, (2, 8))
    small = dict(image_size=32, patch_size=8, num_classes=4, dim=32, heads=2, mlp_dim=32)
    cait = dict(small, depth=2, cls_depth=1)
    images = [[torch.randn(3, 16, 32), torch.randn(3, 32, 16)], [torch.randn(3, 32, 32)]]
    flat_images = [torch.randn(3, 16, 32), torch.randn(3, 32, 16)]
    volumes = [torch.randn(3, 4, 16, 16), torch.randn(3, 2, 16, 32)]

    def looped():
        model = LoopedViT(**small, pre_loop_depth=1, num_looped_blocks=1, post_loop_depth=1, loop_depth=3,
                          adaptive_loop=True, exit_threshold=0.5).eval()  # fmt: skip
        return lambda x: model(x, adaptive_exit=True)

    def wwt():
        head = AutoencodingHead(image_size=32, patch_size=8, pathways=((2, 1, 0), (0, 1, 2)))
        return WWT(**small, depth=1, num_slots=(4, 2), interactions=((0, 1), (0, 2), (1, 2)), task_heads=head)

    jet = dict(small, depth=1, dim_head=16, window_size=2)
    nested3d = dict(small, max_frames=4, frame_patch_size=2, depth=1)
    return [
        ("open_clip HFTextEncoder bert, cls_pooler", lambda: hf_text("cls_pooler"), (ids,)),
        ("open_clip HFTextEncoder bert, mean_pooler", lambda: hf_text("mean_pooler"), (ids,)),
        ("ats_vit ViT", lambda: AtsViT(**small, depth=2, max_tokens_per_depth=(8, 4)), (img,)),
        ("cait CaiT layer_dropout 0.5", lambda: CaiT(**cait, layer_dropout=0.5), (img,)),
        ("cait CaiT layer_dropout 0", lambda: CaiT(**cait), (img,)),
        ("xcit XCiT layer_dropout 0.5", lambda: XCiT(**cait, layer_dropout=0.5), (img,)),
        ("train dino Dino (teacher built in __init__)", lambda: dino(reset=False), (img,)),
        ("train dino Dino after reset_moving_average()", lambda: dino(reset=True), (img,)),
        ("dino RandomApply(ReLU, p=0.3)", lambda: random_apply("dino"), (img,)),
        ("es_vit RandomApply(ReLU, p=0.3)", lambda: random_apply("es_vit"), (img,)),
        ("lejepa RandomApply(ReLU, p=0.3)", lambda: random_apply("lejepa"), (img,)),
        ("levjepa RandomApply(ReLU, p=0.3)", lambda: random_apply("levjepa"), (img,)),
        ("train lejepa LeJEPA use_ema (target built in __init__)", lejepa, (img,)),
        ("jet_vit JetViT attn_layers [('LA', 'FA')]", lambda: seeded(JetViT(**jet, attn_layers=[("LA", "FA")])), (img,)),
        ("jet_vit JetViT attn_layers ['FA']", lambda: JetViT(**jet, attn_layers=["FA"]), (img,)),
        ("looped_vit LoopedViT adaptive_exit", looped, (img,)),
        ("train mpp MPP(ViT) (ViT's 2-d cls_token: einops error at :161)", lambda: MPP(vit_small(), patch_size=8, dim=32), (img,)),
        ("train mpp MPP(DeepViT)", lambda: MPP(DeepViT(**small, depth=1), patch_size=8, dim=32), (img,)),
        ("na_vit's key padding lines (:329-:330, :371), the code alone", lambda: key_pad_lengths, (images[0],)),
        ("navit NaViT eval, 2 groups", lambda: NaViT(**small, depth=1), (images,)),
        ("train navit NaViT token_dropout_prob 0.25", lambda: NaViT(**small, depth=1, token_dropout_prob=0.25), (images,)),
        ("navit nested NaViT eval", lambda: NaViTNested(**small, depth=1), (flat_images,)),
        ("train navit nested NaViT token_dropout_prob 0.25",
         lambda: NaViTNested(**small, depth=1, token_dropout_prob=0.25), (flat_images,)),
        ("navit nested 3d NaViT eval", lambda: NaViTNested3d(**nested3d), (volumes,)),
        ("train navit nested 3d NaViT token_dropout_prob 0.25",
         lambda: NaViTNested3d(**nested3d, token_dropout_prob=0.25), (volumes,)),
        ("wwt WWT + AutoencodingHead", wwt, (img,)),
    ]  # fmt: skip


def zoo() -> list:
    """Recall (brief step 3): the first ten model classes of vit-pytorch's README in its order, skipping
    NaViT, DistillableViT and CaiT (NaViT and CaiT are probed above; distillation is a wrapper), each
    built with the README's own example config and called on the README's input, once in eval and once
    in train mode with a backward (dropout on where the README sets it)."""
    from vit_pytorch import SimpleViT, ViT
    from vit_pytorch.cct import CCT
    from vit_pytorch.cross_vit import CrossViT
    from vit_pytorch.cvt import CvT
    from vit_pytorch.deepvit import DeepViT
    from vit_pytorch.levit import LeViT
    from vit_pytorch.pit import PiT
    from vit_pytorch.t2t import T2TViT
    from vit_pytorch.twins_svt import TwinsSVT

    torch.manual_seed(0)
    img256, img224 = torch.randn(1, 3, 256, 256), torch.randn(1, 3, 224, 224)
    vit = dict(image_size=256, patch_size=32, num_classes=1000, dim=1024, depth=6, heads=16, mlp_dim=2048)
    cvt = {f"s{s}_{k}": v for s, row in ((1, (64, 7, 4, 3, 2, 1, 1, 4)), (2, (192, 3, 2, 3, 2, 3, 2, 4)),
                                         (3, (384, 3, 2, 3, 2, 4, 10, 4)))
           for k, v in zip(("emb_dim", "emb_kernel", "emb_stride", "proj_kernel", "kv_proj_stride", "heads",
                            "depth", "mlp_mult"), row, strict=True)}  # fmt: skip
    twins = {f"s{s}_{k}": v for s, row in ((1, (64, 4, 7, 7, 1)), (2, (128, 2, 7, 7, 1)), (3, (256, 2, 7, 7, 5)),
                                           (4, (512, 2, 7, 7, 4)))
             for k, v in zip(("emb_dim", "patch_size", "local_patch_size", "global_k", "depth"), row, strict=True)}  # fmt: skip
    models = [
        ("zoo ViT", lambda: ViT(**vit, dropout=0.1, emb_dropout=0.1), (img256,)),
        ("zoo SimpleViT", lambda: SimpleViT(**vit), (img256,)),
        ("zoo DeepViT", lambda: DeepViT(**vit, dropout=0.1, emb_dropout=0.1), (img256,)),
        ("zoo T2TViT", lambda: T2TViT(dim=512, image_size=224, depth=5, heads=8, mlp_dim=512, num_classes=1000,
                                      t2t_layers=((7, 4), (3, 2), (3, 2))), (img224,)),
        ("zoo CCT", lambda: CCT(img_size=(224, 448), embedding_dim=384, n_conv_layers=2, kernel_size=7, stride=2,
                                padding=3, pooling_kernel_size=3, pooling_stride=2, pooling_padding=1,
                                num_layers=14, num_heads=6, mlp_ratio=3.0, num_classes=1000,
                                positional_embedding="learnable"), (torch.randn(1, 3, 224, 448),)),
        ("zoo CrossViT", lambda: CrossViT(image_size=256, num_classes=1000, depth=4, sm_dim=192, sm_patch_size=16,
                                          sm_enc_depth=2, sm_enc_heads=8, sm_enc_mlp_dim=2048, lg_dim=384,
                                          lg_patch_size=64, lg_enc_depth=3, lg_enc_heads=8, lg_enc_mlp_dim=2048,
                                          cross_attn_depth=2, cross_attn_heads=8, dropout=0.1, emb_dropout=0.1),
         (img256,)),
        ("zoo PiT", lambda: PiT(image_size=224, patch_size=14, dim=256, num_classes=1000, depth=(3, 3, 3), heads=16,
                                mlp_dim=2048, dropout=0.1, emb_dropout=0.1), (img224,)),
        ("zoo LeViT", lambda: LeViT(image_size=224, num_classes=1000, stages=3, dim=(256, 384, 512), depth=4,
                                    heads=(4, 6, 8), mlp_mult=2, dropout=0.1), (img224,)),
        ("zoo CvT", lambda: CvT(num_classes=1000, **cvt, dropout=0.0), (img224,)),
        ("zoo TwinsSVT", lambda: TwinsSVT(num_classes=1000, **twins, peg_kernel_size=3, dropout=0.0), (img224,)),
    ]  # fmt: skip
    return models + [(f"train {label}", build, args) for label, build, args in models]


if __name__ == "__main__":
    probe_main(zoo if "--zoo" in sys.argv else cases, PACKAGES, SCRIPT, sys.argv)
