"""Float64 convolutions in bands of rows (runtimes.conv_bands): the same convolution in bounded memory; and the
layer count long torch runs report (runtimes.torch.layer_progress)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthport.runtimes.conv_bands import BandedConv, band_rows, conv2d_banded
from depthport.runtimes.torch import TorchRunner

CASES = [  # (in, out, kernel, stride, padding, dilation, groups, height, width)
    (8, 4, 3, 1, 1, 1, 1, 37, 23),
    (8, 8, 3, 2, 1, 1, 8, 37, 23),
    (6, 4, 5, 2, 2, 2, 2, 41, 30),
    (4, 4, 1, 1, 0, 1, 1, 20, 20),
    (4, 4, 3, 3, 0, 1, 1, 20, 21),
    (4, 4, (3, 1), (2, 1), (1, 0), 1, 1, 19, 9),
]


@pytest.mark.parametrize("case", CASES)
def test_a_convolution_in_bands_of_one_row_equals_the_whole_one(case):
    cin, cout, k, s, p, d, g, h, w = case
    gen = torch.Generator().manual_seed(0)
    k2 = k if isinstance(k, tuple) else (k, k)
    x = torch.randn(1, cin, h, w, dtype=torch.float64, generator=gen)
    weight = torch.randn(cout, cin // g, *k2, dtype=torch.float64, generator=gen)
    bias = torch.randn(cout, dtype=torch.float64, generator=gen)
    whole = F.conv2d(x, weight, bias, s, p, d, g)
    assert band_rows(x, weight, s, p, d, band_bytes=1) == 1
    banded = conv2d_banded(x, weight, bias, s, p, d, g, band_bytes=1)
    assert banded.shape == whole.shape
    assert (banded - whole).norm() / whole.norm() < 1e-14


def test_the_mode_bands_only_float64_convolutions_above_the_bound():
    conv = nn.Conv2d(16, 8, 3, padding=1)
    x = torch.randn(1, 16, 64, 48)
    per_row = 16 * 9 * 48 * 8  # unfold bytes per output row in float64
    with torch.no_grad(), BandedConv(band_bytes=per_row * 10) as mode:
        out32 = conv(x)
        assert mode.bands == 0  # float32 goes through oneDNN as it is
        out64 = conv.double()(x.double())
        assert mode.bands == 1
    with torch.no_grad():
        assert (out64 - F.conv2d(x.double(), conv.weight, conv.bias, 1, 1)).abs().max() < 1e-12
        assert (out64.float() - out32).abs().max() < 1e-4
    with BandedConv(band_bytes=per_row * 64) as mode:  # the whole unfold fits: left as it is
        conv(x.double())
    assert mode.bands == 0


def test_a_float64_torch_runner_runs_its_large_convolutions_in_bands():
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 1, 3, padding=1)).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 1200, 800)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    runner = TorchRunner(model, (1200, 800), 2, dtype=torch.float64)
    out = runner.run(x)
    assert runner.banded_convs == 1  # the 32-channel convolution's unfold (2.2 GB) is over the bound
    assert np.abs(out - expected).max() < 1e-4


def test_layer_progress_counts_the_blocks_and_stages_of_a_depth_model(tiny_built):
    """The layers a long run reports (runtimes.torch.layers_of): the ViT blocks and the DPT stages, each once."""
    from depthport.runtimes.torch import layer_progress, layers_of

    built = tiny_built
    layers = layers_of(built.model)
    blocks = [m for m in built.model.modules() if isinstance(m, nn.ModuleList)][0]
    assert set(map(id, blocks)) <= set(map(id, layers)) and len(layers) > len(blocks)
    assert len(set(map(id, layers))) == len(layers)
    seen = []
    runner = TorchRunner(built.model, built.input_hw, 2)
    runner.on_layer = lambda done, total: seen.append((done, total))
    runner.run(np.zeros((1, 3, *built.input_hw), np.float32))
    assert seen == [(i, len(layers)) for i in range(1, len(layers) + 1)]
    with layer_progress(built.model, None):  # nothing to report: no hooks
        assert not any(m._forward_hooks for m in layers)



def _attentions(dim: int = 32, heads: int = 4):
    """The three attention forms on 301 tokens (a 30x10 grid and the class token)."""
    from depthport.models.layers import Attention
    from depthport.models.rope import RopeAttention, RopeTables, SplitHeadRopeAttention, token_positions

    torch.manual_seed(0)
    rope = RopeAttention(dim, heads, True, RopeTables(token_positions((30, 10), False), dim // heads)).eval()
    return {"attention": Attention(dim, heads).eval(), "rope": rope, "split-head rope": SplitHeadRopeAttention(rope)}


@pytest.mark.parametrize("kind", ["attention", "rope", "split-head rope"])
def test_attention_in_blocks_of_query_rows_equals_the_whole_and_never_makes_the_whole_logits(kind, monkeypatch):
    """``query_chunks``: 301 tokens, 4 heads, 4 rows of logits at a time; every softmax sees at most 4 query rows,
    and the output is the whole attention's. Outside the block, one whole attention again."""
    from depthport.models import layers

    attn = _attentions()[kind].eval()
    x = torch.randn(301, 32)
    seen = []
    softmax = torch.Tensor.softmax

    def spy(t, *a, **k):
        seen.append(t.shape[-2])
        return softmax(t, *a, **k)

    with torch.no_grad():
        whole = attn(x)
        monkeypatch.setattr(torch.Tensor, "softmax", spy)
        with layers.query_chunks(max_bytes=4 * 4 * 301 * 4):
            chunked = attn(x)
        outside = attn(x)
    assert seen == [4] * 75 + [1] + [301]
    assert torch.allclose(chunked, whole, rtol=0, atol=1e-6 * float(whole.abs().max()))
    assert torch.equal(outside, whole)


class _Probe(nn.Module):
    def forward(self, x):
        from depthport.models import layers

        self.seen = layers._query_chunk_bytes.get()
        return x


def test_a_torch_runner_runs_attention_in_blocks_of_query_rows():
    from depthport.models.layers import QUERY_CHUNK_BYTES

    probe = _Probe()
    TorchRunner(probe, (4, 4)).run(np.zeros((1, 3, 4, 4), np.float32))
    assert probe.seen == QUERY_CHUNK_BYTES


def test_a_runner_hands_back_what_building_its_model_freed(monkeypatch):
    """A runner that builds its model on first use (``rebuild``) gives the C heap back right after: the weights read
    back and the float32 tensors cast to float64 would otherwise sit in the resident set under the forward pass."""
    from depthport.runtimes import torch as runner_module

    calls = []
    monkeypatch.setattr(runner_module, "give_back", lambda: calls.append("give_back"))
    runner = TorchRunner(None, (4, 4), dtype=torch.float64, rebuild=lambda: (calls.append("build"), _Probe())[1])
    runner.run(np.zeros((1, 3, 4, 4), np.float32))
    runner.run(np.zeros((1, 3, 4, 4), np.float32))
    assert calls == ["build", "give_back"]
