"""Everything autofix knows about TensorFlow and Keras lives in this package."""
