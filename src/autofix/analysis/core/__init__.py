"""Values and flow: where a value comes from (names, parameters and their callers, returns,
attributes, containers), and what a run of statements reads and sets. Knows nothing of
TensorFlow: what an origin means is for the layers above to say."""
