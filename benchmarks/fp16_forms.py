"""Which fp16 .pte form: each candidate measured on this CPU's FP16 arithmetic (worst image against the upstream
model in FP32) and timed interleaved against the FP32 file, in one run.

A form is ``fp32``, ``plain`` (no cuts, head in FP16), ``nosplit+head`` (head in FP32) or ``sN+head`` / ``sN``
(reductions longer than N products in chunks, ``export.split_k``; ``+head``: the DPT head in FP32,
``export.fp32_head``). On a CPU without FP16 arithmetic the errors are FP16 storage only: see
``benchmarks/fp16_floor.py``, which says which it measured.

    python benchmarks/fp16_forms.py --model da2-small --size 518x686 --forms fp32,plain,s64+head,s128+head --time 3
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import numpy as np
import torch

from depthport.bench import Entry, time_interleaved
from depthport.build import build
from depthport.core.images import builtin_image
from depthport.core.metrics import rel_l2
from depthport.export.executorch import FORMS, backend_form, lower_xnnpack, write_pte
from depthport.preprocess import parse_size, to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.rewrites import default_rewrites
from depthport.runtimes import load_runner

IMAGES = ("astronaut", "camera", "chelsea")


def form_options(name: str) -> dict:
    if name in ("fp32", "plain"):
        return FORMS["fp32"] if name == "fp32" else {**FORMS["xnnpack-fp16"], "split_k": None, "fp32_head": False}
    cut, _, head = name.partition("+")
    chunk = None if cut == "nosplit" else int(cut.removeprefix("s"))
    return {**FORMS["xnnpack-fp16"], "split_k": chunk, "fp32_head": head == "head"}


def depth_map(out) -> np.ndarray:
    out = getattr(out, "predicted_depth", out)
    return np.asarray(out.float().squeeze() if torch.is_tensor(out) else out).squeeze()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="da2-small")
    ap.add_argument("--size", default="266x350")
    ap.add_argument("--forms", default="fp32,plain,nosplit+head,s64+head,s128+head,s256+head")
    ap.add_argument("--time", type=int, default=3, metavar="ROUNDS")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    hw = parse_size(args.size)
    built = build(args.model, hw, "random", rewrites=default_rewrites())
    normalize = "fold_input_normalization" not in built.rewrites
    xs = [torch.from_numpy(to_tensor(builtin_image(n), hw, normalize=normalize)) for n in IMAGES]
    upstream = reference_model(built.spec, built.weights).eval()
    with torch.no_grad():
        refs = [depth_map(upstream(x)) for x in xs]
        try:
            halves = [depth_map(upstream.half()(x.half())) for x in xs]
        except RuntimeError:  # depth_anything_3 mixes dtypes inside its head: depthport's model in half
            halves = [depth_map(copy.deepcopy(built.model).half()(x.half())) for x in xs]
    floor = [rel_l2(h, r) for h, r in zip(halves, refs)]
    print(f"floor (PyTorch half): {' '.join(f'{e:.3e}' for e in floor)}", flush=True)
    folder, files = Path(tempfile.mkdtemp()), {}
    for name in args.forms.split(","):
        with native_stderr_muted():
            module, _ = backend_form(built.model, **form_options(name))
            files[name] = write_pte(lower_xnnpack(module, torch.zeros(1, 3, *hw))[0], folder / f"{name}.pte")
        runner = load_runner(files[name], threads=args.threads)
        errors = [rel_l2(np.asarray(runner.run(x.numpy())).reshape(r.shape), r) for x, r in zip(xs, refs)]
        worst = int(np.argmax(errors))
        print(f"{name}: rel L2 {' '.join(f'{e:.3e}' for e in errors)}; worst {errors[worst]:.3e} "
              f"({errors[worst] / floor[worst]:.2f}x the floor)", flush=True)
    if args.time:
        entries = [Entry(name, load_runner(f, threads=args.threads), xs[0].numpy()) for name, f in files.items()]
        for r in time_interleaved(entries, args.time):
            print(f"time {r['label']}: median {r['median']:.1f} ms, x{r['ratio']['paired']:.3f} paired", flush=True)


if __name__ == "__main__":
    main()
