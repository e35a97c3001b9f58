"""Pretraining: masked-LM and causal-LM runs with any position scheme (``tisa pretrain``),
and the length extrapolation of their runs (``tisa extrapolate``).

* :mod:`tisa.pretrain.config`: :class:`~tisa.pretrain.config.PretrainConfig` and
  :class:`~tisa.pretrain.config.ExtrapolateConfig` (plain data, light to import);
* :mod:`tisa.pretrain.schemes`: position schemes and model sizes;
  :mod:`tisa.pretrain.build`: the model of a run; :mod:`tisa.pretrain.masked_lm` and
  :mod:`tisa.pretrain.causal_lm`: the two objectives;
* :mod:`tisa.pretrain.run`: :func:`~tisa.pretrain.run.pretrain`;
  :mod:`tisa.pretrain.callbacks`: what a run records while it trains;
* :mod:`tisa.pretrain.extrapolation` with :mod:`tisa.pretrain.extrapolation_results`:
  scoring finished runs at other lengths.
"""
