"""autofix's rules, one module each. The engine finds them here; nothing else lists them.

ORDER is the order in which fixes are applied to a file, where it matters:
- TFD010 (``autofix migrate`` only) before every other: it creates the strategy that the others
  then distribute the training under, in the same pass.
- TFD001 first of the others: it puts model construction into ``strategy.scope()`` (and may create or move
  the strategy), which every later rule assumes.
- TFD002 before TFD003/TFD004: the generated train steps and loss reductions use the global
  batch size that TFD002 defines.
- TFD005 after them: it scales the learning rate of optimizers that TFD001 has already placed.
- TFD006 after TFD001: it judges a model by the strategy scope it is made in, which TFD001
  may have just written.
The multi-worker rules TFD007-TFD009 and TFD011, and TFD012, need no place in the order.
"""

ORDER = ("TFD010", "TFD001", "TFD002", "TFD003", "TFD004", "TFD005", "TFD006")
