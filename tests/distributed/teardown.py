"""How every torchrun script here ends (tests/RECORD.md, "Exiting cleanly after gloo collectives")."""

import os
import sys

import torch.distributed as dist


def finish() -> None:
    """Waits for every rank, destroys the process groups, flushes, and leaves without the interpreter's teardown.

    A gloo collective returns to Python before its worker thread destroys the work, which can release the last
    reference to a tensor with a Python object, and that takes the GIL. When the main thread has begun finalizing
    the interpreter by then, the worker is made to exit in the middle of a C++ destructor and the rank aborts
    ("terminate called without an active exception", pytorch/pytorch#190489). `destroy_process_group()` neither
    stops nor joins the workers; `os._exit` ends the process with them, without finalizing, once every result is
    written.
    """
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
