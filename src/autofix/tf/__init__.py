"""What TensorFlow and Keras names mean (:mod:`.symbols`), and the one-pass index of names,
scopes and parents that resolves them (:mod:`.index`)."""
