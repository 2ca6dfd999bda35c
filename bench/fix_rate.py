"""Fix rate on real code: how many real graph breaks do fuselint's fixes remove, changing no output?

For every model of `bench/real_corpus.py`:
1. trace the installed packages with dynamo (break sites, graphs, break events) and save the
   eager outputs;
2. copy the corpus packages, run `fuselint check --fix --unsafe-fixes` over the files that hold
   the break sites and each model's own file (`real_corpus.own_file`: the file of the class the
   entry calls; fixes19, measured over the whole corpus: no count and no output changed), what a
   user fixing their model's breaks would run (`--sites-only`: the break sites' files alone);
3. trace again with the fixed copy first on the path, and compare the outputs (same seed, same
   weights, same inputs).

Each remaining site is listed with dynamo's reason: the work list for the fixes.

    PYTHONPATH=. python bench/fix_rate.py [--models a,b] [--write bench/results/fix_rate.md]
    PYTHONPATH=. python bench/fix_rate.py --models hf_reformer,hf_vits --prove   # only proven fixes

With `--reuse EARLIER` (an earlier run's `--keep` folder) the traces before the fix are read from
it, and the packages whose fixed files come out byte-identical to its copy keep its rows, and so
does a model whose earlier fixed trace imported only files that come out byte-identical (the
trace's `imported` list, fixes17): only the other models are traced again.

With `--prove` every model is also an `--entry` of the fixing run, so a fix is written to the
copy only after the models prove it (fuselint/verify/prove.py); fuselint's `fix rejected:` lines
are printed, and its summary joins the table's header.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import (  # noqa: E402
    HERE,
    HOLDOUT,
    MODELS,
    ROOT,
    TUNE,
    UNTUNED9,
    UNTUNED16,
    UNTUNED17,
    UNTUNED19,
    child_env,
    describe_site,
    package_dirs,
    package_of,
    project_config,
    run_child,
    short_path,
)


def fix_copy(
    files: list[str], packages: dict[str, str], into: Path, prove: list[str] | None = None
) -> tuple[dict[str, str], str]:
    """Copy the packages under `into`, fix the copies of `files`; the copies' paths and fuselint's
    summary. `prove`: models whose entries must prove each fix (`--entry`, the copy imported)."""
    moved: dict[str, str] = {}
    for name, folder in packages.items():
        shutil.copytree(folder, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        for f in files:
            if f.startswith(folder + "/"):
                moved[f] = str(into / name / f[len(folder) + 1 :])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fuselint",
            "check",
            "--no-cache",
            "--exit-zero",
            "--fix",
            "--unsafe-fixes",
            "--config",
            str(project_config(into)),
            *(a for model in prove or () for a in ("--entry", f"{HERE}:{model}")),
            *(() if prove else ("--no-prove",)),
            *sorted(moved.values()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            # bench/ too: an entry's factory may import a sibling module (`untuned16_select`)
            "PYTHONPATH": os.pathsep.join(
                (str(into), str(ROOT), str(HERE.parent), os.environ.get("PYTHONPATH", ""))
            ),
        },
    )
    summary = [line for line in done.stdout.splitlines() if line.startswith(("Found", "Fixed"))]
    proof = [
        line
        for line in done.stderr.splitlines()
        if line.startswith(("fix rejected", "fuselint: proved", "fuselint: trial", "fuselint: confirmed"))
    ]
    if proof:
        print("\n".join(proof), file=sys.stderr)
    proved = [line for line in proof if line.startswith("fuselint: proved")]
    return moved, " ".join(summary + proved[-1:]) or done.stderr.strip()[-200:]


# Why no sound source fix removes a site that is left, by (file, a piece of its line): the
# reasons checked at each line (docs/NOTES.md, fixes3). A fix must keep every output equal, its
# shape included, for every input; these sites either size what the caller sees by the data, or
# need a rewrite that only fits the one model.
NO_FIX = {
    ("modeling_longformer.py", ".any().item()"): "the bool picks the global-attention path, whose "
    "own `nonzero` calls size tensors by the number of global tokens: both paths keep dynamic shapes; "
    "the bool also decides whether `global_attentions` is a tuple or None, an output the caller sees. "
    "Checked with dynamo (fixes9): with one global token per row the global path breaks at 6 more "
    "sites (modeling_longformer.py 859, 867, 870 nonzero sizes, 934, 985, 1023), so taking it "
    "whenever compiling trades 1 site for 6; skipping it would drop the global tokens' attention",
    ("modeling_encodec.py", "if length <= max_pad"): "fixed since fixes14 (FL102's int twins of the "
    "0-d int buffers: 38 -> 16 graphs, outputs bit-equal); left only where a copy of the class also "
    "uses the buffers as tensors or writes them with another value",
    ("modeling_encodec.py", "self.lstm("): "dynamo does not trace `nn.LSTM` (gb0014); a Python LSTM "
    "cell is not bit-equal to the fused ATen LSTM kernel",
    ("modeling_vits.py", "predicted_lengths.max()"): "the waveform's length is the sum of predicted "
    "durations: an output shape the caller sees",
    ("modeling_qwen2_vl.py", "lengths.tolist()"): "per-image chunk lengths from the `grid_thw` input "
    "size the split; a block-diagonal mask is not bit-equal (softmax over a longer row)",
    ("vision_utils.py", "repeat_interleave"): "segment count and lengths come from the `grid_thw` "
    "input: a data-dependent shape returned to the caller",
    ("vision_utils.py", "grid_thw.tolist()"): "position ids per image from `grid_thw` values: a "
    "data-dependent shape returned to the caller",
    ("modeling_switch_transformers.py", ".nonzero()"): "the MoE loop visits only the hit experts; "
    "a dense form runs every expert on every token (num_experts times the FLOPs) and is not "
    "bit-equal: an expert's MLP on a subset of the rows differs from it on all rows, then indexed, for "
    "5 of 20 random subsets at the corpus's sizes (32 -> 64 -> 32, 32 tokens, CPU)",
    ("modeling_switch_transformers.py", "torch.where(expert_mask"): "tokens per expert: the gathered "
    "states' shape is the routing's; see the line above",
    ("loop.py", "edge_index[:, mask]"): "the returned edge list drops self loops: its length, seen "
    "by the caller, is data-dependent; keeping the loops with zero weight instead would change the "
    "`edge_index` that `remove_self_loops`/`add_remaining_self_loops` return and GCN/GAT hand on",
    ("_scatter.py", "int(index.max())"): "the output's size is `index.max() + 1` (graphs in the "
    "batch), a shape the caller sees; `global_mean_pool(x, batch)` passes `size=None`, and no caller "
    "in the package knows the number of graphs. The user's own call can: `global_mean_pool(x, batch, "
    "size=2)` traces in one graph, the same output (fixes9), a change to the caller's code, not the package's",
    # fixes5: the diffusers entries (docs/NOTES.md, fixes5)
    # fixes9: what a traced pipeline loop shows once its progress bar is gone (the DDIM and DDPM
    # steps' `alphas_cumprod[timestep]`, fixed since fixes11: docs/NOTES.md)
    ("group_offloading.py", "Group offloading is not enabled"): "not a site of its own: with `__call__` "
    "in eager (a break in its loop), `_execution_device` is compiled as a frame of its own and its "
    "`raise ValueError` has no handler there (gb0088); inlined into a traced `__call__` it is caught "
    "(Score-SDE-VE's pipeline: 3 sites -> 0 once its loop traced)",
    (
        "pipeline_utils.py",
        "modules = [m for m in modules if isinstance(",
    ): "not a site of its own: the `device` "
    "property's comprehension is a frame of its own (gb4347) only when `__call__` runs in eager; see "
    "group_offloading.py above",
    # fixes13: the nonzero of `index_for_timestep` (338) is FL106's second-match fix now.
    ("scheduling_consistency_models.py", "indices[0]).item()"): "(untuned) the step index is a Python "
    "int by contract: `step_index` is a public property (`-> int`) that pipelines read as one "
    "(`scheduler.sigmas[scheduler.step_index + 1]`, LEDITS++), `step` then indexes `self.sigmas` with it "
    "and compares `step_index + 1 < num_train_timesteps` in Python, and `_step_index += 1` counts on the "
    "host. A 0-d tensor in its place changes what callers see and moves the break to those reads (a "
    "computed index, a data-dependent `if`). The value depends on the timestep, which the pipeline's "
    "loop computes in the graph, so no host int exists to keep; `set_begin_index(0)` in the pipeline "
    "would skip the lookup but reads index 0 where the schedule repeats its first timestep (the "
    "lookup then gives 1)",
    ("modeling_led.py", ".any().item()"): "(untuned) Longformer's global-attention switch (see "
    "modeling_longformer.py)",
    ("transformer_lumina2.py", ".tolist()"): "per-sample caption lengths from the mask size the packed "
    "sequence, its position ids and its padding; a static length (the mask's width) attends over longer, "
    "masked rows: not bit-equal (qwen2_vl's reason), and a rewrite of the model's own packing",
    ("scheduling_sasolver.py", "lambda t: 1 if t >= 200"): "fixed since fixes9 (FL102's stored-lambda "
    "fix); a user's own `tau_func` is not rewritten",
    ("attention_processor.py", "torch.nonzero(mask.flatten()"): "(holdout) Mochi attends, per sample, "
    "only the prompt's valid tokens: a data-dependent token count; a masked form attends over longer "
    "rows, not bit-equal",
    # fixes16: UNTUNED16 (kornia and torch_geometric's layers), each line read; the numbers are
    # `PYTHONPATH=. python bench/untuned16_checks.py` (a second input of the entry's shape: another
    # seeded random image, or for the matcher a noisy copy of the first descriptors)
    ("aliked.py", "mask.nonzero()[:, 0]"): "(untuned16) an image's keypoints are its score maxima "
    "above the image's mean: their number is the length of the returned keypoints, scores and "
    "descriptors (139 on the entry's image, 137 on another)",
    ("detector.py", "nmsed[b].nonzero("): "(untuned16) DISK's keypoints are the heatmap's maxima above "
    "the threshold: their number is the returned features' length (70 on the entry's image, 79 on "
    "another)",
    ("matching.py", "ratio[mask]"): "(untuned16) the matches are the rows whose distance ratio "
    "passes: their number is the returned matches' length (0 on the entry's random descriptors, 16 "
    "where the second set is a noisy copy of the first)",
    ("scale_space_detector.py", "mask_flat[0].nonzero("): "(untuned16) one image takes a sparse "
    "top-K over its NMS candidates, whose number is the data's; a batch takes a dense top-K over "
    "every voxel with non-candidates at -inf. The output has num_features slots either way (8000 "
    "for SIFTFeatureScaleSpace, 500 for ScaleSpaceDetector, on both inputs), so dropping the one-image path would keep shapes, but that chooses between two of "
    "the function's own algorithms (whether they agree bit for bit was not checked), not a "
    "rewrite of a general pattern",
    ("spatial_soft_argmax.py", "torch.where(nms_"): "(untuned16) the sub-pixel refinement solves "
    "only at the NMS maxima and their neighbours, a data-dependent count; the output is dense, so a "
    "form that solves at every voxel has static shapes, but it re-implements the function (kornia's "
    "own comments give the sparse form as the cure of the dense one's cost), not a general rewrite",
    ("spatial_soft_argmax.py", "_dil[keep]"): "(untuned16) the neighbours of the NMS maxima that lie "
    "inside the volume: their number follows the maxima (the line above)",
    # SOLD2 (kn_sold2, kn_sold2_detector): the line segments are the data's
    ("sold2_detector.py", "torch.where(candidate_map)"): "(untuned16) every pair of detected "
    "junctions is a candidate: the junctions' number is the data's (line 606), and the returned "
    "segments are a subset of these pairs (160 on the entry's image, 173 on another)",
    ("sold2_detector.py", "candidate_index_map[detection_results]"): "(untuned16) the detected "
    "segments: their number is the returned line segments' length",
    ("sold2_detector.py", "heatmap[heatmap > valid_thresh]"): "(untuned16) the mean of the top 20% of "
    "the values above the threshold: a data-sized prefix; the static form (a masked sum over every "
    "sorted value) reduces in another order and differs bit for bit on 2 of 20 random heatmaps",
    ("sold2_detector.py", "if subheatmap.max() > valid_thresh"): "(untuned16) the branch calls "
    "`refine_heatmap`, whose own masked read (the line above) stays: computing both paths and "
    "selecting would keep that break on every block, and divide by the mean of an empty prefix where "
    "the block is below the threshold",
    ("sold2_detector.py", "seg_indexes = torch.where("): "(untuned16) the candidate segments "
    "(pairs of the data's junctions, see `torch.where(candidate_map)`)",
    ("sold2_detector.py", "detected_seg_indexes = torch.where("): "(untuned16) the detected segments, "
    "whose number is the returned segments' length",
    ("sold2_detector.py", "segment[max_idx][None]"): "(untuned16) a loop over the detected segments "
    "(their number is the data's) with a data-dependent index (`argmax`) into each",
    ("sold2_detector.py", "torch.where(torch.all(junctions[None]"): "(untuned16) the junction ids of "
    "each segment, after `torch.unique` (a data-dependent count) of the refined junctions",
    ("sold2_detector.py", "torch.where(patch_mask >= 0)"): "(untuned16) the points of a local patch: "
    "the mask is all True by construction (`torch.zeros(...) >= 0`), so the count is "
    "(2r + 1)^2 for the config's radius r, but fuselint does not evaluate constant tensors; a rewrite "
    "would spell this one patch, not a general pattern",
    ("sold2_detector.py", "patch_center_dist <= self.local_patch_radius"): "(untuned16) the disc of "
    "the patch: config-only like the line above, and the same reason",
    ("sold2_detector.py", "torch.where(torch.triu(line_map))"): "(untuned16) the segments of the "
    "returned line map: their number is the output's length",
    ("sold2_detector.py", "torch.where(prob >= prob_thresh)"): "(untuned16) the junctions are the "
    "heatmap's points above the threshold: their number sizes every later tensor and the output",
    ("sold2_detector.py", "prob[prob >= prob_thresh]"): "(untuned16) the junctions' scores (the line above)",
    ("bbox.py", "while order.shape[0] > 0"): "(xfn22, pad23) NMS's size check is decided now "
    "(FL102's guard fix, the counts carried across the call), and dynamo breaks at the greedy loop right "
    "after it, as xfn22 measured: a loop that runs once per kept box, each pass a data-dependent read "
    "(the next site); the boxes kept are the returned count",
    ("bbox.py", "x1[order[1:]]"): "(untuned16) greedy NMS (`while order.shape[0] > 0`): a data-dependent "
    "read inside a loop that runs once per kept box; the boxes kept are the data's (the returned count)",
    # torch_geometric's layers (UNTUNED16)
    ("cluster_gcn_conv.py", "edge_weight[row == col] +="): "(untuned16) the right side holds one value "
    "per node, in the order of the self loops the mask selects: a `torch.where` over the edges needs "
    "it spread by the loops' positions, which holds only because `add_self_loops` appends one loop "
    "per node in node order, a contract of another function, not of this line",
    ("hypergraph_conv.py", "int(hyperedge_index[1].max())"): "(untuned16) the number of hyperedges is "
    "the largest id + 1, and ids need not be dense, so no shape bounds it; the caller can pass "
    "`num_edges` (as with `global_mean_pool`'s `size`), a change to the caller's code",
    ("mf_conv.py", "(deg == i).nonzero()"): "(untuned16) each degree's rows go through their own "
    "Linear; the dense form (every Linear on every row, then selected) is not bit-equal: a Linear on "
    "a subset of the rows differs from it on all rows, then indexed, for 1 of 20 random subsets at "
    "the entry's sizes (20 nodes, 8 -> 16, CPU)",
    # fixes17: UNTUNED17 (transformers families of bench/untuned17_select.py's rule), each line read
    ("import_utils.py", "torch._check_tensor_all(cond)"): "(untuned17) transformers' "
    "`torch_compilable_check` under compile: `torch._check_tensor_all` reads the condition with `.item()` "
    "(gb0124), 9 of D-FINE's 10 break events. A graph form exists (`torch._assert_async(cond.all())`: the "
    "same RuntimeError on a false condition, an asynchronous one on an accelerator) but fuselint does not "
    "lint the function: no forward of the linted site files reaches it (the models call it through "
    "`transformers.utils`' re-export); the reach of that call is lint reach's work, not written here",
    ("output_capturing.py", "recordable_keys = {"): "(untuned17) fixed by main's comprehension-frame "
    "fix (FL108, blind): the `capture_outputs` wrapper's dict comprehension is a frame of its own (gb4347) "
    "only when the wrapped forward breaks; left only where that fix does not apply",
    ("modeling_fastspeech2_conformer.py", "if duration_labels.sum() == 0:"): "(untuned17) fixed since fix21 "
    "(FL102's safe masked-store fix, `duration_labels[row_zero & (duration_labels.sum() == 0)] = 1`); left "
    "only where that fix does not apply",
    ("modeling_fastspeech2_conformer.py", "hidden_states = torch.zeros("): "(untuned17) the frames are "
    "sized by `max_len`, the largest sum of predicted durations: the spectrogram's length, an output shape "
    "the caller sees (VITS' reason)",
    ("modeling_fastspeech2_conformer.py", "torch.repeat_interleave(encoded_embedding, target_duration"): (
        "(untuned17) each phoneme repeated by its predicted duration: a data-dependent length (the line above)"
    ),
    # fixes19: UNTUNED19 (the rest of fixes17's walk), each line read; the numbers are
    # `PYTHONPATH=. python bench/untuned19_checks.py` (the entry's own modules, 20 random row subsets)
    ("modeling_higgs_audio_v2.py", "hidden_states = hidden_states.masked_scatter("): "(untuned19) the "
    "decoder layer norms only the rows the audio-token mask selects and scatters them back; "
    "`torch.where(mask[..., None], norm(x), x)` is the same for a row-wise norm (its RMSNorms: 0 of 20 row "
    "subsets differ from all rows then indexed), but the same layer's MLPs run on the selected rows too "
    "(the lines below), whose dense form is not bit-equal, so the layer keeps its dynamic shapes; the "
    "masked_scatter-of-a-norm form is this family's alone in the five packages (grep), not written",
    ("modeling_higgs_audio_v2.py", "layernorm(hidden_states[audio_token_mask])"): "(untuned19) the "
    "selected rows of the line above: the number of audio tokens in the input",
    ("modeling_higgs_audio_v2.py", "layernorm(hidden_states[~audio_token_mask])"): "(untuned19) the "
    "text rows (see the masked_scatter line)",
    ("modeling_higgs_audio_v2.py", "hidden_states[~audio_token_mask] +="): "(untuned19) the text MLP's "
    "output added to the text rows; the MLP on every row, then selected, is not bit-equal (3 of 20 row "
    "subsets differ: a Linear on a subset of rows, MoE's reason)",
    ("modeling_higgs_audio_v2.py", "hidden_states[audio_token_mask] +="): "(untuned19) the audio MLP's "
    "output added to the audio rows (the line above: 3 of 20 row subsets differ)",
    ("modeling_jetmoe.py", "expert_size = expert_size.tolist()"): "(untuned19) tokens per expert size "
    "the split of the sorted tokens: the MoE's routing (switch_transformers' reason: a dense form runs "
    "every expert on every token and is not bit-equal)",
    ("modeling_openai_privacy_filter.py", ".nonzero()"): "(untuned19) the experts hit by the routing "
    "(switch_transformers' reason)",
    ("modeling_openai_privacy_filter.py", "if expert_idx == self.num_experts:"): "(untuned19) a loop "
    "over the hit experts (the line above) with a test on each one's index",
    # fix11: FL106's unbacked-size fix keeps a data-sized result in the graph; these are the reads of
    # its count that follow it, where dynamo breaks now (a Python branch or loop needs the number)
    ("modeling_switch_transformers.py", "for expert_idx in expert_hit:"): "(fix11) the loop over the hit "
    "experts, whose number the fixed `nonzero` above keeps in the graph as an unbacked size: iterating needs "
    'it on the host, and each expert\'s module is picked by the value (`self[f"expert_{expert_idx[0]}"]`)',
    ("modeling_openai_privacy_filter.py", "for expert_idx in expert_hit:"): "(fix11) the loop over the hit "
    "experts (switch_transformers' reason)",
    ("aliked.py", "if len(indices) > self.n_limit"): "(fix11) the keypoint count, kept in the graph by the "
    "fixed `nonzero` above, decides whether to cut to the n strongest: a branch on the data's count",
    ("detector.py", "heatmap[b][nmsed[b]]"): "(fix11) the scores at DISK's keypoints: the lint does not know "
    "`nmsed[b]` (a row of a boolean tensor) for a boolean mask, so FL106 does not flag the read; the "
    "`nonzero` on the line above is fixed",
    ("matching.py", "if len(match_dists) == 0"): "(fix11) the number of matches, now an unbacked size, picks "
    "the empty-result path",
    ("scale_space_detector.py", "if k_eff > 0"): "(fix11) the top-K's K is the smaller of num_features and "
    "the candidates' count: a branch on the data's count",
    ("sold2_detector.py", "if num_cand > group_size"): "(fix11) the candidates' count picks whether they are "
    "split into groups",
    ("sold2_detector.py", "len(detected_junc_indexes) > 0"): "(fix11) refinement runs only where some "
    "junction was detected: a branch on the data's count",
    ("sold2_detector.py", "for idx in range(num_segments)"): "(fix11) a loop as long as the detected "
    "segments' count",
    ("sold2_detector.py", "if len(junctions) == 0"): "(fix11) the empty-image path: a branch on the "
    "junctions' count",
    ("bbox.py", "if boxes.shape[0] != scores.shape[0]"): "(fix11, fix12) NMS checks that boxes and scores "
    "agree in count: two unbacked sizes dynamo cannot compare. `guard_or_false` decides such a check (fix12's "
    "FL102 fix; bench/fix12_count_probes.py `two_counts_guard_or_false`: 1 graph), but here both are "
    "parameters of `nms`, sized by its caller (`prob_to_junctions`' `torch.where` and mask read): the lint "
    "does not carry a data-sized kind across a call, and flagging every size check of two parameters "
    "would flag checks that never break",
    # fix12: FL102's guard fix decides the tests of a count above; what stays
    ("scale_space_detector.py", "if n_candidates < num_feats"): "(fix12) the octaves' candidates, each "
    "octave's top-K of min(num_features, its count), summed, decide whether to pad up to num_features: the "
    "count is built in another function (a list of the octaves' results) that the lint does not follow, "
    "and neither side is a general path (a negative pad crops; a top-K of num_features needs that many)",
}


def why_left(site: dict) -> str:
    """The recorded reason no fix removes `site`, matched on its file and its line's text."""
    try:
        text = Path(site["file"]).read_text(encoding="utf-8").splitlines()[site["line"] - 1]
    except (OSError, IndexError):
        return ""
    name = Path(site["file"]).name
    return next((why for (file, piece), why in NO_FIX.items() if file == name and piece in text), "")


