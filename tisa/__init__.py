"""tisa: translation-invariant self-attention.

Measure how translation invariant a transformer's positional machinery is, train models
whose attention uses learned positional scoring functions f_h(j - i), and see what they
learned.
"""

__version__ = "0.1.0"
