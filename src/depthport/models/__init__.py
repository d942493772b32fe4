"""models: the architectures in export form (DINOv2, DPT, DualDPT, shared layers) and their configs. Layer 2: may
import core and torch only; weights, rewrites and families import models, never the reverse."""
