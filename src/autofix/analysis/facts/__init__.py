"""What the script does with tf.distribute and Keras: its strategies and their scopes, what a
call makes, runs or does, where data goes, what may move past what, how many examples an array
holds, and which Keras it was written for."""