def max_diff(a: str, b: str) -> str:
    import torch

    try:
        left, right = torch.load(a), torch.load(b)
    except (OSError, RuntimeError) as exc:
        return f"n/a ({type(exc).__name__})"
    return tensors_diff(left, right)


def tensors_diff(left: list, right: list) -> str:
    """The max abs diff of two lists of output tensors, or how they differ in count or shape."""
    if len(left) != len(right):
        return f"different outputs ({len(left)} vs {len(right)} tensors)"
    worst = 0.0
    for x, y in zip(left, right, strict=True):
        if x.shape != y.shape:
            return f"shape {tuple(x.shape)} vs {tuple(y.shape)}"
        if x.numel():
            worst = max(worst, (x.double() - y.double()).abs().max().item())
    return f"{worst:.2e}"


def left_sites(row: dict) -> int:
    """The sites a row leaves: all of them where the fixed copy failed to trace (a fix that makes the
    model fail to compile removes nothing), else the fixed trace's."""
    if row["after"].get("error"):
        return max(len(row["before"]["sites"]), len(row["after"]["sites"]))
    return len(row["after"]["sites"])


def _halves(rows: list[dict]) -> list[str]:
    """Sites removed in the entries fixes were written for and in those held out (real_corpus.TUNE)."""
    lines = []
    groups = (
        ("tuned on (fixes5 TUNE)", TUNE),
        ("held out (fixes5 HOLDOUT)", HOLDOUT),
        ("never tuned on (fixes9 UNTUNED9)", UNTUNED9),
        ("never tuned on (fixes16 UNTUNED16: kornia, torch_geometric's layers)", UNTUNED16),
        ("never tuned on (fixes17 UNTUNED17: transformers families not in the corpus)", UNTUNED17),
        ("never tuned on (fixes19 UNTUNED19: the rest of UNTUNED17's walk)", UNTUNED19),
    )
    for name, models in groups:
        chosen = [r for r in rows if r["model"] in models]
        if chosen:
            before = sum(len(r["before"]["sites"]) for r in chosen)
            left = sum(left_sites(r) for r in chosen)
            lines.append(f"- {name}: {before - left} of {before} sites removed over {len(chosen)} entries")
    others = [
        r for r in rows if r["model"] not in TUNE + HOLDOUT + UNTUNED9 + UNTUNED16 + UNTUNED17 + UNTUNED19
    ]
    if lines and others:
        before = sum(len(r["before"]["sites"]) for r in others)
        left = sum(left_sites(r) for r in others)
        lines.insert(
            0,
            f"- the corpus before fixes5: {before - left} of {before} sites removed over {len(others)} models",
        )
    return [*lines, ""] if lines else []


