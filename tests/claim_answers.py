"""A complete claim for tests (the support-ticket routing claim of the sample data)."""

CLAIM = {
    "task_kind": "text_classification",
    "prediction_unit": "one incoming support ticket at triage time",
    "target_meaning": "the queue a human dispatcher routed the ticket to",
    "target_kind": "recorded_workflow_label",
    "inference_inputs": ["subject", "body", "channel", "product"],
    "population": "tickets from existing customers, all channels",
    "primary_metric": "macro_f1",
    "metric_averaging": "macro",
    "class_order": ["account", "billing", "returns", "security", "shipping", "technical"],
    "success": {"metric": "macro_f1", "op": ">=", "value": 0.02, "relative_to": "best_baseline"},
    "comparators": ["trivial_baseline", "best_baseline", "base_model"],
    "fine_tuning": True,
    "run_scope": "one LoRA/QLoRA fine-tune of the requested encoder; no tuning sweep",
    "label_quality_limits": "dispatcher labels, never audited; some tickets are ambiguous",
}
