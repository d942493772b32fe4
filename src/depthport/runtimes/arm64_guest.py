"""Run inside the emulated aarch64 Python (depthport.runtimes.arm64): ExecuTorch only, no depthport imports.

    python arm64_guest.py THREADS SENTINEL.pte MODEL.pte IN_DIR OUT_DIR

Writes OUT_DIR/sentinel.npy (the sentinel file's output) and, for each IN_DIR/<name>.npz (arrays arg0, arg1...
in input order), OUT_DIR/<name>.npy with the model's first output in float32.
"""

import sys
from pathlib import Path

import numpy as np
import torch
from executorch.extension.pybindings import portable_lib
from executorch.runtime import Runtime

threads, sentinel, model, in_dir, out_dir = int(sys.argv[1]), *map(Path, sys.argv[2:6])
portable_lib._unsafe_reset_threadpool(threads)
runtime = Runtime.get()
probe = runtime.load_program(sentinel).load_method("forward")
np.save(out_dir / "sentinel.npy", probe.execute([torch.ones(1, 12, 4096)])[0].float().numpy())
method = runtime.load_program(model).load_method("forward")
for f in sorted(in_dir.glob("*.npz")):
    with np.load(f) as z:
        args = [torch.from_numpy(z[f"arg{i}"]) for i in range(len(z.files))]
    np.save(out_dir / f"{f.stem}.npy", np.asarray(method.execute(args)[0].float().numpy(), np.float32))
    print(f"done {f.stem}", flush=True)
