"""Dynamo checks behind the verdicts of bench/results/precision_untuned28.md (ho28, issue 11): the 60
drawn FL1xx findings on peft 0.21.2 and ultralytics 8.4.190, two packages no rule was tuned on. Each probe
builds a small config of the real class a finding sits in and compiles one call (torch 2.13 CPU, backend
eager, dynamic=False); a row prints the graphs, their op count and the package lines where dynamo logged a
break. A label starting "train" runs in train mode with a backward (an ultralytics "train" call is the
training forward on a batch dict, which computes the loss inside the model's `forward`).

    cd bench && PYTHONPATH=$PWD/..:$PWD TORCHVISION_STUB=STUB python untuned28_probes.py
    cd bench && PYTHONPATH=$PWD/..:$PWD TORCHVISION_STUB=STUB python untuned28_probes.py --zoo --json SITES.json

run with a Python that has peft 0.21.2, ultralytics 8.4.190 (both `--no-deps`), transformers 5.17,
accelerate, numpy, scipy, matplotlib, pillow, pyyaml and opencv-python-headless. STUB holds a `torchvision`
stand-in (no wheel matches torch 2.13+cpu): a package with `__version__` and a `torchvision-*.dist-info`
holding only `METADATA` (ultralytics reads the version at import); no probe runs a torchvision op. It goes
on `sys.path` after peft and transformers are imported: transformers would take it for the real package.
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
from break_probe import CallWith, probe_main
from torch import nn

SCRIPT = "untuned28_probes.py"
PACKAGES = ("peft", "ultralytics")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-settings-"))  # not the user's home
os.environ.setdefault("YOLO_VERBOSE", "False")


def with_stub() -> None:
    """peft (and so transformers, which caches what it finds installed) first, then the stand-in."""
    import peft  # noqa: F401
    from transformers.utils import is_torchvision_available

    is_torchvision_available()
    stub = os.environ.get("TORCHVISION_STUB")
    if stub and stub not in sys.path:
        sys.path.append(stub)


# --- peft -------------------------------------------------------------------------------------------


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


def adapted(config, base=None):
    from peft import get_peft_model

    torch.manual_seed(0)
    return get_peft_model(base if base is not None else mlp(), config)


def lora(**extra):
    from peft import LoraConfig

    return LoraConfig(target_modules=["0", "2"], r=4, init_lora_weights=False, **extra)


def merged_then_disabled():
    """LoRA merged into the base weights, then adapters disabled (what `with model.disable_adapter():`
    does): the next forward unmerges, i.e. runs `unmerge` (merged, so past its "Already unmerged" branch)."""
    model = adapted(lora())
    model.merge_adapter()
    model.base_model.disable_adapter_layers()
    return model


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x)[0]


def lora_mha():
    from peft import LoraConfig

    torch.manual_seed(0)
    return adapted(LoraConfig(target_modules=["mha"], r=4, init_lora_weights=False), Attention())


class AttentionAndProjection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return self.proj(self.mha(x, x, x)[0])


def lora_mha_other_adapter_active():
    """Two adapters, "default" on the attention and "other" on the projection, "other" active: the
    attention layer's forward merges no adapter (none of the active ones is its own), then unmerges."""
    from peft import LoraConfig

    torch.manual_seed(0)
    model = adapted(
        LoraConfig(target_modules=["mha"], r=4, init_lora_weights=False), AttentionAndProjection()
    )
    model.add_adapter("other", LoraConfig(target_modules=["proj"], r=4, init_lora_weights=False))
    model.set_adapter("other")
    return model


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    return LlamaForCausalLM(config)


def causal(config):
    return adapted(config, tiny_llama())


def cpt():
    from peft import CPTConfig

    config = CPTConfig(task_type="CAUSAL_LM", cpt_token_ids=[5, 6, 7, 8], cpt_mask=[1, 1, 1, 1],
                       cpt_tokens_type_mask=[1, 2, 2, 2])  # fmt: skip
    return causal(config)


def cpt_call(model):
    ids = torch.randint(1, 64, (2, 6), generator=torch.Generator().manual_seed(0))
    return CallWith(
        model, lambda m, i: m(input_ids=i, labels=i, input_type_mask=torch.ones_like(i) * 4).loss
    ), ids


