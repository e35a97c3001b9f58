"""Training: masked-LM pretraining, GLUE fine-tuning, length extrapolation, callbacks."""
