"""Facts about metric names that the claim, the baseline, the artifact stage and the report share.
Plain constants, no imports: importing them never loads numpy."""

# Metrics where a smaller value is better.
LOWER_IS_BETTER = frozenset({"log_loss", "brier", "mae", "rmse"})
