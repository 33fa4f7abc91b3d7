"""The other GRPO implementations ``experiments.benchmarks.step`` runs beside ours on the same
work: TRL's ``GRPOTrainer`` (``trl``) and Google Tunix's ``GRPOLearner`` (``tunix``)."""
