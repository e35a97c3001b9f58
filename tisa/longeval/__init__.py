"""Long-input retrieval benchmark of sentence-embedding encoders: ``tisa longeval``.

Modules: :mod:`~tisa.longeval.config` (the settings), :mod:`~tisa.longeval.tasks` (passkey,
needle and passage retrieval problems), :mod:`~tisa.longeval.strategies` (how a model
with a position table reads longer documents), :mod:`~tisa.longeval.run` (the runner),
:mod:`~tisa.longeval.results` (scores, tables) and
:mod:`~tisa.longeval.report` (report.html). See docs/longeval.md.
"""
