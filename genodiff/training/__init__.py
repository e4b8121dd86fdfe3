"""Training a ``genodiff.model.GenerativeModel`` with Lightning (``genodiff train``).

- ``module``: ``GenerativeTrainingModule``, the model plus its training, validation and test
  steps, held-out logging and the run's state in every checkpoint;
- ``random_state``: the global RNG state in checkpoints (``RandomStateInCheckpoints``, shared
  with the fine-tuning module) and seeded generators;
- ``optim``: AdamW with a linear warm-up and cosine learning-rate schedule;
- ``trainer``: the run's tokenizer, the Trainer, its checkpoint callback (``LatestCheckpoint``);
- ``epochs``: the epoch of the latest training batch, in progress lines and logs (in
  checkpoints, and a run that ``trainer.max_steps`` ended part-way through an epoch resuming
  in that epoch: ``genodiff.checkpoints.epochs``).
"""
