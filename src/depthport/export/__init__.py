"""export: the targets that write one file each (LiteRT, ExecuTorch, ONNX; ONNX with dynamic H and W) or one web
folder (a browser page, ``web``), and the export context. Layer 5, the lowest stage: may import core, models,
runtimes, web, fp16, rewrites and build; not check, verify, bench, report, pipeline or cli."""
