"""Tasks the package generates itself, with their verifiers: no download needed to train, test or benchmark."""
