"""Kernel sources live on disk by content hash, are reused across processes, and can be dumped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from backend_helpers import aten_graph, flat, needs_interpreter

from fuselint.backend import history
from fuselint.backend.compiler import compile_graph

pytestmark = needs_interpreter

ROOT = Path(__file__).resolve().parents[2]


def _compile(fn, *args):
    gm = compile_graph(aten_graph(fn, *args), list(args))
    return gm, history[-1].kernels


def test_kernel_source_is_cached_by_hash_and_reused_by_another_process(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSELINT_CACHE_DIR", str(tmp_path))
    x = torch.randn(4, 32)
    gm, kernels = _compile(lambda x: torch.tanh(x) * 3, x)
    kernel = kernels[0]
    assert kernel.path.parent == tmp_path and kernel.path.read_text() == kernel.source
    mtime = kernel.path.stat().st_mtime_ns
    torch.testing.assert_close(flat(gm(x))[0], torch.tanh(x) * 3)
    script = (
        "import json, sys\n"
        "from fuselint.backend.runtime import load_kernel, source_path\n"
        "src = open(sys.argv[1]).read()\n"
        "existed = source_path(src).exists()\n"
        "fn = load_kernel(src, sys.argv[2], interpret=True)\n"
        "print(json.dumps({'existed': existed, 'file': fn.fn.__code__.co_filename}))\n"
    )
    env = dict(os.environ, FUSELINT_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", script, str(kernel.path), kernel.__name__],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"existed": True, "file": str(kernel.path)}
    assert kernel.path.stat().st_mtime_ns == mtime


def test_same_graph_gives_the_same_source():
    x = torch.randn(4, 32)
    _, first = _compile(lambda x: torch.softmax(x, -1), x)
    _, second = _compile(lambda x: torch.softmax(x, -1), x)
    assert first[0].source == second[0].source and first[0].path == second[0].path


def test_a_repeated_layer_compiles_to_the_same_source():
    # two blocks of the same shape, a matmul between them so that they do not fuse: the second
    # block's kernel is the first's text (node names do not leak into it), one module, one compile
    def layers(x, w):
        for _ in range(2):
            x = torch.relu(x @ w) * 2 + 1
        return x

    x, w = torch.randn(8, 16), torch.randn(16, 16)
    _, kernels = _compile(layers, x, w)
    assert len(kernels) == 2, [k.__name__ for k in kernels]
    assert kernels[0].source == kernels[1].source and kernels[0].path == kernels[1].path
    assert kernels[0].fn is kernels[1].fn  # one @triton.jit function: Triton compiles it once
    torch.testing.assert_close(torch.compile(layers, backend="fuselint")(x, w), layers(x, w))


def test_dump_dir_receives_readable_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSELINT_DUMP_DIR", str(tmp_path / "dump"))
    x, w = torch.randn(4, 64), torch.randn(64)
    _compile(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, x, w)
    files = list((tmp_path / "dump").glob("fuselint_*.py"))
    assert len(files) == 1
    text = files[0].read_text()
    for piece in ("Fused ATen nodes:", "aten.mean.dim", "@triton.jit", "tl.load(", "tl.sum(", "tl.store("):
        assert piece in text


def test_fresh_cache_dir_when_caching_is_off(monkeypatch):
    monkeypatch.setenv("FUSELINT_CACHE", "0")
    x = torch.randn(4, 32)
    _, kernels = _compile(lambda x: torch.sin(x) + 2, x)
    assert "fuselint-kernels-" in str(kernels[0].path)


def test_fresh_cache_dir_is_removed_when_the_process_ends(tmp_path):
    script = (
        "import torch\n"
        "from backend_helpers import aten_graph\n"
        "from fuselint.backend import history\n"
        "from fuselint.backend.compiler import compile_graph\n"
        "x = torch.randn(4, 32)\n"
        "compile_graph(aten_graph(lambda x: torch.cos(x) - 1, x), [x])\n"
        "path = history[-1].kernels[0].path\n"
        "assert path.exists()\n"
        "print(path.parent)\n"
    )
    env = dict(
        os.environ,
        FUSELINT_CACHE="0",
        TRITON_INTERPRET="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests" / "backend")]),
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    folder = Path(out.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("fuselint-kernels-")
    assert not folder.exists()
