"""Detectors over the cluster view, one module each, sharing one view and one signal book.

Adding a detector: a module here with a class built on ``Detector``, its settings group in
``models/settings.py`` (``DetectorSettings``), and one line in ``registry.DETECTORS``.
"""