def table(rows: list[dict], fix_summary: str, own_files: bool = True, whole: list[str] | None = None) -> str:
    import torch

    before = sum(len(r["before"]["sites"]) for r in rows)
    after = sum(left_sites(r) for r in rows)
    removed = before - after
    lines = [
        "Fix rate on real break sites: `fuselint check --fix --unsafe-fixes` on a copy of each package,",
        "then dynamo again (tiny configs, random seeded weights, CPU, eval, no_grad).",
        "Linted: the files that hold the models' break sites"
        + (", and each model's own file (the file of the class the entry calls)" if own_files else "")
        + (f", and every file of {', '.join(whole)}." if whole else "."),
        f"torch {torch.__version__}, Python {platform.python_version()}; "
        "command: `PYTHONPATH=. python bench/fix_rate.py"
        + ("" if own_files else " --sites-only")
        + (f" --whole-packages {','.join(whole)}" if whole else "")
        + " --write bench/results/fix_rate.md`",
        "",
        f"**{removed} of {before} break sites removed ({100 * removed / max(before, 1):.0f}%)** over "
        f"{len(rows)} models from {len({r['package'] for r in rows})} packages (a model whose fixed copy "
        f"fails to trace counts as nothing removed). fuselint said: {fix_summary}",
        "",
        *_halves(rows),
        "| model | package | sites | graphs | break events | outputs max abs diff | left (file:line gb reason) |",
        "|---|---|---|---|---|---|---|",
    ]
    reasons = []
    for r in rows:
        b, a = r["before"], r["after"]
        left = "; ".join(describe_site(s, 60) for s in a["sites"])
        reasons.extend(
            f"- {r['model']}: {describe_site(s, 40)}: {why_left(s) or 'not yet examined'}" for s in a["sites"]
        )
        error = f" (after: {a['error']})" if a.get("error") else ""
        lines.append(
            f"| {r['model']}{error} | {r['package']} | {len(b['sites'])} → {len(a['sites'])} | "
            f"{b.get('graphs', 0)} → {a.get('graphs', 0)} | {b.get('events', 0)} → {a.get('events', 0)} | "
            f"{r['diff']} | {left or '-'} |"
        )
    if reasons:
        lines += ["", "Why each site that is left has no sound source fix:", "", *reasons]
    return "\n".join(lines) + "\n"


