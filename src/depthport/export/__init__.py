"""export: the targets that write one file each (LiteRT, ExecuTorch, ONNX; ONNX with dynamic H and W) or one web
folder (a browser page, ``web``), and the export context. May import build, models, rewrites, fp16 and web; not
check, verify, bench, report (but its schema), pipeline or cli."""
