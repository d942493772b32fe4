"""core: the bottom layer. The three-state verdict and report.json's schema (``schema``), the parity metrics
(``metrics``), the verification image sets (``images``), the .tflite flatbuffer reader (``tflite_graph``), the
machine description (``machine``) and provenance (``provenance``). Imports nothing from depthport but the other
bottom-layer modules (``errors``, ``atomic``, ``quiet``, ``preprocess``, ``outdir``, ``visualize``)."""
