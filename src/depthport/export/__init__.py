"""export: the targets that write one file each (LiteRT, ExecuTorch, ONNX) and the export context.
May import build, models, rewrites and fp16; not check, verify, bench, report (but its schema), pipeline or cli."""
