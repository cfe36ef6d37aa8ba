"""The dispatch stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.pipeline.checks import NO_JOB, TRAINED, declare
from claimcheck.engine.stages.dispatch.checks import (
    PB_ACK,
    PB_DISABLED,
    PB_HEARTBEAT,
    PB_IDENTITY,
    PB_MONITOR,
    PB_RESUME,
    PB_RUNTIME,
)

declare("dispatch.required_checks", PB_DISABLED, shaped=False)
declare("dispatch.no_job", PB_DISABLED, tasks=NO_JOB, shaped=False)
declare("dispatch.identity", PB_IDENTITY, tasks=TRAINED)
declare("dispatch.acknowledged", PB_ACK, tasks=TRAINED, shaped=False)
declare("dispatch.progress", PB_HEARTBEAT, tasks=TRAINED)
declare("dispatch.liveness", PB_HEARTBEAT, tasks=TRAINED, shaped=False)
declare("dispatch.loss_curve", PB_MONITOR, tasks=TRAINED)
declare("dispatch.dev_metric", PB_MONITOR, tasks=TRAINED)
declare("dispatch.runtime", PB_RUNTIME, tasks=TRAINED)
# One check per alarm of the job (engine/training/alarms.py); a disabled alarm cites PB_DISABLED.
declare("dispatch.alarms.*", PB_MONITOR, tasks=TRAINED)
declare("dispatch.checkpoints", PB_RESUME, tasks=TRAINED)
declare("dispatch.resume", PB_RESUME, tasks=TRAINED, shaped=False)
declare(
    "dispatch.provider_record",
    "Distinguish control-plane records from provider work. Preserve provider call IDs and acknowledge uncertainty.",
    tasks=TRAINED,
    shaped=False,
    required=False,  # the Ray provider's record only
)
