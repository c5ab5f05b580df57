"""Custom training steps and their losses: what ``strategy.run`` runs, what its tapes
differentiate, what runs in a ``tf.function``, a step's loss term by term, and where a value a
fix would change goes."""
