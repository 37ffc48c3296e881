"""Upstream eval frameworks: their lane runners run in a child process of the checkout's own
interpreter (process, child), the version of a checkout a run measures (checkout), and their
lanes imported as framework_runner lane folders (importer)."""
