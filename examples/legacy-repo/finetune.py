"""Fine-tune the saved MLP with a lower learning rate."""
import tensorflow as tf

from data.pipeline import make_dataset

strategy = tf.distribute.MirroredStrategy()

model = tf.keras.models.load_model("mlp.keras")
model.compile(optimizer=tf.keras.optimizers.SGD(1e-4, momentum=0.9),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(make_dataset(), epochs=2)
