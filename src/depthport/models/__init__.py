"""models: the architectures in export form (DINOv2, DPT, DualDPT, shared layers) and their configs.
May import torch only; weights, rewrites and families import models, never the reverse."""
