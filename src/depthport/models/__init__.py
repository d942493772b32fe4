"""Architectures, kept apart from weights (see depthport.weights) and from graph rewrites (depthport.rewrites)."""
