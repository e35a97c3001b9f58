"""GLUE fine-tuning over seeds (``tisa glue``): :mod:`tisa.glue.config` (what an experiment
is), :mod:`tisa.glue.run` (training and evaluation), :mod:`tisa.glue.results` (medians,
averages, paired comparisons) and :mod:`tisa.glue.report` (report.html)."""
