"""
The selection engine: what KGPS does in a trainer, with no trainer in it (numpy only). It chooses each generation
batch with a prompt selector, keeps the batches awaiting rewards, turns rewards into outcomes, feeds them to the
selector, computes the `kgps/*` metrics, and saves all of it to `kgps_state.npz`.
"""
