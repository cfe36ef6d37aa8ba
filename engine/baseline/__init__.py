"""The baseline stage's machinery, below the stage module (engine/stages/baseline/run.py keeps the
inputs and `run`): learners.py fits and predicts, evaluation.py holds what every check reads,
classification.py / thresholds.py / other_tasks.py build the checks, records.py the saved files."""
