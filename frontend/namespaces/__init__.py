"""TensorFlow's namespaces over fragflow's functions: ff.nn, ff.math, ff.image,
ff.losses, ff.linalg, ff.random, ff.train, ff.keras. Each module holds TensorFlow's names
and arguments (aliases of the flat ff functions where they are the same); a name
fragflow lacks raises AttributeError with the fragflow spelling, where one exists.
See docs/TENSORFLOW.md."""
