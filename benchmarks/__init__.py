"""Hand-run benchmarks (never run in CI; figures and commands in docs/performance.md).

A package so that the scripts import the shared harness (``benchmarks.harness``) and each other's
contenders by name. Run one from the repository root as ``python benchmarks/<name>.py`` or
``python -m benchmarks.<name>``.
"""
