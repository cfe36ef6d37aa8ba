"""The seven stages, one package each (claim, source, split, baseline, contract, dispatch, artifact).

Each package holds `inputs.py` (what the person decides, with its defaults; the bottom of the package),
the checks by concern, and `run.py` (TITLE, Inputs, run). The stage table that names them is
`claimcheck.engine.pipeline.registry`, below the stages: it reaches each `run` module by name.
"""
