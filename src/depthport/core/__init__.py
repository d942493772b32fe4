"""core: the bottom layer. The three-state verdict, report.json's schema and the views the stages write it through
(``schema``), its typed view for readers (``report_model``, with the GPU check's and the browser runs' sections in
``report_gpu``), the parity metrics (``metrics``), the verification image sets (``images``), the .tflite flatbuffer
reader (``tflite_graph``), the machine description (``machine``) and provenance (``provenance``). Imports nothing
from depthport but the other bottom-layer modules (``errors``, ``atomic``, ``quiet``, ``preprocess``, ``outdir``,
``visualize``)."""
