"""The artifact stage's machinery, below the stage module (engine/stages/artifact/run.py keeps the
inputs, `run`, identity, parity and the four outcomes): arms.py predicts every arm and counts it,
quality.py compares the arms on the rows every arm scored. Causal-LM SFT: sft.py runs the
generating arms under the decoding contract (decoding.py) with generate.py's greedy answers,
reference loss and SQuAD-style answer metrics."""
