"""What a benchmark result was measured with, so that a reader can tell whether it was measured in their environment."""

import os
import platform
import subprocess
from importlib import metadata


PACKAGES = ("torch", "transformers", "trl", "accelerate", "datasets", "numpy", "peft", "tokenizers")


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (`platform.processor()` is often empty on Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(path: str | None = None) -> str | None:
    """The commit checked out at `path` (this repository by default), `+dirty` when the tree has changes."""
    path = path or os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=path, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+dirty" if dirty.strip() else "")


def environment(threads: int | None = None) -> dict:
    """
    The packages (`PACKAGES`, with their installed versions, `None` when absent), Python, the CPU model, its core
    count, the vector instructions torch's kernels dispatch to (`torch.backends.cpu.get_cpu_capability()`: results
    differ between AVX-512 and AVX2 kernels), the torch threads a run uses and the git commit.
    """
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return dict(
        packages=versions,
        python=platform.python_version(),
        cpu=cpu_model(),
        cores=os.cpu_count(),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        torch_threads=threads if threads is not None else torch.get_num_threads(),
        commit=git_commit(),
    )


def describe(env: dict) -> str:
    """One line for a report: `torch 2.13.0+cpu, transformers 5.23.0, ..., Python 3.11.7, <CPU> (AVX512), ...`."""
    packages = ", ".join(f"{name} {version}" for name, version in env["packages"].items() if version)
    return (
        f"{packages}; Python {env['python']}; {env['cpu']} ({env['cores']} cores, torch kernels "
        f"{env['cpu_capability']}, {env['torch_threads']} torch thread(s)); commit {env['commit']}"
    )