def prompt_encoder(kind: str):
    from peft import PromptEncoderConfig
    from peft.tuners.p_tuning.model import PromptEncoder

    torch.manual_seed(0)
    config = PromptEncoderConfig(task_type="CAUSAL_LM", num_virtual_tokens=4, token_dim=16, num_transformer_submodules=1,
                                 encoder_hidden_size=16, encoder_reparameterization_type=kind)  # fmt: skip
    return PromptEncoder(config)


def convert_compiled_threshold():
    """`_convert_module_to_lora` as `convert_to_lora(..., compile_kwargs={...})` compiles it, with a float
    rank (an energy threshold): the call that reaches `_find_cutoff_index`."""
    from peft import LoHaConfig
    from peft.tuners.lora.conversion import _convert_module_to_lora

    model = adapted(LoHaConfig(target_modules=["0", "2"], r=4, init_weights=False))
    layer = model.base_model.model[0]
    return CallWith(layer, lambda m, rank: _convert_module_to_lora(m, rank)), 0.9


def peft_cases() -> list:
    from peft import BOFTConfig, FrodConfig, LoHaConfig, LoraConfig, VBLoRAConfig

    x = torch.randn(3, 16)
    ids = torch.randint(1, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    ids_alora = ids.clone()
    ids_alora[:, 3:5] = torch.tensor([9, 10])
    return [
        ("lora Linear", lambda: adapted(lora()), (x,)),
        ("lora merged, then disabled (forward unmerges)", merged_then_disabled, (x,)),
        ("lora MultiheadAttention (forward merges, unmerges)", lora_mha, (torch.randn(2, 5, 16),)),
        ("lora MultiheadAttention, another adapter active", lora_mha_other_adapter_active, (torch.randn(2, 5, 16),)),
        ("train loha LoHa", lambda: adapted(LoHaConfig(target_modules=["0", "2"], r=4, init_weights=False)), (x,)),
        ("loha LoHa eval", lambda: adapted(LoHaConfig(target_modules=["0", "2"], r=4, init_weights=False)), (x,)),
        ("train vblora VB-LoRA", lambda: adapted(VBLoRAConfig(target_modules=["0", "2"], r=4, num_vectors=8, vector_length=4)), (x,)),
        ("boft BOFT n_butterfly_factor 1", lambda: adapted(BOFTConfig(target_modules=["0", "2"], boft_block_size=4, boft_n_butterfly_factor=1, init_weights=False)), (x,)),
        ("frod FRoD", lambda: adapted(FrodConfig(target_modules=["0", "2"], init_weights=False)), (x,)),
        ("p_tuning PromptEncoder LSTM", lambda: prompt_encoder("LSTM"), (torch.arange(4).unsqueeze(0),)),
        ("p_tuning PromptEncoder MLP", lambda: prompt_encoder("MLP"), (torch.arange(4).unsqueeze(0),)),
        ("train cpt CPT, labels", lambda: cpt_call(cpt())[0], (cpt_call(cpt())[1],)),
        ("alora aLoRA invocation [9, 10]", lambda: causal(LoraConfig(task_type="CAUSAL_LM", r=4, target_modules=["q_proj", "v_proj"], alora_invocation_tokens=[9, 10])), (ids_alora,)),
        ("cpt CPTEmbedding.get_projection lines :137-:141 alone", lambda: cpt_masked_update,
         (torch.randn(4, 16), torch.full((4,), 0.1))),
        ("convert_to_lora compiled, rank 0.9", lambda: convert_compiled_threshold()[0], (0.9,)),
    ]  # fmt: skip


# --- ultralytics ------------------------------------------------------------------------------------


def yolo(cls_name: str, yaml: str, **args):
    from ultralytics.cfg import get_cfg
    from ultralytics.nn import tasks

    torch.manual_seed(0)
    model = getattr(tasks, cls_name)(yaml, verbose=False)
    model.args = get_cfg()  # the training hyperparameters the loss reads (box, cls, dfl, overlap_mask, ...)
    for key, value in args.items():
        setattr(model.args, key, value)
    return model


def yolo_batch(kind: str = "detect", n: int = 2, size: int = 64, overlap: bool = True) -> dict:
    """A training batch as ultralytics' collate builds it: 3 objects, 2 on image 0, 1 on image 1."""
    g = torch.Generator().manual_seed(0)
    batch = {"img": torch.rand(n, 3, size, size, generator=g), "batch_idx": torch.tensor([0.0, 0.0, 1.0]),
             "cls": torch.tensor([[0.0], [1.0], [0.0]])}  # fmt: skip
    boxes = torch.tensor([[0.5, 0.5, 0.3, 0.3], [0.3, 0.3, 0.2, 0.4], [0.6, 0.6, 0.4, 0.2]])
    batch["bboxes"] = torch.cat((boxes, torch.tensor([[0.1], [0.0], [0.3]])), 1) if kind == "obb" else boxes
    q = size // 4
    if kind == "seg":
        masks = torch.zeros(n if overlap else 3, q, q)
        if overlap:  # image i's objects numbered 1, 2, ... in one mask
            masks[0, 4:10, 4:10], masks[0, 2:5, 2:5], masks[1, 5:12, 5:12] = 1, 2, 1
        else:
            masks[0, 4:10, 4:10], masks[1, 2:5, 2:5], masks[2, 5:12, 5:12] = 1, 1, 1
        batch["masks"] = masks
        batch["sem_masks"] = (torch.arange(q).view(1, 1, -1) % 3).expand(n, q, q).clone()
    if kind == "pose":
        batch["cls"] = torch.zeros(3, 1)
        batch["keypoints"] = torch.rand(3, 17, 3, generator=g)
    if kind == "sem":
        batch = {
            "img": batch["img"],
            "semantic_mask": (torch.arange(size).view(1, 1, -1) % 3).expand(n, size, size).clone(),
        }
    return batch


def lrpc_head():
    from ultralytics.nn.modules.head import LRPCHead

    torch.manual_seed(0)
    head = LRPCHead(nn.Conv2d(8, 5, 1), nn.Conv2d(8, 1, 1), nn.Conv2d(8, 4, 1), enabled=True)
    return CallWith(head, lambda m, c, loc: m(c, loc, 0.25))


def cpt_masked_update(weights, eps):
    """cpt/model.py:137-141 (`CPTEmbedding.get_projection`) alone: in the real frame the break at :137 sits in
    a `torch.no_grad()` block, so dynamo runs the rest of the frame eagerly and never logs :139."""
    new_embeddings_weights = weights.clone()
    token_norm = torch.norm(new_embeddings_weights, p=2, dim=1)
    projection_mask = token_norm > 0
    new_embeddings_weights[projection_mask] *= (
        eps[projection_mask] / (token_norm[projection_mask].clamp(min=eps[projection_mask]))
    ).view(-1, 1)
    return new_embeddings_weights


def obb_target_filter(targets, imgsz, fg_mask):
    """loss.py:1089-1090 and :1128 (`v8OBBLoss.loss`) alone, with `imgsz` a tensor as there: in the real
    frame the break at :1089 sits in a `try` block, so dynamo runs the rest of the frame eagerly."""
    rw, rh = targets[:, 4] * imgsz[1], targets[:, 5] * imgsz[0]  # :1089 without its float(): a tensor
    targets = targets[(rw >= 2) & (rh >= 2)]
    if fg_mask.sum():
        return targets * 2
    return targets


def ultralytics_cases() -> list:
    img = torch.rand(1, 3, 64, 64)
    return [
        ("train yolov8n-seg v8SegmentationLoss", lambda: yolo("SegmentationModel", "yolov8n-seg.yaml"), (yolo_batch("seg"),)),
        ("train yolo26n-seg overlap_mask True", lambda: yolo("SegmentationModel", "yolo26n-seg.yaml"), (yolo_batch("seg"),)),
        ("train yolo26n-seg overlap_mask False", lambda: yolo("SegmentationModel", "yolo26n-seg.yaml", overlap_mask=False), (yolo_batch("seg", overlap=False),)),
        ("train yolov8n-pose v8PoseLoss", lambda: yolo("PoseModel", "yolov8n-pose.yaml"), (yolo_batch("pose"),)),
        ("train yolo26n-pose PoseLoss26", lambda: yolo("PoseModel", "yolo26n-pose.yaml"), (yolo_batch("pose"),)),
        ("train yolov8n-obb v8OBBLoss", lambda: yolo("OBBModel", "yolov8n-obb.yaml"), (yolo_batch("obb"),)),
        ("train yolo26n-sem SemanticSegmentationLoss", lambda: yolo("SemanticSegmentationModel", "yolo26n-sem.yaml"), (yolo_batch("sem"),)),
        ("obb v8OBBLoss lines :1089-:1090, :1128 alone", lambda: obb_target_filter,
         (torch.rand(3, 7) * 4, torch.tensor([64.0, 64.0]), torch.tensor([True, False]))),
        ("yoloe LRPCHead enabled, conf 0.25", lrpc_head, (torch.randn(2, 8, 4, 4), torch.randn(2, 8, 4, 4))),
        ("yolov8n forward profile=True", lambda: CallWith(yolo("DetectionModel", "yolov8n.yaml"), lambda m, x: m(x, profile=True)), (img,)),
    ]  # fmt: skip


def cases() -> list:
    return peft_cases() + ultralytics_cases()


def zoo() -> list:
    """Recall (brief step 4): eight peft methods on a tiny Llama (the methods of peft's README and quicktour
    first: LoRA, prompt/prefix tuning, IA3, then LoHa, LoKr, AdaLoRA, OFT) and eight ultralytics models from
    their shipped YAMLs at scale n (detect v8/11/26, segment v8/26, pose, OBB, classify) and RT-DETR-l, each
    called once in eval under no_grad on a 64 px image (ids for the Llama)."""
    from peft import (
        AdaLoraConfig,
        IA3Config,
        LoHaConfig,
        LoKrConfig,
        LoraConfig,
        OFTConfig,
        PrefixTuningConfig,
        PromptTuningConfig,
    )

    ids = torch.randint(1, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    qv = ["q_proj", "v_proj"]
    methods = [
        ("LoRA", LoraConfig(task_type="CAUSAL_LM", r=4, target_modules=qv)),
        ("prompt tuning", PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=4)),
        ("prefix tuning", PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=4)),
        ("IA3", IA3Config(task_type="CAUSAL_LM", target_modules=["k_proj", "v_proj", "down_proj"],
                          feedforward_modules=["down_proj"])),
        ("LoHa", LoHaConfig(task_type="CAUSAL_LM", r=4, target_modules=qv)),
        ("LoKr", LoKrConfig(task_type="CAUSAL_LM", r=4, target_modules=qv)),
        ("AdaLoRA", AdaLoraConfig(task_type="CAUSAL_LM", init_r=6, target_r=4, target_modules=qv, total_step=10)),
        ("OFT", OFTConfig(task_type="CAUSAL_LM", r=4, oft_block_size=0, target_modules=qv)),
    ]  # fmt: skip
    img = torch.rand(1, 3, 64, 64)
    models = [
        ("DetectionModel", "yolov8n.yaml"), ("DetectionModel", "yolo11n.yaml"), ("DetectionModel", "yolo26n.yaml"),
        ("SegmentationModel", "yolov8n-seg.yaml"), ("SegmentationModel", "yolo26n-seg.yaml"),
        ("PoseModel", "yolov8n-pose.yaml"), ("OBBModel", "yolov8n-obb.yaml"),
        ("ClassificationModel", "yolov8n-cls.yaml"), ("RTDETRDetectionModel", "rtdetr-l.yaml"),
    ]  # fmt: skip
    return [
        (f"zoo peft {name} (tiny Llama)", lambda c=config: causal(c), (ids,)) for name, config in methods
    ] + [(f"zoo ultralytics {yaml}", lambda c=cls, y=yaml: yolo(c, y), (img,)) for cls, yaml in models]


if __name__ == "__main__":
    with_stub()
    probe_main(zoo if "--zoo" in sys.argv else cases, PACKAGES, SCRIPT, sys.argv)
