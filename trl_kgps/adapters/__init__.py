"""
The TRL adapters: `grpo` binds the selection engine to `GRPOTrainer` and `RLOOTrainer`, `async_grpo` to
`AsyncGRPOTrainer`'s rollout worker. `trl_private` and `async_trl_private` are the only modules that touch TRL's
private members.
"""
