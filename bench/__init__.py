"""Benchmarks that drive StrictCall the way users do. Nothing imports `bench`."""
