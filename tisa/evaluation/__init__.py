"""Evaluating trained models: :mod:`tisa.evaluation.extrapolation` scores masked LMs at
sequence lengths beyond (or within) the length they were trained at."""
