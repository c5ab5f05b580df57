"""The training program: where training happens and what takes part in it, what feeds
``strategy.run`` and where a dataset can be distributed, and what runs when the script is one
of several workers."""
