"""Training the project's own reading models from the public data in ``../shared/traindata/``.

In: the labelled pools (read where they lie, never copied into the repository) and the packaged
all-MiniLM-L6-v2 weights. Out: checkpoints and a learning curve under ``build/train/<task>/``, and, when asked,
an int8 ONNX model with its tokenizer and model card in ``pipeline/models/weights/<task>/``.

- ``data.py``      the pools as pairs, the held-apart part (by question id, and whole SQuAD articles), the
                   seeded per-epoch sample
- ``loop.py``      the fine-tuning loop: deterministic, progress with ETA, resumable checkpoints, learning curve
- ``export.py``    int8 ONNX export of the selected checkpoint, the model card and the results file
"""
