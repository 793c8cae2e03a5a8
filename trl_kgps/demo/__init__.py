"""
The demo and the simulator behind `trl-kgps train` and `trl-kgps simulate`, their plots and the benchmark's named
variants. Nothing on the training path imports this package.
"""
