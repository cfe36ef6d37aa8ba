"""The dispatch stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.pipeline.checks import JOB, NO_JOB, declare
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
declare("dispatch.no_job", PB_DISABLED, tasks=NO_JOB, shaped=False, fine_tuning=False)
declare("dispatch.identity", PB_IDENTITY, tasks=JOB, fine_tuning=True)
declare("dispatch.acknowledged", PB_ACK, tasks=JOB, shaped=False, fine_tuning=True)
declare("dispatch.progress", PB_HEARTBEAT, tasks=JOB, fine_tuning=True)
declare("dispatch.liveness", PB_HEARTBEAT, tasks=JOB, shaped=False, fine_tuning=True)
declare("dispatch.loss_curve", PB_MONITOR, tasks=JOB, fine_tuning=True)
declare("dispatch.dev_metric", PB_MONITOR, tasks=JOB, fine_tuning=True)
declare("dispatch.runtime", PB_RUNTIME, tasks=JOB, fine_tuning=True)
# One check per alarm of the job (engine/training/alarms.py); a disabled alarm cites PB_DISABLED.
declare("dispatch.alarms.*", PB_MONITOR, tasks=JOB, fine_tuning=True)
declare("dispatch.checkpoints", PB_RESUME, tasks=JOB, fine_tuning=True)
declare("dispatch.resume", PB_RESUME, tasks=JOB, shaped=False, fine_tuning=True)
declare(
    "dispatch.provider_record",
    "Distinguish control-plane records from provider work. Preserve provider call IDs and acknowledge uncertainty.",
    tasks=JOB,
    shaped=False,
    fine_tuning=True,
    required=False,  # the Ray provider's record only
)
