"""Detectors over the cluster view, one module each, sharing one view and one signal book.

Adding a detector: a class built on ``Detector`` and one ``DETECTORS.register`` line, here or
in a plugin module named by ``GPUFRAG_PLUGINS`` (README.md lists every step).
"""