def same_fixes(moved: dict[str, str], fixed: Path, earlier: Path) -> set[str]:
    """The packages whose fixed files are byte for byte those of an earlier kept run's copy."""
    differ: set[str] = set()
    for copy in moved.values():
        relative = Path(copy).relative_to(fixed)
        old = earlier / "fixed" / relative
        if not old.exists() or old.read_bytes() != Path(copy).read_bytes():
            differ.add(relative.parts[0])
    return {Path(c).relative_to(fixed).parts[0] for c in moved.values()} - differ


def same_imports(row: dict, fixed: Path, earlier: Path) -> bool:
    """Every corpus file the earlier run's fixed trace of `row` imported is byte for byte the same in
    this run's fixed copy: that trace stands for this run's too (the installed packages being the same)."""
    imported = row.get("after", {}).get("imported")
    if not imported:
        return False
    for name in imported:
        new, old = fixed / name, earlier / "fixed" / name
        if not (new.exists() and old.exists() and new.read_bytes() == old.read_bytes()):
            return False
    return True


def files_list(table: str) -> str:
    """Where a full run writes the files it fixed (`package/...`, one a line) beside its table."""
    path = Path(table)
    return str(path.with_name(f"{path.stem}-files.txt"))


def model_files(models: list[str]) -> list[str]:
    """Each model's own file (`real_corpus.own_file`), from one process that builds them all."""
    done = subprocess.run(
        [sys.executable, str(HERE), "--own-files", ",".join(models)],
        capture_output=True,
        text=True,
        env=child_env(),
        check=True,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    return sorted({f for f in found.values() if f})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset of bench/real_corpus.py's models")
    parser.add_argument("--write", help="also write the Markdown table here")
    parser.add_argument("--keep", help="keep the fixed copy of the packages in this folder")
    parser.add_argument("--prove", action="store_true", help="keep only fixes the models' entries prove")
    parser.add_argument(
        "--reuse",
        help="an earlier run's --keep folder: its traces before the fix, and its rows for the models "
        "of packages whose fixed files come out byte-identical (the others are traced again)",
    )
    parser.add_argument(
        "--whole-packages",
        default="",
        help="comma-separated packages whose every file is linted too (what the package's own maintainers "
        "would run): reach then follows a model's calls through the layers between its file and a site's "
        "(fix11: torch_geometric's GCN -> gcn_norm -> add_remaining_self_loops)",
    )
    parser.add_argument(
        "--sites-only",
        action="store_true",
        help="lint only the files that hold break sites, not each model's own file too (the method before fixes19)",
    )
    args = parser.parse_args()
    models = args.models.split(",") if args.models else list(MODELS)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fuselint-fix-rate-"))
    work.mkdir(parents=True, exist_ok=True)
    earlier = Path(args.reuse) if args.reuse else None
    if earlier is not None and earlier.resolve() == work.resolve():
        parser.error("--reuse needs another folder than --keep")
    old_rows = {r["model"]: r for r in json.loads((earlier / "fix_rate.json").read_text())} if earlier else {}
    before, before_pt = {}, {}
    for model in models:
        if model in old_rows:
            before[model] = old_rows[model]["before"]  # the installed packages' own breaks
            before_pt[model] = earlier / f"{model}.before.pt"
        else:
            before_pt[model] = work / f"{model}.before.pt"
            before[model] = run_child(model, outputs=str(before_pt[model]))
        print(f"{model}: {len(before[model]['sites'])} sites before", file=sys.stderr)
    files = sorted({s["file"] for r in before.values() for s in r["sites"]})
    if not args.sites_only:
        files = sorted(set(files) | set(model_files(models)))
    whole = [p for p in args.whole_packages.split(",") if p]
    for name in whole:
        files = sorted(set(files) | {str(f) for f in Path(package_dirs()[name]).rglob("*.py")})
    packages = {p: d for p, d in package_dirs().items() if any(f.startswith(d + "/") for f in files)}
    if args.write and not args.models and not whole and not args.sites_only:
        # what bench/fix_gain.py fixes by default, so that it times the copy this table counts
        Path(files_list(args.write)).write_text("".join(f"{short_path(f)}\n" for f in files))
    fixed = work / "fixed"
    if fixed.exists():
        shutil.rmtree(fixed)
    moved, summary = fix_copy(files, packages, fixed, prove=models if args.prove else None)
    unchanged = same_fixes(moved, fixed, earlier) if earlier else set()
    rows, kept = [], 0
    for model in models:
        if model in old_rows and (
            package_of(model) in unchanged or same_imports(old_rows[model], fixed, earlier)
        ):
            rows.append(old_rows[model])
            kept += package_of(model) not in unchanged
            continue
        after = run_child(model, pythonpath=str(fixed), outputs=str(work / f"{model}.after.pt"))
        print(f"{model}: {len(after['sites'])} sites after {after.get('error', '')}", file=sys.stderr)
        diff = max_diff(str(before_pt[model]), str(work / f"{model}.after.pt"))
        rows.append(
            {
                "model": model,
                "package": package_of(model),
                "before": before[model],
                "after": after,
                "diff": diff,
            }
        )
    (work / "fix_rate.json").write_text(json.dumps(rows, indent=1))
    if unchanged:
        reused = sum(r["package"] in unchanged for r in rows)
        summary += (
            f" Rows of {reused} models taken from an earlier run whose fixed {', '.join(sorted(unchanged))} "
            "files are byte-identical to this run's; the others traced again."
        )
    if kept:
        summary += (
            f" Rows of {kept} more models taken from an earlier run: every corpus file their fixed trace "
            "imported is byte-identical to this run's."
        )
    text = table(rows, summary, not args.sites_only, whole)
    print(text)
    if args.write:
        Path(args.write).write_text(text)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
