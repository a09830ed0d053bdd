"""The benchmarks behind `make bench*` (docs/benchmarks.md): development tools, never part of
the runtime install."""
