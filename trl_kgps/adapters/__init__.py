"""
The TRL adapters. `grpo` binds the selection engine to `GRPOTrainer` and `RLOOTrainer`, `async_grpo` to
`AsyncGRPOTrainer`'s rollout worker; both build on `trainer_adapter` (saves, resume, model card) with `checkpoint`,
`report` and `distributed`. Only `trl_private` (the synchronous trainers' members) and `async_trl_private` (the
asynchronous trainer's private rollout loop, which only `async_grpo` imports) touch TRL's private members.
"""
