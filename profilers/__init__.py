"""Profilers: Proton and ncu collection and normalization, device ceilings, the roofline.

One module per tool (proton.py, ncu.py), one typed metric model (metrics.py), the reading of
a harness's profile() result (normalize.py), devices (hardware.py) and the roofline
(roofline.py). This package imports nothing else of tlxdb.
"""
