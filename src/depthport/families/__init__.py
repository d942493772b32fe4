"""The architecture families (`depthport.spec.Family`), one module each: how each is built, loaded, checked
against its upstream and fed. Torch and the upstream packages are imported when a function runs, so that the
registry (and `depthport predict`, `depthport models`) can read the families without importing torch."""
