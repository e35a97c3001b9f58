"""``tisa demo``: the main job on embedded defaults, no flags needed.

Runs, on this machine's CPU and real material that installs from the package registries:

1. the default positional scoring functions of every family, per head (figure);
2. the translation-invariance analysis of all-MiniLM-L6-v2 (the offline package): its
   position embeddings, layer-1 positional attention and attention probes;
3. the attention benchmark at small sizes (ratios against SDPA without bias);
4. a short masked-LM pretraining of a tiny ALBERT on Penn Treebank with absolute position
   embeddings and with TISA instead, then both scored at longer sequence lengths;
5. the translation invariance of a tiny absolute run at each of its checkpoints, every
   figure next to its nulls;
6. a short conversion of all-MiniLM-L6-v2 to TISA (``tisa convert`` on a tiny budget):
   its STS-B score before and after, and the converted model on a 1024-token input;
7. a small GLUE fine-tuning (SST-2 subset) of all-MiniLM-L6-v2 with and without TISA;

and writes every figure and table into one standalone ``report.html``.

Modules: :mod:`~tisa.demo.config` (:class:`~tisa.demo.config.DemoConfig`, the settings),
:mod:`~tisa.demo.sections` (one function per part, each returning its report section) and
:mod:`~tisa.demo.run` (:func:`~tisa.demo.run.run_demo`: the parts in order, the report and
demo.json).
"""
